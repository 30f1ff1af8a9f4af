"""Features from a wav2vec 2.0 encoder for downstream models: any layer, any file, batch invariant.

A model folder for :meth:`Wav2Vec2Features.from_hparams` holds a ``hyperparams.yaml`` declaring
``sample_rate``, ``modules: {normalize: WaveformNormalization (optional), wav2vec2: Wav2Vec2Model}`` and a
``pretrainer`` loading the encoder's weights (see recipes/SynthSpeech/wav2vec2/hparams/features.yaml). A
transformers-format folder (``config.json`` + weights) loads with :meth:`Wav2Vec2Features.from_huggingface`.

Layers: ``layer=None`` gives the encoder's output; ``layer=k`` the output of Transformer block ``k`` (0: the
Transformer's input, after the positional convolution), computing only the blocks below it;
``layer="all"`` every one, stacked ``(num_layers + 1, ...)`` (for a learned weighted sum downstream).

Example:
    >>> features = Wav2Vec2Features.from_hparams("results/w2v-features")           # doctest: +SKIP
    >>> features.extract_file("utt1.flac", layer=6).shape                           # doctest: +SKIP
    torch.Size([149, 768])
    >>> hf = Wav2Vec2Features.from_huggingface("facebook/wav2vec2-base")            # doctest: +SKIP
"""
from __future__ import annotations

from typing import Optional, Union

import torch

from speechkit.errors import FetchError, HparamsError
from speechkit.models.wav2vec2 import Wav2Vec2Model, Wav2Vec2Pretraining, WaveformNormalization
from speechkit.pretrained.interfaces import Pretrained
from speechkit.pretrained.registry import register_interface
from speechkit.pretrained.sources.fetching import fetch

Layer = Union[int, str, None]


@register_interface
class Wav2Vec2Features(Pretrained):
    """Extract wav2vec 2.0 representations (see the module doc for ``layer``)."""

    REQUIRED_KEYS = ("modules", "sample_rate")

    def __init__(self, modules: dict, hparams: dict, run_opts=None, source_description: str = "hyperparams"):
        super().__init__(modules, hparams, run_opts, source_description)
        encoder = self.mods["wav2vec2"] if "wav2vec2" in self.mods else None
        if isinstance(encoder, Wav2Vec2Pretraining):
            encoder = encoder.wav2vec2
        if not isinstance(encoder, Wav2Vec2Model):
            raise HparamsError(f"{source_description}: modules.wav2vec2 must be a Wav2Vec2Model (or "
                               f"Wav2Vec2Pretraining), got {type(encoder).__name__}")
        self.encoder = encoder
        self.num_layers = len(encoder.encoder.layers)

    @classmethod
    def from_huggingface(cls, source, savedir=None, run_opts=None, revision: Optional[str] = None,
                         allow_network: bool = True, cache_dir=None) -> Wav2Vec2Features:
        """Features of a transformers-format folder (local, Hub repo id or URL) of any of the four families:
        wav2vec 2.0, HuBERT, WavLM or data2vec-audio, as its ``config.json``'s ``model_type`` says.
        ``layer=None`` then gives the transformers model's ``last_hidden_state``.

        Waveforms are normalized when the folder's ``preprocessor_config.json`` says ``do_normalize``
        (or has no such file), as transformers' feature extractor does.
        """
        from speechkit.pretrained.huggingface.config import (
            MAX_CONFIG_BYTES,
            check_preprocessor_config,
            read_json_config,
        )
        from speechkit.pretrained.huggingface.encoders import load_encoder

        options = dict(revision=revision, allow_network=allow_network, cache_dir=cache_dir)
        model, _, _ = load_encoder(source, savedir, **options)
        normalize, rate = True, 16000
        try:
            strategy = "symlink" if savedir is not None else "in_place"
            path = fetch("preprocessor_config.json", source, savedir, strategy=strategy,
                         max_bytes=MAX_CONFIG_BYTES, **options)
            preprocessor = read_json_config(path, str(path))
            check_preprocessor_config(preprocessor, str(path))  # "false" is not false, "16k" not a rate
            normalize = preprocessor.get("do_normalize", True)
            rate = preprocessor.get("sampling_rate", rate)
        except FetchError:
            pass  # a folder without a feature-extractor config: the usual 16 kHz, normalized
        modules = {"wav2vec2": model.wav2vec2 if isinstance(model, Wav2Vec2Pretraining) else model}
        if normalize:
            modules["normalize"] = WaveformNormalization()
        return cls(modules, {"modules": modules, "sample_rate": rate}, run_opts, f"{source}")

    @torch.no_grad()
    def extract_batch(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None,
                      layer: Layer = None) -> tuple:
        """``(features, frame_lengths)``: ``(batch, frames, dim)``, or ``(num_layers + 1, batch, frames,
        dim)`` for ``layer="all"``; frames past an item's length are padding."""
        wavs, lengths = self._prepare(wavs, lengths)
        if "normalize" in self.mods:
            wavs, lengths = self.mods["normalize"](wavs, lengths)
        if layer is None:
            out = self.encoder(wavs, lengths)
            return out.output, out.lengths
        if layer == "all":
            out = self.encoder(wavs, lengths)
            return torch.stack(out.hidden_states), out.lengths
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= self.num_layers:
            raise ValueError(f"layer must be None, 'all' or an int in [0, {self.num_layers}], got {layer!r}")
        out = self.encoder(wavs, lengths, num_layers=layer)
        return out.hidden_states[layer], out.lengths

    def extract_file(self, path, layer: Layer = None) -> torch.Tensor:
        """Features of one audio file: ``(frames, dim)`` (``(num_layers + 1, frames, dim)`` for ``"all"``)."""
        waveform = self.load_audio(path)
        features, _ = self.extract_batch(waveform.unsqueeze(0), torch.tensor([waveform.shape[0]]), layer)
        return features[:, 0] if layer == "all" else features[0]

    def forward(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None, layer: Layer = None):
        return self.extract_batch(wavs, lengths, layer)
