"""Span masks and contrastive distractors, drawn from absolute lengths so padding is never touched.

- :func:`span_mask`: for an item of ``L`` valid frames, ``round_random(mask_prob * L / mask_length)`` spans
  (at least ``min_spans``) of ``mask_length`` frames start at distinct positions in ``[0, L - mask_length]``;
  spans may overlap, as in the published recipe. Every masked frame is a valid frame.
- :func:`sample_negatives`: for each masked frame, ``K`` other masked frames of the same item, drawn with
  replacement; the frame itself is never its own distractor, and padding is never drawn.
- :func:`channel_mask`: spans of feature channels per item (fine-tuning's channel masking).

Example:
    >>> generator = torch.Generator().manual_seed(0)
    >>> mask = span_mask(torch.tensor([50, 20]), 60, mask_prob=0.5, mask_length=5, generator=generator)
    >>> bool(mask[1, 20:].any())
    False
    >>> negatives = sample_negatives(mask, num_negatives=4, generator=generator)
    >>> negatives.shape
    torch.Size([2, 60, 4])
"""
from __future__ import annotations

import hashlib
from typing import Optional

import torch


def span_mask(lengths: torch.Tensor, max_frames: int, mask_prob: float, mask_length: int, min_spans: int = 0,
              generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Boolean ``(batch, max_frames)``, True on masked frames, all below each item's length.

    An item shorter than ``mask_length`` gets no span (nothing valid can be covered whole); otherwise the
    number of spans is capped so that they could all fit without overlapping.
    """
    mask = torch.zeros(len(lengths), max_frames, dtype=torch.bool)
    for index, length in enumerate(lengths.tolist()):
        starts_available = length - mask_length + 1
        if starts_available <= 0 or mask_prob <= 0:
            continue
        # Random rounding keeps the expected masked fraction exact for any length.
        expected = mask_prob * length / mask_length
        spans = int(expected + float(torch.rand((), generator=generator)))
        spans = min(max(spans, min_spans), length // mask_length, starts_available)
        if spans <= 0:
            continue
        starts = torch.randperm(starts_available, generator=generator)[:spans]
        covered = (starts.unsqueeze(1) + torch.arange(mask_length)).flatten()
        mask[index, covered] = True
    return mask.to(lengths.device)


def sample_negatives(mask: torch.Tensor, num_negatives: int,
                     generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Frame indices ``(batch, frames, num_negatives)``: distractors for each masked frame.

    Row ``[b, t]`` (for a masked ``t``) holds masked frames of item ``b`` other than ``t``; rows of unmasked
    frames are 0 and unused. An item with a single masked frame has no possible distractor: its row points
    at the frame itself, which the contrastive loss excludes (a distractor equal to the target scores -inf).
    """
    batch, frames = mask.shape
    negatives = torch.zeros(batch, frames, num_negatives, dtype=torch.long)
    cpu_mask = mask.cpu()
    for index in range(batch):
        positions = cpu_mask[index].nonzero().squeeze(1)
        count = len(positions)
        if count == 0:
            continue
        if count == 1:
            negatives[index, positions] = positions
            continue
        # Draw among the count - 1 others: shift draws at or above the frame's own rank up by one.
        draws = torch.randint(0, count - 1, (count, num_negatives), generator=generator)
        draws += (draws >= torch.arange(count).unsqueeze(1)).long()
        negatives[index, positions] = positions[draws]
    return negatives.to(mask.device)


def channel_mask(batch: int, channels: int, mask_prob: float, mask_length: int,
                 generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Boolean ``(batch, channels)``: spans of channels to zero, drawn per item like :func:`span_mask`."""
    lengths = torch.full((batch,), channels, dtype=torch.long)
    return span_mask(lengths, channels, mask_prob, mask_length, 0, generator)


def batch_generator(seed: int, update: int, ids) -> torch.Generator:
    """A generator seeded by ``(seed, update, the batch's ids)``.

    Masks, distractors and Gumbel noise drawn from it depend on what is in the batch and on the update, not
    on the process or the micro-batches before it, so a run draws the same on 1 process or on 64.
    """
    digest = hashlib.sha256(f"{seed}:{update}:{'|'.join(map(str, ids))}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
