"""A small trained voice activity detector: a frame classifier on log-mel filterbanks.

:class:`FrameVAD` gives every 10 ms frame a speech logit from 40 log-mel bands (each recording's mean
removed over its own frames, so the level and the channel's colour do not matter) through four 1-D
convolutions whose dilations see 0.3 s around the frame. :func:`train_frame_vad` trains it on recordings
with reference speaker turns (the conversations of ``speechkit corpus --conversations``: the built-in
corpus' utterances, their edge silence trimmed), cropped, rescaled and mixed with white or pink noise at a
random SNR, because a level threshold fails on noise, not on the clean corpus. :class:`TrainedVAD` turns the
frame decisions into speech segments with the same smoothing as :func:`~speechkit.diarization.vad.energy_vad`
and is a drop-in ``vad`` for :class:`~speechkit.diarization.pipeline.Diarizer`. Accuracy against the energy
detector: docs/speaker.md (``benchmarks/vad.py``).

Example:
    >>> from speechkit.data.audio import read
    >>> wave = read("data/utt1.wav")   # a 440 Hz tone from 0.3 s to 1.3 s, silence around it
    >>> recordings = [(wave, [(0.3, 1.3)])]   # (wave, speech turns)
    >>> vad = TrainedVAD(train_frame_vad(recordings, steps=20, batch_size=4, crop=1.5))  # speech: steps=300
    >>> vad.save("vad.safetensors"); vad = TrainedVAD.load("vad.safetensors")
    >>> [(round(start, 1), round(end, 1)) for start, end in vad(wave, 16000)]   # seconds
    [(0.3, 1.3)]
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np
import torch

from speechkit.diarization.vad import HOP, smoothed_segments
from speechkit.errors import DataError
from speechkit.features import Fbank


class FrameVAD(torch.nn.Module):
    """``forward(wavs, lengths) -> (logits, frames)``: speech logits (batch, frames) of 16 kHz waveforms
    (batch, time) with (batch,) int64 valid samples; frame ``i`` is centred on ``i * 10 ms``. Padding never
    changes an item's logits over its valid frames (the mean is taken over those only, and every layer's
    output is zeroed past them, as a lone item's convolution pads)."""

    sample_rate = 16000

    def __init__(self, n_mels: int = 40, channels: int = 48, layers: int = 3):
        super().__init__()
        if layers < 1:
            raise DataError(f"FrameVAD needs at least one layer, got {layers}")
        self.fbank = Fbank(sample_rate=self.sample_rate, n_mels=n_mels)
        # kernel 5, dilation 2**i: layer i sees 4 * 2**i more frames (3 layers: 0.29 s, 4 layers: 0.61 s)
        self.layers = torch.nn.ModuleList([
            torch.nn.Conv1d(n_mels if i == 0 else channels, channels, 5, padding=2 * 2 ** i, dilation=2 ** i)
            for i in range(layers)])
        self.output = torch.nn.Conv1d(channels, 1, 1)

    @classmethod
    def from_state_dict(cls, state: dict) -> FrameVAD:
        """A model of the size ``state`` holds (bands, channels and layers read from the weights' shapes)."""
        layers = sum(1 for key in state if key.startswith("layers.") and key.endswith(".weight"))
        first = state.get("layers.0.weight")
        if first is None or first.dim() != 3:
            raise DataError("no FrameVAD weights (layers.0.weight is missing)")
        model = cls(n_mels=int(first.shape[1]), channels=int(first.shape[0]), layers=layers)
        model.load_state_dict(state)
        return model

    def forward(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> tuple:
        if wavs.dim() == 1:
            wavs = wavs.unsqueeze(0)
        if lengths is None:
            lengths = torch.full((wavs.shape[0],), wavs.shape[1], dtype=torch.int64)
        feats, frames = self.fbank(wavs, lengths)
        valid = (torch.arange(feats.shape[1])[None, :] < frames[:, None]).unsqueeze(-1)
        mean = (feats * valid).sum(1, keepdim=True) / frames.clamp(min=1)[:, None, None]
        hidden, valid = ((feats - mean) * valid).transpose(1, 2), valid.transpose(1, 2)
        for layer in self.layers:  # zero past each item's frames, as a lone item's convolution pads
            hidden = torch.relu(layer(hidden)) * valid
        return self.output(hidden)[:, 0], frames


def reference_frames(turns: Sequence[tuple], frames: int, hop: float = HOP) -> np.ndarray:
    """(frames,) bool: whether frame ``i`` (centred on ``i * hop`` seconds) lies inside any of the turns
    ``(start, end, ...)``."""
    centres = np.arange(frames) * hop
    active = np.zeros(frames, dtype=bool)
    for turn in turns:
        active |= (centres >= turn[0]) & (centres < turn[1])
    return active


def overlap_frames(turns: Sequence[tuple], frames: int, hop: float = HOP) -> np.ndarray:
    """(frames,) bool: whether two or more speakers talk at frame ``i`` (centred on ``i * hop`` seconds).
    Turns ``(start, end, speaker)`` of one speaker never overlap each other; a turn without a speaker counts
    as a speaker of its own."""
    by_speaker: dict = {}
    for index, turn in enumerate(turns):
        key = turn[2] if len(turn) > 2 else ("turn", index)
        by_speaker.setdefault(key, []).append(turn)
    talking = sum((reference_frames(own, frames, hop).astype(np.int32) for own in by_speaker.values()),
                  np.zeros(frames, dtype=np.int32))
    return talking >= 2


TARGETS = {"speech": reference_frames, "overlap": overlap_frames}


def colored_noise(kind: str, samples: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-variance ``white``, ``pink`` (power falling as 1/f) or ``brown`` (1/f^2) noise, (samples,)."""
    white = rng.standard_normal(samples)
    if kind != "white":
        if kind not in ("pink", "brown"):
            raise DataError(f"noise kind must be white, pink or brown, got {kind!r}")
        spectrum = np.fft.rfft(white)
        bins = np.arange(spectrum.shape[0]) + 1.0
        white = np.fft.irfft(spectrum / (np.sqrt(bins) if kind == "pink" else bins), samples)
    return (white / (white.std() + 1e-12)).astype(np.float32)


def add_noise(wave: np.ndarray, kind: Optional[str], snr_db: float, rng: np.random.Generator) -> np.ndarray:
    """``wave`` plus noise ``snr_db`` below the power of its non-silent samples (``kind`` None: unchanged)."""
    if kind is None:
        return wave
    audible = np.abs(wave) > 1e-4
    power = float(np.mean(wave[audible] ** 2)) if audible.any() else 1e-6
    noise = colored_noise(kind, wave.shape[0], rng) * np.sqrt(power / 10 ** (snr_db / 10))
    return (wave + noise).astype(np.float32)


def train_frame_vad(recordings: Sequence[tuple], steps: int = 300, batch_size: int = 16, crop: float = 4.0,
                    snr_range: tuple = (0.0, 25.0), gain_db_range: tuple = (-20.0, 6.0),
                    learning_rate: float = 3e-3, seed: int = 0, model: Optional[FrameVAD] = None,
                    target: str = "speech") -> FrameVAD:
    """Train a :class:`FrameVAD` on ``recordings``, ``[(wave (time,) float32 at 16 kHz, turns), ...]``.

    Each example is a ``crop``-second piece of a random recording, its level moved by ``gain_db_range``,
    then left clean, or mixed with white or pink noise at an SNR drawn from ``snr_range`` (a third each).
    ``target`` is what a frame's logit says: ``speech`` (inside any turn) or ``overlap`` (two or more
    speakers at once, :func:`overlap_frames`: turns need their speaker, ``(start, end, speaker)``).

    Raises:
        DataError: no recordings, or none with a speech turn; an unknown target.
    """
    if target not in TARGETS:
        raise DataError(f"target must be one of {sorted(TARGETS)}, got {target!r}")
    if not recordings or not any(len(turns) for _, turns in recordings):
        raise DataError("train_frame_vad needs recordings with at least one speech turn")
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    model = model or FrameVAD()
    optimizer = torch.optim.Adam(model.parameters(), learning_rate)
    size = int(crop * FrameVAD.sample_rate)
    model.train()
    for _ in range(steps):
        pieces, targets = [], []
        for _ in range(batch_size):
            wave, turns = recordings[rng.integers(len(recordings))]
            start = int(rng.integers(0, max(1, wave.shape[0] - size)))
            piece = np.asarray(wave[start:start + size], dtype=np.float32)
            piece = piece * np.float32(10 ** (rng.uniform(*gain_db_range) / 20))
            kind = (None, "white", "pink")[rng.integers(3)]
            pieces.append(torch.from_numpy(add_noise(piece, kind, rng.uniform(*snr_range), rng)))
            offset = start / FrameVAD.sample_rate
            targets.append([(turn[0] - offset, turn[1] - offset, *turn[2:]) for turn in turns])
        lengths = torch.tensor([p.shape[0] for p in pieces], dtype=torch.int64)
        logits, frames = model(torch.nn.utils.rnn.pad_sequence(pieces, batch_first=True), lengths)
        labels = torch.zeros_like(logits)
        for row, turns in enumerate(targets):
            count = int(frames[row])
            labels[row, :count] = torch.from_numpy(TARGETS[target](turns, count)).float()
        valid = (torch.arange(logits.shape[1])[None, :] < frames[:, None]).float()
        loss = (torch.nn.functional.binary_cross_entropy_with_logits(logits, labels, reduction="none")
                * valid).sum() / valid.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


class TrainedVAD:
    """Speech segments ``[(start, end), ...]`` of a waveform from a :class:`FrameVAD`: frames whose speech
    probability passes ``threshold``, smoothed as :func:`~speechkit.diarization.vad.energy_vad` smooths
    (``smoothing`` options: ``min_speech``, ``min_silence``, ``padding``)."""

    def __init__(self, model: FrameVAD, threshold: float = 0.5, **smoothing):
        self.model, self.threshold, self.smoothing = model.eval(), threshold, smoothing

    @torch.no_grad()
    def probabilities(self, wave: torch.Tensor, sample_rate: int = 16000) -> np.ndarray:
        """(frames,) speech probability of each 10 ms frame of a mono waveform (time,)."""
        wave = torch.as_tensor(wave).float().reshape(-1)
        if sample_rate != FrameVAD.sample_rate:
            from speechkit.data.audio import resample

            wave = resample(wave, sample_rate, FrameVAD.sample_rate)
        logits, frames = self.model(wave[None], torch.tensor([wave.shape[0]]))
        return torch.sigmoid(logits[0, : int(frames[0])]).numpy()

    def __call__(self, wave: torch.Tensor, sample_rate: int = 16000) -> list:
        wave = torch.as_tensor(wave).float().reshape(-1)
        active = self.probabilities(wave, sample_rate) > self.threshold
        return smoothed_segments(active, wave.numel() / sample_rate, hop=HOP, centre=0.0, **self.smoothing)

    def save(self, path) -> None:
        from speechkit.pretrained.loading import save_weights

        save_weights(self.model.state_dict(), path)

    @classmethod
    def load(cls, path, **options) -> TrainedVAD:
        """A detector from weights :meth:`save` wrote (checked like any weight file speechkit loads)."""
        from speechkit.pretrained.loading import load_weights

        try:
            model = FrameVAD.from_state_dict(load_weights(path))
        except (DataError, RuntimeError) as error:
            raise DataError(f"{path} holds no FrameVAD weights: {error}") from None
        return cls(model, **options)
