"""Scale-invariant signal-to-noise ratio (SI-SNR), in dB, over each item's real samples.

Example:
    >>> target = torch.randn(2, 8000)
    >>> estimate = target + 0.1 * torch.randn(2, 8000)
    >>> si_snr(estimate, target, torch.tensor([8000, 6000])).shape
    torch.Size([2])
"""
from __future__ import annotations

from typing import Optional

import torch


def si_snr(estimate: torch.Tensor, target: torch.Tensor, lengths: Optional[torch.Tensor] = None,
           eps: float = 1e-8) -> torch.Tensor:
    """SI-SNR of ``estimate`` against ``target``, both (batch, time); padding past ``lengths`` is ignored.

    Both signals are made zero-mean over the item's samples; the target is scaled to its projection on the
    estimate's direction, and the rest counts as noise. Returns (batch,) dB (higher is better).
    """
    if estimate.shape != target.shape or estimate.dim() != 2:
        raise ValueError(f"estimate and target must both be (batch, time), got {tuple(estimate.shape)} and "
                         f"{tuple(target.shape)}")
    if lengths is None:
        lengths = torch.full((estimate.shape[0],), estimate.shape[1], dtype=torch.int64)
    lengths = torch.as_tensor(lengths, dtype=torch.int64, device=estimate.device)
    mask = (torch.arange(estimate.shape[1], device=estimate.device).unsqueeze(0)
            < lengths.unsqueeze(1)).to(estimate.dtype)
    count = lengths.clamp(min=1).to(estimate.dtype).unsqueeze(1)
    estimate = (estimate - (estimate * mask).sum(1, keepdim=True) / count) * mask
    target = (target - (target * mask).sum(1, keepdim=True) / count) * mask
    scale = (estimate * target).sum(1, keepdim=True) / ((target ** 2).sum(1, keepdim=True) + eps)
    projection = scale * target
    noise = estimate - projection
    return 10.0 * torch.log10(((projection ** 2).sum(1) + eps) / ((noise ** 2).sum(1) + eps))


def si_snr_improvement(estimate: torch.Tensor, mixture: torch.Tensor, target: torch.Tensor,
                       lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
    """SI-SNRi: how much the estimate beats the unprocessed mixture, (batch,) dB."""
    return si_snr(estimate, target, lengths) - si_snr(mixture, target, lengths)
