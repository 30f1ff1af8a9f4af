"""SpeedIdentities: each speed a speaker of its own, drawn per item from its seed alone."""
from __future__ import annotations

import pytest
import torch

from speechkit.augment import SpeedIdentities
from speechkit.errors import HparamsError


def test_each_speed_is_a_new_identity_and_the_audio_is_played_at_that_speed():
    identities = SpeedIdentities(speeds=[1.0, 0.9, 1.1])
    torch.manual_seed(0)
    wavs, lengths = torch.randn(12, 8000), torch.full((12,), 8000)
    labels = torch.arange(12) % 4
    out, out_lengths, out_labels = identities(wavs, lengths, labels.tolist(), 4, torch.arange(100, 112))
    choices = (out_labels - labels) // 4
    assert ((out_labels - labels) % 4 == 0).all() and set(choices.tolist()) == {0, 1, 2}
    expected = {0: 8000, 1: round(8000 / 0.9), 2: round(8000 / 1.1)}
    for row, choice in enumerate(choices.tolist()):
        assert abs(int(out_lengths[row]) - expected[choice]) <= 1
        assert (out[row, int(out_lengths[row]):] == 0).all()
        if choice == 0:  # speed 1.0: the samples as they were
            assert torch.equal(out[row, :8000], wavs[row])
    assert identities.num_classes(4) == 12


def test_an_item_gets_the_same_speed_alone_and_in_any_batch():
    identities = SpeedIdentities()
    wavs, lengths = torch.randn(5, 4000), torch.tensor([4000, 3000, 3500, 2000, 4000])
    seeds, labels = torch.tensor([7, 8, 9, 10, 11]), torch.tensor([0, 1, 2, 3, 4])
    batch = identities(wavs, lengths, labels, 5, seeds)
    for row in range(5):
        one = slice(row, row + 1)
        alone = identities(wavs[one, : int(lengths[row])], lengths[one], labels[one], 5, seeds[one])
        assert int(alone[2][0]) == int(batch[2][row]) and int(alone[1][0]) == int(batch[1][row])
        assert torch.equal(alone[0][0], batch[0][row, : int(batch[1][row])])


@pytest.mark.parametrize("speeds", [[], [1.0, 1.0], [0.3, 1.0], [1.0, 2.5]])
def test_bad_speeds_are_refused(speeds):
    with pytest.raises(HparamsError, match="SpeedIdentities: speeds"):
        SpeedIdentities(speeds=speeds)
