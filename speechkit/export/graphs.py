"""The graph each interface exports: one ``nn.Module`` per artefact, with the valid lengths as an input.

Every graph takes padded float32 inputs and their (batch,) int64 valid lengths, and returns its outputs with
their valid lengths, so a padded batch gives each item what it gives alone (docs/design.md, contract 2).

==================  ==============  =============================  =======================================
interface           artefact        inputs                         outputs
==================  ==============  =============================  =======================================
EncoderASR          ``recognizer``  wavs (B, T), lengths (B,)      log_probs (B, F, V), frame_lengths (B,)
SeparationModel     ``separator``   mixtures (B, T), lengths (B,)  sources (B, S, T)
SpeakerRecognition  ``embedder``    wavs (B, T), lengths (B,)      embeddings (B, D)
Vocoder             ``mel``         wavs (B, T), lengths (B,)      mels (B, F, M), frame_lengths (B,)
Vocoder             ``generator``   mels (B, F, M), lengths (B,)   wavs (B, F * hop), sample_lengths (B,)
Wav2Vec2Features    ``features``    wavs (B, T), lengths (B,)      features (B, F, D), frame_lengths (B,)
==================  ==============  =============================  =======================================

Example:
    >>> specs = graph_specs(interface)                           # doctest: +SKIP
    >>> [spec.name for spec in specs]                            # doctest: +SKIP
    ['recognizer']
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from speechkit.errors import SpeechkitError


@dataclass
class GraphSpec:
    """One artefact: its module, names, the axes that vary, and how to make example inputs.

    ``example(batch, lengths)`` returns the padded input tensor for items of ``lengths`` (in the input's own
    time unit: samples or frames); ``speech_example``, when set, the same for speech-like input (the export
    is checked on both: white noise alone exercises outputs at a scale speech may not).
    """

    name: str
    module: torch.nn.Module
    input_names: tuple
    output_names: tuple
    dynamic_axes: dict
    example: object
    min_length: int = 1
    time_unit: str = "samples"
    min_time: int = 1
    notes: dict = field(default_factory=dict)
    speech_example: object = None

    def __post_init__(self):
        if self.speech_example is None and self.example is _waveforms:
            self.speech_example = speech_like_waveforms


class RecognizerGraph(torch.nn.Module):
    """The encoder pipeline of an :class:`~speechkit.pretrained.EncoderASR` as one module:
    ``forward(wavs, lengths) -> (log_probs, frame_lengths)``."""

    def __init__(self, steps: list, takes_lengths: list):
        super().__init__()
        self.steps = torch.nn.ModuleList(steps)
        self.takes_lengths = list(takes_lengths)

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor) -> tuple:
        x = wavs
        for step, with_lengths in zip(self.steps, self.takes_lengths):
            out = step(x, lengths) if with_lengths else step(x)
            x, lengths = (out[0], out[1]) if isinstance(out, tuple) else (out, lengths)
        return x, lengths.to(torch.int64)


class SeparatorGraph(torch.nn.Module):
    """``forward(mixtures, lengths) -> sources`` (batch, speakers, time)."""

    def __init__(self, separator: torch.nn.Module):
        super().__init__()
        self.separator = separator

    def forward(self, mixtures: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.separator(mixtures, lengths)


class EmbedderGraph(torch.nn.Module):
    """Features, their normalization, the embedding model and the embedding normalization of a
    :class:`~speechkit.pretrained.SpeakerRecognition`: ``forward(wavs, lengths) -> embeddings`` (B, D)."""

    def __init__(self, features: torch.nn.Module, normalize, model: torch.nn.Module, embedding_norm):
        super().__init__()
        self.features, self.normalize, self.model = features, normalize, model
        self.embedding_norm = embedding_norm

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        feats, frames = self.features(wavs, lengths)
        if self.normalize is not None:
            feats, frames = self.normalize(feats, frames)
        embeddings = self.model(feats, frames)
        if embeddings.dim() == 3:
            embeddings = embeddings[:, 0]
        return embeddings if self.embedding_norm is None else self.embedding_norm(embeddings)


class Wav2Vec2Graph(torch.nn.Module):
    """Waveform normalization (when the model has one) and the encoder's last layer:
    ``forward(wavs, lengths) -> (features, frame_lengths)``."""

    def __init__(self, encoder: torch.nn.Module, normalize=None):
        super().__init__()
        self.encoder, self.normalize = encoder, normalize

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor) -> tuple:
        if self.normalize is not None:
            wavs, lengths = self.normalize(wavs, lengths)
        out = self.encoder(wavs, lengths)
        return out.output, out.lengths


class PairGraph(torch.nn.Module):
    """A module returning ``(y, lengths)``, with int64 lengths (the vocoder's mel and generator)."""

    def __init__(self, module: torch.nn.Module):
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple:
        y, out_lengths = self.module(x, lengths)
        return y, out_lengths.to(torch.int64)


def _waveforms(batch_lengths) -> torch.Tensor:
    lengths = [int(n) for n in batch_lengths]
    wavs = torch.zeros(len(lengths), max(lengths))
    for i, n in enumerate(lengths):
        wavs[i, :n] = 0.1 * torch.randn(n)
    return wavs


def speech_like_waveforms(batch_lengths, rate: int = 16000) -> torch.Tensor:
    """A padded (batch, time) batch of speech-like signals: a voiced source (a 90-220 Hz fundamental and
    its harmonics, falling as 1/k) shaped by two formant-like resonances and a 4 Hz syllable envelope,
    with breath noise, peaking near 0.5; each item different.

    Example:
        >>> speech_like_waveforms([16000, 8000]).shape
        torch.Size([2, 16000])
    """
    lengths = [int(n) for n in batch_lengths]
    wavs = torch.zeros(len(lengths), max(lengths))
    for i, n in enumerate(lengths):
        t = torch.arange(n, dtype=torch.float64) / rate
        f0 = 90 + 130 * torch.rand(()).double()
        pitch = f0 * (1 + 0.08 * torch.sin(2 * math.pi * 1.3 * t))
        phase = 2 * math.pi * torch.cumsum(pitch, 0) / rate
        formants = (500 + 400 * torch.rand(()).double(), 1400 + 900 * torch.rand(()).double())
        voiced = torch.zeros(n, dtype=torch.float64)
        for k in range(1, int(3500 // float(f0)) + 1):
            gain = sum(1 / (1 + ((k * float(f0) - f) / 150) ** 2) for f in formants)
            voiced += gain / k * torch.sin(k * phase)
        envelope = torch.sin(math.pi * 4 * t + torch.rand(()).double() * math.pi).abs() ** 1.5
        signal = voiced * envelope + 0.02 * torch.randn(n, dtype=torch.float64)
        wavs[i, :n] = (0.5 * signal / signal.abs().max().clamp_min(1e-9)).float()
    return wavs


def _mels(n_mels: int):
    def example(batch_lengths) -> torch.Tensor:
        lengths = [int(n) for n in batch_lengths]
        mels = torch.zeros(len(lengths), max(lengths), n_mels)
        for i, n in enumerate(lengths):
            mels[i, :n] = torch.randn(n, n_mels) - 4.0  # log magnitudes of ordinary speech
        return mels
    return example


def _wave_axes(input_name: str, outputs: dict) -> dict:
    axes = {input_name: {0: "batch", 1: "time"}, "lengths": {0: "batch"}}
    axes.update(outputs)
    return axes


def graph_specs(interface) -> list:
    """The artefacts of a loaded interface (EncoderASR, SeparationModel, SpeakerRecognition, Vocoder,
    Wav2Vec2Features)."""
    from speechkit.pretrained.interfaces import EncoderASR, EncoderDecoderASR, _takes_lengths
    from speechkit.pretrained.separation import SeparationModel
    from speechkit.pretrained.speaker import SpeakerRecognition
    from speechkit.pretrained.vocoder import Vocoder
    from speechkit.pretrained.wav2vec2_features import Wav2Vec2Features

    if isinstance(interface, EncoderDecoderASR):
        raise SpeechkitError("EncoderDecoderASR: the attention decoder's search runs token by token in "
                             "Python; export its encoder as an EncoderASR model folder instead")
    if isinstance(interface, EncoderASR):
        names = list(interface.hparams["encoder_pipeline"])
        steps = [interface.mods[name] for name in names]
        module = RecognizerGraph(steps, [_takes_lengths(step) for step in steps])
        axes = _wave_axes("wavs", {"log_probs": {0: "batch", 1: "frames"}, "frame_lengths": {0: "batch"}})
        return [GraphSpec("recognizer", module, ("wavs", "lengths"), ("log_probs", "frame_lengths"), axes,
                          _waveforms, min_length=_min_samples(interface), notes={"pipeline": names})]
    if isinstance(interface, SeparationModel):
        module = SeparatorGraph(interface.mods["separator"])
        axes = _wave_axes("mixtures", {"sources": {0: "batch", 2: "time"}})
        kernel = int(getattr(interface.mods["separator"], "kernel_size", 1))
        return [GraphSpec("separator", module, ("mixtures", "lengths"), ("sources",), axes, _waveforms,
                          min_length=64, min_time=kernel)]
    if isinstance(interface, SpeakerRecognition):
        mods = interface.mods
        optional = {name: mods[name] if name in mods else None
                    for name in ("mean_var_norm", "embedding_norm")}
        module = EmbedderGraph(mods["compute_features"], optional["mean_var_norm"], mods["embedding_model"],
                               optional["embedding_norm"])
        axes = _wave_axes("wavs", {"embeddings": {0: "batch"}})
        return [GraphSpec("embedder", module, ("wavs", "lengths"), ("embeddings",), axes, _waveforms,
                          min_length=_min_samples(interface))]
    if isinstance(interface, Vocoder):
        mel_axes = _wave_axes("wavs", {"mels": {0: "batch", 1: "frames"}, "frame_lengths": {0: "batch"}})
        gen_axes = {"mels": {0: "batch", 1: "frames"}, "lengths": {0: "batch"},
                    "wavs": {0: "batch", 1: "time"}, "sample_lengths": {0: "batch"}}
        return [GraphSpec("mel", PairGraph(interface.mods["mel"]), ("wavs", "lengths"),
                          ("mels", "frame_lengths"), mel_axes, _waveforms, min_length=interface.hop_length),
                GraphSpec("generator", PairGraph(interface.mods["generator"]), ("mels", "lengths"),
                          ("wavs", "sample_lengths"), gen_axes, _mels(interface.n_mels), min_length=2,
                          time_unit="frames")]
    if isinstance(interface, Wav2Vec2Features):
        normalize = interface.mods["normalize"] if "normalize" in interface.mods else None
        axes = _wave_axes("wavs", {"features": {0: "batch", 1: "frames"}, "frame_lengths": {0: "batch"}})
        return [GraphSpec("features", Wav2Vec2Graph(interface.encoder, normalize), ("wavs", "lengths"),
                          ("features", "frame_lengths"), axes, _waveforms, min_length=1600)]
    raise SpeechkitError(f"{type(interface).__name__}: no exported graph for this interface (export covers "
                         "EncoderASR, SeparationModel, SpeakerRecognition, Vocoder and Wav2Vec2Features)")


def _min_samples(interface) -> int:
    """Fewest samples an item needs for the recognizer (enough feature frames for the encoder's stride)."""
    encoder = interface.mods["encoder"] if "encoder" in interface.mods else None
    stride = int(getattr(encoder, "stride", 4) or 4) * 2
    hop = 160
    features = interface.mods["compute_features"] if "compute_features" in interface.mods else None
    if features is not None and hasattr(features, "options"):
        hop = int(features.options.get("hop_length", hop))
    return stride * hop
