"""Int8 dynamic quantisation of an exported ONNX graph, checked against PyTorch with a tolerance fit for int8.

onnxruntime's dynamic quantisation stores the weights of the matrix products, recurrent layers and
convolutions as int8 (one scale per output channel, 7 bits of range) and quantises their inputs to uint8 as
the graph runs (one scale per tensor, computed from each call's values). The weights take a quarter of
their float size; on CPU the int8 matrix products and LSTMs are faster than float32 ones, while onnxruntime's
``ConvInteger`` is slower than its float convolution (a convolution-only model gets smaller, not faster;
Conv-TasNet's graph computes its 1x1 convolutions as matrix products for this reason, and grouped
convolutions stay float32: docs/deploy.md has the figures).

Int8 is not float32 rounding: the float graph's check (:func:`speechkit.export.convert.allowed_difference`)
cannot hold. The quantised graph is instead compared with PyTorch by the signal-to-error ratio of every float
output (:func:`output_snr_db`: the output's variance over the mean squared difference, in dB) on the same
kind of batches (random lengths, white noise and speech-like input, each item alone against the padded
batch); below :data:`INT8_MIN_SNR_DB` it is an :class:`ExportError`. Integer outputs (lengths) must be
equal. The activation scale is computed over the whole batch, so an item's output moves with what it is
batched with, within the same int8 noise, the one exception to exact batch invariance.

Example:
    >>> entry = quantize_graph(spec, "out/recognizer.onnx", "out/recognizer.int8.onnx")   # doctest: +SKIP
    >>> entry["quantization"]["min_snr_db"] >= INT8_MIN_SNR_DB                            # doctest: +SKIP
    True
"""
from __future__ import annotations

import logging
import math
import pathlib

import torch

from speechkit.errors import ExportError
from speechkit.export.convert import check_cases

__all__ = ["NothingToQuantize", "QUANTIZATIONS", "INT8_MIN_SNR_DB", "quantize_graph", "check_quantized",
           "output_snr_db", "quantized_name"]

#: What ``--quantize`` accepts.
QUANTIZATIONS = ("int8",)
#: The least signal-to-error ratio (dB) of every float output of an int8 graph against PyTorch: the error's
#: energy at most a tenth of the output's variance. This catches a broken graph (a frozen length or shape
#: gives 0 dB or less) while passing int8's rounding, which on the tests' tiny random-weight models (flat
#: outputs, a dozen units per layer: the hard case) gives 11 to 40 dB; it is not a quality figure, which is
#: measured on the task (WER, SI-SNR: benchmarks/quantize.py, docs/deploy.md).
INT8_MIN_SNR_DB = 10.0
#: The operators onnxruntime quantises dynamically and the int8 operators that replace them.
QUANTIZED_OPS = {"MatMulInteger", "ConvInteger", "DynamicQuantizeLSTM", "DynamicQuantizeMatMul",
                 "MatMulIntegerToFloat", "QAttention"}


class NothingToQuantize(ExportError):
    """The graph has no operator dynamic quantisation applies to (a model folder keeps it in float32)."""


def quantized_name(name: str) -> str:
    """``recognizer.int8.onnx`` for ``recognizer.onnx``.

    Example:
        >>> quantized_name("separator.onnx")
        'separator.int8.onnx'
    """
    stem, _, suffix = name.rpartition(".")
    return f"{stem}.int8.{suffix}"


def output_snr_db(expected: torch.Tensor, got: torch.Tensor) -> float:
    """``10 log10(var(expected) / mean((got - expected)^2))``: how far above the error the output's own
    variation is (inf when equal). The mean is removed so that a large constant part (log-probabilities
    near -log V) does not hide an error in what varies.

    Example:
        >>> round(output_snr_db(torch.tensor([1.0, -1.0]), torch.tensor([1.1, -1.1])), 1)
        20.0
    """
    expected, got = expected.double(), got.double()
    error = float(((got - expected) ** 2).mean()) if expected.numel() else 0.0
    if error == 0.0:
        return math.inf
    variance = float(((expected - expected.mean()) ** 2).mean())
    return 10 * math.log10(variance / error) if variance > 0 else -math.inf


def quantize_graph(spec, fp32_path, int8_path, verify: bool = True, seed: int = 0, checks: int = 3) -> dict:
    """Write the int8 version of the float graph ``fp32_path`` (exported from ``spec``, a
    :class:`~speechkit.export.graphs.GraphSpec`) to ``int8_path``, check it against ``spec.module`` unless
    ``verify`` is False, and return the manifest's ``quantization`` entry (None fields when not checked).
    Raises :class:`ExportError` naming the artefact when onnxruntime cannot quantise it, when it has
    nothing int8 applies to, or when the result is below :data:`INT8_MIN_SNR_DB`."""
    from speechkit.pretrained.backends import load_graph

    fp32_path, int8_path = pathlib.Path(fp32_path), pathlib.Path(int8_path)
    ops = _quantize_file(spec.name, fp32_path, int8_path)
    min_snr = None
    if verify:
        graph = load_graph(int8_path, "onnx", spec.input_names, spec.output_names, min_time=spec.min_time)
        base = max(4 * spec.min_length, 16000 if spec.time_unit == "samples" else 40)
        min_snr = check_quantized(spec, graph, torch.Generator().manual_seed(seed), base, checks)
    return {"type": "int8", "method": "dynamic",
            "weights": "int8 (7-bit range), one scale per output channel",
            "activations": "uint8, one scale per tensor computed at run time", "operators": ops,
            "fp32_file": fp32_path.name, "fp32_bytes": fp32_path.stat().st_size,
            "int8_bytes": int8_path.stat().st_size, "min_snr_db": min_snr,
            "required_snr_db": INT8_MIN_SNR_DB}


def _quantize_file(name: str, fp32_path: pathlib.Path, int8_path: pathlib.Path) -> list:
    """Run onnxruntime's dynamic quantisation; the sorted int8 operator types of the result."""
    import onnx

    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        raise ExportError("--quantize needs onnxruntime: pip install 'speechkit[onnx]'") from None
    quiet = logging.getLogger()  # the quantiser logs advice on the root logger for every graph
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        # 7-bit weights (reduce_range): on CPUs without VNNI the u8 x s8 products are summed in pairs into
        # int16, which full-range weights can overflow; a recognizer trained by benchmarks/quantize.py went
        # from 4.5 % WER to 10.7 % with full-range per-channel weights, and kept 4.5 % with these.
        quantize_dynamic(fp32_path, int8_path, per_channel=True, reduce_range=True,
                         weight_type=QuantType.QInt8, nodes_to_exclude=grouped_convolutions(fp32_path))
    except Exception as error:  # onnxruntime raises many types; each becomes an ExportError naming the graph
        int8_path.unlink(missing_ok=True)
        first = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
        raise ExportError(f"{name}: onnxruntime cannot quantise {fp32_path.name} to int8: "
                          f"{type(error).__name__}: {first}") from None
    finally:
        quiet.setLevel(level)
    ops = sorted({node.op_type for node in onnx.load(str(int8_path)).graph.node} & QUANTIZED_OPS)
    if not ops:
        int8_path.unlink(missing_ok=True)
        raise NothingToQuantize(f"{name}: has no operator int8 dynamic quantisation applies to (matrix "
                                "products, LSTMs, convolutions); export it without --quantize")
    return ops


def grouped_convolutions(path) -> list:
    """Names of the grouped (e.g. depthwise) ``Conv`` nodes of an ONNX file. They stay float32: their weights
    are a few per channel, so int8 saves nothing, and onnxruntime's ``ConvInteger`` made the separator's
    depthwise convolutions slower than float (0.70x eager for the int8 graph against 1.38x in float32)."""
    import onnx

    grouped = []
    for node in onnx.load(str(path), load_external_data=False).graph.node:
        group = next((a.i for a in node.attribute if a.name == "group"), 1)
        if node.op_type == "Conv" and group > 1 and node.name:
            grouped.append(node.name)
    return grouped


def check_quantized(spec, graph, generator, base: int, checks: int = 3) -> float:
    """The lowest :func:`output_snr_db` of ``graph`` (the int8 graph) against ``spec.module`` over
    ``checks`` batches of random lengths of white noise and speech-like input, and of each item of the
    batches alone against the same item in its batch; raises :class:`ExportError` below
    :data:`INT8_MIN_SNR_DB` or when an integer output differs."""
    worst = math.inf
    for expected, got, lengths, what in check_cases(spec, graph, generator, base, checks):
        worst = min(worst, _snr(spec, expected, got, lengths, what))
    return round(worst, 2) if math.isfinite(worst) else worst


def _snr(spec, expected, got, lengths, what: str) -> float:
    worst = math.inf
    for name, e, g in zip(spec.output_names, expected, got):
        e, g = torch.as_tensor(e), torch.as_tensor(g)
        if e.shape != g.shape or (not e.is_floating_point() and not torch.equal(e, g)):
            raise ExportError(f"{spec.name}: the int8 graph's output '{name}' on {what} of lengths "
                              f"{lengths.tolist()} is {tuple(g.shape)} {g.dtype} instead of "
                              f"{tuple(e.shape)} {e.dtype} (or other values)")
        if not e.is_floating_point():
            continue
        snr = output_snr_db(e, g)
        if not snr >= INT8_MIN_SNR_DB:
            raise ExportError(f"{spec.name}: the int8 graph's output '{name}' is too far from PyTorch on "
                              f"{what} of lengths {lengths.tolist()}: {snr:.1f} dB signal-to-error, below "
                              f"the {INT8_MIN_SNR_DB:g} dB an int8 graph must keep; export it without "
                              "--quantize")
        worst = min(worst, snr)
    return worst
