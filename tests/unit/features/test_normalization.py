"""Length-aware normalization: padding never enters a statistic; global statistics live in state_dict."""
from __future__ import annotations

import pytest
import torch

from speechkit.features import (
    GlobalNormalization,
    UtteranceNormalization,
    masked_moments,
    utterance_normalize,
)
from tests.helpers.batch_invariance import assert_batch_invariant


def batch_with_garbage_padding(lengths, features=6, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), max(lengths), features, generator=generator) * 2.0 + 5.0
    for i, length in enumerate(lengths):
        x[i, length:] = 1e4  # would ruin any statistic it entered
    return x, torch.tensor(lengths)


def test_masked_moments_equal_statistics_of_the_real_frames():
    x, lengths = batch_with_garbage_padding([7, 3, 5])
    mean, var = masked_moments(x, lengths)
    for i, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(mean[i], x[i, :length].mean(0))
        torch.testing.assert_close(var[i], x[i, :length].var(0, unbiased=False))
    empty_mean, empty_var = masked_moments(torch.randn(1, 4, 2), torch.tensor([0]))
    assert torch.all(empty_mean == 0) and torch.all(empty_var == 1)


def test_utterance_normalization_standardizes_each_item_and_is_batch_invariant():
    x, lengths = batch_with_garbage_padding([9, 4, 6])
    y = utterance_normalize(x, lengths)
    for i, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(y[i, :length].mean(0), torch.zeros(6), atol=1e-5, rtol=0)
        torch.testing.assert_close(y[i, :length].std(0, unbiased=False), torch.ones(6), atol=1e-4, rtol=0)
        assert torch.all(y[i, length:] == 0)
    centered_only = utterance_normalize(x, lengths, norm_vars=False)
    torch.testing.assert_close(centered_only[0, :9], x[0, :9] - x[0, :9].mean(0))
    assert_batch_invariant(UtteranceNormalization(), [torch.randn(n, 4) for n in (9, 2, 5)])


def test_global_normalization_accumulates_real_frames_only():
    norm = GlobalNormalization(num_features=6)
    first, first_lengths = batch_with_garbage_padding([7, 3, 5], seed=1)
    second, second_lengths = batch_with_garbage_padding([4, 8], seed=2)
    norm.train()
    norm(first, first_lengths)
    out, _ = norm(second, second_lengths)
    frames = torch.cat([first[0, :7], first[1, :3], first[2, :5], second[0, :4], second[1, :8]])
    torch.testing.assert_close(norm.mean, frames.mean(0))
    torch.testing.assert_close(norm.var, frames.var(0, unbiased=False), atol=1e-4, rtol=1e-4)
    assert int(norm.count) == 27 and int(norm.num_updates) == 2
    expected = (second[1, :8] - frames.mean(0)) / frames.std(0, unbiased=False)
    torch.testing.assert_close(out[1, :8], expected, atol=1e-4, rtol=1e-4)
    assert torch.all(out[0, 4:] == 0)


def test_global_statistics_round_trip_through_state_dict_and_eval_does_not_update():
    norm = GlobalNormalization(num_features=6)
    x, lengths = batch_with_garbage_padding([7, 3, 5])
    norm(x, lengths)
    state = norm.state_dict()
    assert set(state) == {"count", "sum", "sum_squares", "num_updates"}
    restored = GlobalNormalization(num_features=6)
    restored.load_state_dict(state)
    restored.eval()
    norm.eval()
    before = restored.state_dict()["count"].clone()
    torch.testing.assert_close(restored(x, lengths)[0], norm(x, lengths)[0])
    assert torch.equal(restored.count, before)
    assert_batch_invariant(restored, [torch.randn(n, 6) for n in (8, 3, 5)])


def test_global_normalization_freezes_after_max_updates_and_passes_through_when_empty():
    norm = GlobalNormalization(num_features=3, max_updates=1)
    untouched, _ = norm.eval()(torch.ones(1, 2, 3), torch.tensor([2]))
    torch.testing.assert_close(untouched, torch.ones(1, 2, 3))  # no statistics yet: unchanged
    norm.train()
    norm(torch.randn(2, 5, 3), torch.tensor([5, 2]))
    count = float(norm.count)
    norm(torch.randn(2, 5, 3), torch.tensor([5, 5]))
    assert float(norm.count) == count and int(norm.num_updates) == 1
    with pytest.raises(ValueError, match="expects 3 features"):
        norm(torch.randn(1, 2, 4), torch.tensor([2]))
