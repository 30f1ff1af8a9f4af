"""Run the ONNX graphs of a Whisper folder (written by :func:`speechkit.export.whisper.export_whisper_onnx`)
behind the interface Whisper's searches use, in place of the PyTorch encoder and decoder
(``WhisperASR.from_hparams(folder, backend="onnx")``).

- ``whisper_encoder``: features (B, mels, 3000) -> states (B, 1500, D);
- ``whisper_cross``: states -> cross_keys, cross_values (L, B, H, 1500, D / H);
- ``whisper_decoder_step``: tokens (B, N), past_keys, past_values (L, B, H, T, D / H), cross_keys,
  cross_values -> logits (B, V) of the last token, keys, values (L, B, H, T + N, D / H).

Example:
    >>> runtime = OnnxWhisper("whisper-tiny-onnx", asr.model.config)            # doctest: +SKIP
    >>> asr.transcriber.decoder = runtime                                          # doctest: +SKIP
"""
from __future__ import annotations

import pathlib

import numpy as np
import torch

from speechkit.errors import SpeechkitError

#: graph name -> its file in the model folder.
FILES = {"whisper_encoder": "whisper_encoder.onnx", "whisper_cross": "whisper_cross.onnx",
         "whisper_decoder_step": "whisper_decoder_step.onnx"}


def empty_past(model, batch: int, length: int = 0, generator=None) -> torch.Tensor:
    """Decoder self-attention keys or values (layers, batch, heads, length, head dim) of ``model.config``:
    zeros, or random with ``generator`` (the export check's inputs)."""
    config = model.config
    shape = (config.decoder_layers, batch, config.decoder_heads, length,
             config.d_model // config.decoder_heads)
    return torch.randn(shape, generator=generator) * 0.5 if generator is not None else torch.zeros(shape)


class OnnxCache:
    """The decoder cache of :class:`OnnxWhisper` (same interface as
    :class:`~speechkit.models.whisper.model.DecoderCache`)."""

    def __init__(self, cross: tuple, past: tuple):
        self.cross, self.past = cross, past

    @property
    def length(self) -> int:
        return self.past[0].shape[3]

    def reorder(self, index: torch.Tensor) -> None:
        self.past = tuple(p[:, index.cpu()] for p in self.past)

    def select(self, index: torch.Tensor) -> None:
        self.reorder(index)
        self.cross = tuple(c[:, index.cpu()] for c in self.cross)


class OnnxWhisper:
    """The three graphs of a folder behind the interface the searches use: ``encode(features)`` (the
    encoder), and a ``decoder`` with ``new_cache(states, capacity)`` and ``step(tokens, cache)``.

    ``folder``: the folder holding the :data:`FILES`, or a mapping graph name -> its file (fetched files of a
    remote folder may lie apart in the download cache)."""

    def __init__(self, folder, config, threads=None):
        try:
            import onnxruntime
        except ImportError:
            raise SpeechkitError("the onnx backend needs onnxruntime: "
                                 "pip install 'speechkit[onnx]'") from None
        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.sessions = {}
        for name, filename in FILES.items():
            path = pathlib.Path(folder[name] if isinstance(folder, dict) else pathlib.Path(folder) / filename)
            if not path.is_file():
                raise SpeechkitError(f"{path}: missing; write the graphs with export_whisper_onnx first")
            self.sessions[name] = onnxruntime.InferenceSession(str(path), options,
                                                               providers=["CPUExecutionProvider"])
        self.config = config
        self.decoder = self

    def _run(self, name: str, feeds: dict) -> list:
        arrays = {key: np.ascontiguousarray(value.detach().cpu().numpy()) for key, value in feeds.items()}
        return [torch.from_numpy(np.asarray(out)) for out in self.sessions[name].run(None, arrays)]

    def encode(self, features: torch.Tensor) -> torch.Tensor:
        return self._run("whisper_encoder", {"features": features.float()})[0]

    __call__ = encode

    def cross(self, states: torch.Tensor) -> tuple:
        return tuple(self._run("whisper_cross", {"states": states.float()}))

    def run_step(self, tokens, past_keys, past_values, cross_keys, cross_values) -> tuple:
        return tuple(self._run("whisper_decoder_step", {
            "tokens": tokens.long(), "past_keys": past_keys, "past_values": past_values,
            "cross_keys": cross_keys, "cross_values": cross_values}))

    def new_cache(self, states: torch.Tensor, capacity=None) -> OnnxCache:
        empty = empty_past(self, states.shape[0])
        return OnnxCache(self.cross(states), (empty, empty.clone()))

    def step(self, tokens: torch.Tensor, cache: OnnxCache) -> torch.Tensor:
        logits, keys, values = self.run_step(tokens, *cache.past, *cache.cross)
        cache.past = (keys, values)
        return logits.to(tokens.device)
