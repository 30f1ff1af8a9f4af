"""Whisper to ONNX: the encoder, the cross-attention keys and values, and one decoder step with its cache as
inputs and outputs; checked against PyTorch at export, and run by
:class:`~speechkit.pretrained.whisper_onnx.OnnxWhisper` in place of the PyTorch modules
(``WhisperASR.from_hparams(folder, backend="onnx")``) with the same search code.

- ``whisper_encoder``: features (B, mels, 3000) -> states (B, 1500, D);
- ``whisper_cross``: states -> cross_keys, cross_values (L, B, H, 1500, D / H);
- ``whisper_decoder_step``: tokens (B, N), past_keys, past_values (L, B, H, T, D / H), cross_keys,
  cross_values -> logits (B, V) of the last token, keys, values (L, B, H, T + N, D / H).

Example:
    >>> export_whisper_onnx(model, "whisper-tiny")                      # doctest: +SKIP
    {'whisper_encoder': 2.1e-06, 'whisper_cross': 9.5e-07, 'whisper_decoder_step': 3.8e-06}
"""
from __future__ import annotations

import pathlib
import warnings

import torch

from speechkit.errors import ExportError
from speechkit.export.convert import OPSET, allowed_difference, restore_missing_initializers
from speechkit.pretrained.whisper_onnx import FILES, OnnxWhisper, empty_past


class CrossGraph(torch.nn.Module):
    """Encoder states -> every decoder layer's cross-attention keys and values, stacked."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, states: torch.Tensor) -> tuple:
        pairs = [layer.encoder_attn.project_keys_values(states) for layer in self.decoder.layers]
        return torch.stack([k for k, _ in pairs]), torch.stack([v for _, v in pairs])


class DecoderStepGraph(torch.nn.Module):
    """New tokens after a cache of ``T`` tokens -> the last token's logits and the cache grown by them."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, tokens, past_keys, past_values, cross_keys, cross_values) -> tuple:
        start = past_keys.shape[3]
        new = tokens.shape[1]
        positions = torch.arange(new, device=tokens.device) + start
        x = self.decoder.embed_tokens(tokens) + self.decoder.embed_positions(positions)
        # Query i (at position start + i) sees keys up to its own position.
        mask = torch.arange(start + new, device=tokens.device)[None, :] <= positions[:, None]
        keys_out, values_out = [], []
        for index, layer in enumerate(self.decoder.layers):
            keys, values = layer.self_attn.project_keys_values(layer.self_attn_layer_norm(x))
            keys = torch.cat([past_keys[index], keys], dim=2)
            values = torch.cat([past_values[index], values], dim=2)
            keys_out.append(keys)
            values_out.append(values)
            x = layer(x, keys, values, cross_keys[index], cross_values[index], mask)
        logits = torch.nn.functional.linear(self.decoder.layer_norm(x[:, -1]), self.decoder.output_weight())
        return logits, torch.stack(keys_out), torch.stack(values_out)


def export_whisper_onnx(model, folder, seed: int = 0) -> dict:
    """Write the three graphs into ``folder`` and check each against PyTorch on inputs other than the
    export's (batch sizes, cache lengths, prompt lengths); returns name -> largest difference.

    Raises:
        ExportError: naming the graph that cannot be exported or differs by more than the tolerance.
    """
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = model.eval().float()
    config = model.config
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(1, config.num_mel_bins, config.num_frames, generator=generator)
    with torch.no_grad():
        states = model.encoder(features)
        cross = CrossGraph(model.decoder)(states)
    step = DecoderStepGraph(model.decoder)
    specs = {
        "whisper_encoder": (model.encoder, (features,), ["features"], ["states"],
                            {"features": {0: "batch"}, "states": {0: "batch"}}),
        "whisper_cross": (CrossGraph(model.decoder), (states,), ["states"], ["cross_keys", "cross_values"],
                          {"states": {0: "batch"}, "cross_keys": {1: "batch"}, "cross_values": {1: "batch"}}),
        "whisper_decoder_step": (
            step, (torch.tensor([[1, 2]]), empty_past(model, 1, 3, generator), empty_past(model, 1, 3,
                                                                                            generator),
                   *cross),
            ["tokens", "past_keys", "past_values", "cross_keys", "cross_values"], ["logits", "keys",
                                                                                   "values"],
            {"tokens": {0: "batch", 1: "new"}, "past_keys": {1: "batch", 3: "past"},
             "past_values": {1: "batch", 3: "past"}, "cross_keys": {1: "batch"}, "cross_values": {1: "batch"},
             "logits": {0: "batch"}, "keys": {1: "batch", 3: "total"}, "values": {1: "batch", 3: "total"}}),
    }
    for name, (module, example, inputs, outputs, axes) in specs.items():
        path = folder / FILES[name]
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                torch.onnx.export(module, example, str(path), dynamo=False, opset_version=OPSET,
                                  input_names=inputs, output_names=outputs, dynamic_axes=axes)
            except Exception as error:  # the exporter raises many types
                first_line = str(error).splitlines()[0][:300]
                raise ExportError(f"{name}: cannot export to ONNX: {first_line}") from None
        restore_missing_initializers(path, module)
    return check_whisper_onnx(model, folder, seed + 1)


def check_whisper_onnx(model, folder, seed: int = 1) -> dict:
    """Compare the folder's graphs with ``model`` on fresh inputs; name -> largest difference."""
    runtime = OnnxWhisper(folder, model.config)
    generator = torch.Generator().manual_seed(seed)
    worst = {}
    features = torch.randn(2, model.config.num_mel_bins, model.config.num_frames, generator=generator)
    with torch.no_grad():
        states = model.encoder(features)
        worst["whisper_encoder"] = _check("whisper_encoder", states, runtime.encode(features))
        cross = CrossGraph(model.decoder)(states)
        got = runtime.cross(states)
        worst["whisper_cross"] = max(_check("whisper_cross", e, g) for e, g in zip(cross, got))
        step = DecoderStepGraph(model.decoder)
        worst["whisper_decoder_step"] = 0.0
        for batch, past, new in ((1, 0, 4), (2, 5, 1), (3, 17, 2)):
            tokens = torch.randint(0, model.config.vocab_size, (batch, new), generator=generator)
            pk, pv = empty_past(model, batch, past, generator), empty_past(model, batch, past, generator)
            ck, cv = (t[:, :1].expand(-1, batch, -1, -1, -1).contiguous() for t in cross)
            expected = step(tokens, pk, pv, ck, cv)
            got = runtime.run_step(tokens, pk, pv, ck, cv)
            for e, g in zip(expected, got):
                worst["whisper_decoder_step"] = max(worst["whisper_decoder_step"],
                                                    _check("whisper_decoder_step", e, g))
    return worst


def _check(name: str, expected: torch.Tensor, got: torch.Tensor) -> float:
    if expected.shape != got.shape:
        raise ExportError(f"{name}: output of shape {tuple(got.shape)}, PyTorch gives "
                          f"{tuple(expected.shape)}")
    diff = float((expected - got).abs().max())
    allowed = allowed_difference(expected)  # scaled to the output, as every exported graph is checked
    if not diff <= allowed:
        raise ExportError(f"{name}: differs from PyTorch by {diff:.3g} (tolerance {allowed:.3g})")
    return diff
