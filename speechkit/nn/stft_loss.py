"""Multi-resolution STFT loss: spectral convergence plus log-magnitude distance, at several STFT sizes.

Each item is scored on its own valid samples only (the spectra come from :func:`speechkit.nn.stft.stft`,
which reflects each item at its own end and zeroes frames past it), then the batch mean is taken, so an item's
loss does not depend on its batch or its padding (docs/design.md, contract 2).

Example:
    >>> estimate, target = torch.randn(2, 8000), torch.randn(2, 8000)
    >>> loss, parts = multi_resolution_stft_loss(estimate, target, torch.tensor([8000, 6000]))
    >>> sorted(parts)
    ['log_magnitude', 'spectral_convergence']
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from speechkit.nn.masks import length_mask
from speechkit.nn.stft import make_window, stft

#: (n_fft, hop_length, win_length) of the usual three resolutions for 16 kHz audio.
DEFAULT_RESOLUTIONS = ((512, 128, 512), (1024, 256, 1024), (256, 64, 256))


def _magnitudes(x: torch.Tensor, lengths: torch.Tensor, n_fft: int, hop: int, win: int) -> tuple:
    spec, frames = stft(x, lengths, n_fft, hop, win, window="hann",
                        window_tensor=make_window("hann", win, n_fft).to(x.device))
    # The floor keeps the square root's gradient finite on silent bins.
    magnitude = torch.sqrt(torch.clamp(spec.real ** 2 + spec.imag ** 2, min=1e-7))
    return magnitude, frames


def stft_distances(estimate: torch.Tensor, target: torch.Tensor, lengths: torch.Tensor,
                   resolutions: Sequence = DEFAULT_RESOLUTIONS) -> dict:
    """Per-item spectral convergence and log-magnitude distance, averaged over the resolutions.

    Args:
        estimate, target: (batch, time) waveforms; samples past ``lengths`` are ignored.
        lengths: (batch,) int64 valid samples per item.
        resolutions: ``(n_fft, hop_length, win_length)`` triples.

    Returns:
        ``{"spectral_convergence": (batch,), "log_magnitude": (batch,)}``:
        ``||S - Ŝ||_F / ||S||_F`` and ``mean |log S - log Ŝ|`` over the item's valid frames and bins.
    """
    if estimate.shape != target.shape or estimate.dim() != 2:
        raise ValueError(f"estimate and target must both be (batch, time), got {tuple(estimate.shape)} "
                         f"and {tuple(target.shape)}")
    lengths = torch.as_tensor(lengths, device=estimate.device)
    convergence, log_distance = [], []
    for n_fft, hop, win in resolutions:
        est, frames = _magnitudes(estimate, lengths, n_fft, hop, win)
        ref, _ = _magnitudes(target, lengths, n_fft, hop, win)
        mask = length_mask(frames, est.shape[1]).unsqueeze(-1).to(est.dtype)
        difference = ((ref - est) ** 2 * mask).sum(dim=(1, 2))
        energy = (ref ** 2 * mask).sum(dim=(1, 2))
        convergence.append(torch.sqrt(difference) / torch.sqrt(energy.clamp(min=1e-7)))
        count = (frames.clamp(min=1) * est.shape[2]).to(est.dtype)
        log_distance.append(((torch.log(ref) - torch.log(est)).abs() * mask).sum(dim=(1, 2)) / count)
    return {"spectral_convergence": torch.stack(convergence).mean(0),
            "log_magnitude": torch.stack(log_distance).mean(0)}


def multi_resolution_stft_loss(estimate: torch.Tensor, target: torch.Tensor, lengths: torch.Tensor,
                               resolutions: Sequence = DEFAULT_RESOLUTIONS) -> tuple:
    """``(loss, parts)``: the batch mean of spectral convergence + log-magnitude distance (a scalar), and
    each of the two terms' batch means (detached), for logging. See :func:`stft_distances`."""
    distances = stft_distances(estimate, target, lengths, resolutions)
    parts = {name: value.mean() for name, value in distances.items()}
    loss = parts["spectral_convergence"] + parts["log_magnitude"]
    return loss, {name: value.detach() for name, value in parts.items()}


class MultiResolutionSTFTLoss(torch.nn.Module):
    """Module form of :func:`multi_resolution_stft_loss`: ``forward(estimate, target, lengths) -> loss``.

    Example:
        >>> loss_fn = MultiResolutionSTFTLoss(resolutions=[(256, 64, 256)])
        >>> loss_fn(torch.randn(1, 4000), torch.randn(1, 4000), torch.tensor([4000])).dim()
        0
    """

    def __init__(self, resolutions: Sequence = DEFAULT_RESOLUTIONS):
        super().__init__()
        self.resolutions = [tuple(int(v) for v in r) for r in resolutions]
        for n_fft, hop, win in self.resolutions:
            if not (0 < hop and 0 < win <= n_fft):
                raise ValueError(f"bad STFT resolution (n_fft={n_fft}, hop={hop}, win={win}): need hop > 0 "
                                 "and 0 < win_length <= n_fft")

    def forward(self, estimate: torch.Tensor, target: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return multi_resolution_stft_loss(estimate, target, lengths, self.resolutions)[0]
