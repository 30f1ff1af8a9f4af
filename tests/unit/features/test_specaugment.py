"""SpecAugment: masks stay inside each item's frames, widths respect their limits, eval mode is a no-op."""
from __future__ import annotations

import pytest
import torch

from speechkit.features import SpecAugment, freq_mask, time_mask, time_warp

PAD = 123.0


def padded_batch(lengths, channels=20, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(len(lengths), max(lengths), channels, generator=generator) + 1.0  # never 0 or PAD
    for i, length in enumerate(lengths):
        x[i, length:] = PAD
    return x, torch.tensor(lengths)


def masked_spans(row):
    """(start, width) of each run of zeroed frames in a (frames,) bool row."""
    spans, start = [], None
    for t, value in enumerate(row.tolist() + [False]):
        if value and start is None:
            start = t
        elif not value and start is not None:
            spans.append((start, t - start))
            start = None
    return spans


def test_time_masks_lie_inside_each_item_and_respect_width_limits():
    x, lengths = padded_batch([100, 40, 12, 70])
    out = time_mask(x, lengths, num_masks=2, max_width=10, generator=torch.Generator().manual_seed(1))
    assert torch.all(out[x == PAD] == PAD)  # padding untouched
    masked_frames = (out == 0).all(dim=-1)
    for i, length in enumerate(lengths.tolist()):
        assert not masked_frames[i, length:].any()
        assert int(masked_frames[i].sum()) <= 20
        assert all(width <= 20 for _, width in masked_spans(masked_frames[i]))  # two masks may touch
    ratio = time_mask(x, lengths, num_masks=1, max_width=50, max_ratio=0.1,
                      generator=torch.Generator().manual_seed(2))
    widths = (ratio == 0).all(dim=-1).sum(dim=1).tolist()
    assert all(w <= int(0.1 * n) for w, n in zip(widths, lengths.tolist()))


def test_frequency_masks_cover_whole_channels_on_real_frames_only():
    x, lengths = padded_batch([30, 10, 20], channels=40)
    out = freq_mask(x, lengths, num_masks=2, max_width=8, generator=torch.Generator().manual_seed(0))
    assert torch.all(out[x == PAD] == PAD)
    for i, length in enumerate(lengths.tolist()):
        zero_channels = (out[i, :length] == 0).all(dim=0)
        assert torch.equal((out[i, :length] == 0).any(dim=0), zero_channels)  # a band masks every frame
        assert 0 <= int(zero_channels.sum()) <= 16
    hit_any = (out == 0).any(dim=1).any(dim=1)
    assert bool(hit_any.any())


def test_masks_differ_per_item_and_follow_the_generator():
    x = torch.ones(8, 50, 30)
    lengths = torch.full((8,), 50)
    first = time_mask(x, lengths, 1, 20, generator=torch.Generator().manual_seed(5))
    again = time_mask(x, lengths, 1, 20, generator=torch.Generator().manual_seed(5))
    assert torch.equal(first, again)
    patterns = {tuple((first[i] == 0).all(-1).tolist()) for i in range(8)}
    assert len(patterns) > 1  # items draw their own masks


def test_time_warp_keeps_lengths_padding_and_constants():
    x, lengths = padded_batch([60, 25, 8])
    warped = time_warp(x, lengths, window=5, generator=torch.Generator().manual_seed(0))
    assert warped.shape == x.shape
    assert torch.all(warped[x == PAD] == PAD)
    assert torch.equal(warped[2], x[2])  # too short to warp (needs 2 * window + 2 frames)
    assert not torch.equal(warped[0], x[0])
    constant = torch.full((1, 40, 4), 3.0)
    torch.testing.assert_close(time_warp(constant, torch.tensor([40]), 5), constant)
    assert torch.equal(time_warp(x, lengths, window=0), x)


def test_specaugment_module_training_vs_eval_and_mean_fill():
    x, lengths = padded_batch([50, 30])
    augment = SpecAugment(time_warp_window=0, freq_masks=1, freq_mask_width=5, time_masks=1,
                          time_mask_width=10, replace_with="mean")
    augment.eval()
    out, out_lengths = augment(x, lengths)
    assert out is x and torch.equal(out_lengths, lengths)
    augment.train()
    out, out_lengths = augment(x, lengths, generator=torch.Generator().manual_seed(4))
    assert torch.equal(out_lengths, lengths)
    assert torch.all(out[x == PAD] == PAD)
    for i, length in enumerate(lengths.tolist()):
        mean = x[i, :length].mean()
        changed = out[i, :length] != x[i, :length]
        assert bool(changed.any())
        torch.testing.assert_close(out[i, :length][changed], mean.expand(int(changed.sum())))
    with pytest.raises(ValueError, match="replace_with"):
        SpecAugment(replace_with="noise")
