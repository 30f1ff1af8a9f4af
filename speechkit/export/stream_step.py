"""The streaming recognizer's acoustic step as a graph, with its recurrent states as input and output.

``stream_step(feats, state) -> (log_probs, encoded, next_state)`` runs global normalization, the
unidirectional :class:`~speechkit.models.RecurrentEncoder` from ``state`` and the CTC head over feature
frames of one chunk (their count a multiple of the encoder's stride). The incremental filterbank
(:class:`speechkit.streaming.StreamingFbank`) and the stacking of frames stay in Python; streams with a
``stream_step`` artefact run it when loaded with ``backend="onnx"`` (docs/deploy.md).

Shapes: feats ``(batch, frames, n_mels)``, state ``(layers, 2, batch, hidden)`` (LSTM: h and c; GRU:
``(layers, 1, batch, hidden)``) -> log_probs ``(batch, frames // stride * upsample, vocabulary)``, encoded
``(batch, frames // stride * upsample, d_model)``, next_state like state.

Example:
    >>> from speechkit.features import GlobalNormalization
    >>> from speechkit.models import CTCHead, RecurrentEncoder
    >>> encoder = RecurrentEncoder(input_size=80, d_model=16, hidden_size=12, num_layers=2, stride=4,
    ...                            upsample=2, bidirectional=False)
    >>> step = StreamStepGraph(GlobalNormalization(80), encoder, CTCHead(d_model=16, vocab_size=10))
    >>> log_probs, encoded, state = step(torch.randn(1, 8, 80), step.initial_state(1))
    >>> log_probs.shape, encoded.shape, state.shape
    (torch.Size([1, 4, 10]), torch.Size([1, 4, 16]), torch.Size([2, 2, 1, 12]))
"""
from __future__ import annotations

import warnings

import torch

from speechkit.export.convert import OPSET, ExportError, allowed_difference, restore_missing_initializers


class StreamStepGraph(torch.nn.Module):
    """Normalization (optional), encoder layers from a state, projection and CTC head."""

    def __init__(self, normalize, encoder, head):
        super().__init__()
        self.normalize, self.encoder, self.head = normalize, encoder, head
        rnn = encoder.layers[0][0]
        self.hidden_size = rnn.hidden_size
        self.parts = 2 if isinstance(rnn, torch.nn.LSTM) else 1

    def initial_state(self, batch: int) -> torch.Tensor:
        return torch.zeros(len(self.encoder.layers), self.parts, batch, self.hidden_size)

    def forward(self, feats: torch.Tensor, state: torch.Tensor) -> tuple:
        enc = self.encoder
        x = feats
        if self.normalize is not None:  # GlobalNormalization.forward on every frame (no padding here)
            norm = self.normalize
            y = x - norm.mean.to(x.dtype)
            if norm.norm_vars:
                y = y / torch.sqrt(norm.var + norm.eps).to(x.dtype)
            x = torch.where(norm.count > 0, y, x)
        x = x.reshape(x.shape[0], -1, enc.stride * enc.input_size)
        states = []
        for index, directions in enumerate(enc.layers):
            if self.parts == 2:
                x, (h, c) = directions[0](x, (state[index, 0:1], state[index, 1:2]))
                states.append(torch.cat([h, c], dim=0))
            else:
                x, h = directions[0](x, state[index, 0:1])
                states.append(h)
        y = enc.proj(x)
        y = y.reshape(y.shape[0], -1, enc.d_model)
        return self.head(y), y, torch.stack(states)


def export_stream_step(step: StreamStepGraph, path, fmt: str, n_mels: int, seed: int = 0,
                       verify: bool = True):
    """Write ``step`` as ``fmt`` and check it (unless ``verify`` is False) against PyTorch on chunks of other
    lengths and batch sizes; returns the largest difference (None when not checked)."""
    from speechkit.pretrained.backends import StepRunner

    step.eval()
    stride = step.encoder.stride
    example = (torch.randn(2, 6 * stride, n_mels), torch.randn_like(step.initial_state(2)) * 0.1)
    names = (["feats", "state"], ["log_probs", "encoded", "next_state"])
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes on LSTM batch sizes: checked below instead
        try:
            if fmt == "onnx":
                torch.onnx.export(step, example, str(path), dynamo=False, opset_version=OPSET,
                                  input_names=names[0], output_names=names[1],
                                  dynamic_axes={"feats": {0: "batch", 1: "frames"}, "state": {2: "batch"},
                                                "log_probs": {0: "batch", 1: "out_frames"},
                                                "encoded": {0: "batch", 1: "out_frames"},
                                                "next_state": {2: "batch"}})
                restore_missing_initializers(path, step)
            else:
                torch.jit.trace(step, example, check_trace=False).save(str(path))
        except Exception as error:
            raise ExportError(f"stream_step: cannot export to {fmt}: {str(error).splitlines()[0][:300]}") \
                from None
    if not verify:
        return None
    runner = StepRunner(path, fmt)
    generator = torch.Generator().manual_seed(seed)
    worst = 0.0
    for batch, steps in ((1, 1), (3, 11), (1, 40)):
        feats = torch.randn(batch, steps * stride, n_mels, generator=generator)
        state = torch.randn(step.initial_state(batch).shape, generator=generator) * 0.1
        with torch.no_grad():
            expected = step(feats, state)
        for name, e, g in zip(names[1], expected, runner(feats, state)):
            diff = float((e - g).abs().max())
            if not diff <= allowed_difference(e):
                raise ExportError(f"stream_step: output '{name}' differs from PyTorch by {diff:.3g} "
                                  f"(tolerance {allowed_difference(e):.3g}, scaled to its values) for "
                                  f"{steps} steps of a batch of {batch} (never seen at export)")
            worst = max(worst, diff)
    return worst


def stream_step_of(interface):
    """The :class:`StreamStepGraph` of a streamable :class:`~speechkit.pretrained.EncoderASR`, else None."""
    from speechkit.errors import SpeechkitError
    from speechkit.pretrained.interfaces import EncoderASR, EncoderDecoderASR
    from speechkit.streaming import StreamingASR

    if not isinstance(interface, EncoderASR) or isinstance(interface, EncoderDecoderASR):
        return None
    try:
        streaming = StreamingASR(interface)
    except SpeechkitError:
        return None
    return StreamStepGraph(streaming.normalize, streaming.encoder, streaming.head)
