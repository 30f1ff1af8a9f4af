"""Filterbank features of an audio stream, frame for frame equal to :class:`speechkit.features.Fbank` on the
whole recording.

Offline, frame ``t`` is the window of the recording centred on sample ``t * hop``, reflected at both ends.
A frame is final as soon as every sample under it has arrived (and the start's reflection, which reads
samples ``1 .. n_fft // 2``): the end's reflection only touches the last frames, computed by
:meth:`StreamingFbank.finish` once the length is known. Only the samples the next frames read are kept.

Example:
    >>> from speechkit.features import Fbank
    >>> fbank = Fbank(n_mels=40)
    >>> stream = StreamingFbank(fbank)
    >>> parts = [stream.accept(chunk) for chunk in torch.randn(16000).split(3000)] + [stream.finish()]
    >>> torch.cat(parts).shape          # 1 + 16000 // 160 frames, as offline
    torch.Size([101, 40])
"""
from __future__ import annotations

import torch

from speechkit.errors import SpeechkitError
from speechkit.features.filterbanks import Fbank
from speechkit.nn.stft import power_spectrum


class StreamingFbank:
    """Incremental :class:`~speechkit.features.Fbank` (without deltas) of one stream.

    ``accept(samples (n,)) -> (new frames, n_mels)``; ``finish() -> (last frames, n_mels)``.
    """

    def __init__(self, fbank: Fbank):
        if not isinstance(fbank, Fbank):
            raise SpeechkitError(f"streaming features need a speechkit.features.Fbank, got "
                                 f"{type(fbank).__name__}")
        if fbank.delta_order:
            raise SpeechkitError("Fbank with delta_order > 0 reads future frames (deltas); a streaming "
                                 "model needs delta_order: 0")
        options = fbank.options
        self.n_fft, self.hop = options["n_fft"], options["hop_length"]
        self.pad = self.n_fft // 2
        self.log = options["log"]
        self.window, self.filters = fbank.window_tensor, fbank.filters
        self.buffer = torch.zeros(0)
        self.base = 0  # recording index of buffer[0]
        self.received = 0
        self.next_frame = 0

    def accept(self, samples: torch.Tensor) -> torch.Tensor:
        samples = samples.to(torch.float32).reshape(-1).cpu()
        self.buffer = torch.cat([self.buffer, samples])
        self.received += samples.numel()
        if self.received <= self.pad:  # the start's reflection reads samples up to pad
            return self._empty()
        # Final frames: t * hop - pad + n_fft <= received.
        ready = self.received - self.n_fft + self.pad
        end = ready // self.hop + 1 if ready >= 0 else 0
        return self._frames(self.next_frame, end, self.received - 1)

    def finish(self) -> torch.Tensor:
        """The frames whose windows reach past the end (1 + length // hop frames in all)."""
        if self.received == 0:
            return self._empty()
        return self._frames(self.next_frame, self.received // self.hop + 1, self.received - 1)

    def _empty(self) -> torch.Tensor:
        return torch.zeros(0, self.filters.shape[1])

    def _frames(self, start: int, end: int, last: int) -> torch.Tensor:
        if end <= start:
            return self._empty()
        # The recording index each frame sample reads, as speechkit.nn.stft's centring computes it.
        position = (torch.arange(start, end).unsqueeze(1) * self.hop - self.pad
                    + torch.arange(self.n_fft).unsqueeze(0))
        index = position.abs()
        index = torch.where(position > last, 2 * last - position, index)
        index = torch.minimum(index.clamp(min=0), torch.tensor(last))
        frames = self.buffer[index - self.base]
        spec = torch.fft.rfft(frames * self.window, dim=-1)
        energies = power_spectrum(spec, 2.0) @ self.filters
        if self.log:
            energies = torch.log(torch.clamp(energies, min=1e-10))
        self.next_frame = end
        self._drop_before(max(0, end * self.hop - self.n_fft))
        return energies

    def _drop_before(self, keep_from: int) -> None:
        """Forget samples before ``keep_from``: no later frame (nor the end's reflection) reads them."""
        if keep_from > self.base:
            self.buffer = self.buffer[keep_from - self.base:]
            self.base = keep_from
