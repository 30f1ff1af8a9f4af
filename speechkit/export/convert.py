"""Write one graph as ONNX or TorchScript and prove it equals PyTorch on lengths it never saw.

Both formats are traced through the module's Python code (the traceable twins of
:mod:`speechkit.export.substitutes` stand in for the STFT front ends). A trace can silently bake a Python
value of a tensor (a length, a shape) into the graph, so every artefact is run on fresh batches of random
lengths (white noise, and speech-like signals: voiced harmonics under a syllable envelope), and on each of
their items alone, and compared with the PyTorch module; any difference above the tolerance is an
:class:`ExportError` naming the lines whose values were frozen.

The tolerance scales with the output (:func:`allowed_difference`): ``ABS_TOLERANCE + REL_TOLERANCE *
max|output|``. Float32 rounding differs between two correct implementations by a few units of the last
place of the largest values (a separator trained a few epochs puts out sources peaking around 20, and
differs from its exported graph by 1e-4 to 2e-4); a frozen length or shape differs by the size of the
output itself.

Example:
    >>> report = export_graph(spec, "out/recognizer.onnx", "onnx")     # doctest: +SKIP
    >>> report["max_rel_diff"] < REL_TOLERANCE                          # doctest: +SKIP
    True
"""
from __future__ import annotations

import pathlib
import re
import warnings

import torch

from speechkit.errors import ExportError

__all__ = ["OPSET", "ABS_TOLERANCE", "REL_TOLERANCE", "ExportError", "export_graph", "check_graph",
           "allowed_difference", "describe_failure", "restore_missing_initializers"]

#: ONNX operator set of the exported graphs.
OPSET = 17
#: The part of the allowed difference to PyTorch that does not scale (outputs near 0).
ABS_TOLERANCE = 1e-5
#: The part that scales with the output: a fraction of its largest magnitude (about 800 float32 ulps).
REL_TOLERANCE = 1e-4


def allowed_difference(expected: torch.Tensor) -> float:
    """Largest difference an exported graph may show against ``expected`` (one output of the PyTorch
    module): ``ABS_TOLERANCE + REL_TOLERANCE * max|expected|``.

    Example:
        >>> allowed_difference(torch.tensor([0.5, -20.0]))
        0.00201
    """
    scale = float(expected.detach().abs().max()) if expected.numel() else 0.0
    return round(ABS_TOLERANCE + REL_TOLERANCE * scale, 12)


def export_graph(spec, path, fmt: str, seed: int = 0, checks: int = 3, verify: bool = True) -> dict:
    """Export ``spec`` (a :class:`~speechkit.export.graphs.GraphSpec`) to ``path`` as ``fmt`` ("onnx" or
    "torchscript"), check it (unless ``verify`` is False) and return its card entry (names, shapes, opset,
    versions, largest absolute and relative differences; None when not checked)."""
    from speechkit.export.substitutes import exportable
    from speechkit.pretrained.backends import load_graph

    path = pathlib.Path(path)
    spec.module.eval()
    traced_module = exportable(spec.module).eval()
    generator = torch.Generator().manual_seed(seed)
    base = max(4 * spec.min_length, 16000 if spec.time_unit == "samples" else 40)
    example_lengths = [base, base * 3 // 4]
    example = (spec.example(example_lengths), torch.tensor(example_lengths))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            if fmt == "onnx":
                _to_onnx(spec, traced_module, example, path)
            elif fmt == "torchscript":
                _to_torchscript(spec, traced_module, example, path)
            else:
                raise ExportError(f"unknown export format {fmt!r}; use onnx or torchscript")
    frozen = sorted({f"{pathlib.Path(w.filename).name}:{w.lineno}" for w in caught
                     if issubclass(w.category, torch.jit.TracerWarning)})
    max_diff = max_rel = None
    if verify:
        graph = load_graph(path, fmt, spec.input_names, spec.output_names, min_time=spec.min_time)
        max_diff, max_rel = check_graph(spec, graph, generator, base, checks, frozen)
    with torch.no_grad():
        outputs = _as_tuple(spec.module(*example))
    return {"file": path.name, "format": fmt, "opset": OPSET if fmt == "onnx" else None,
            "inputs": _shapes(spec.dynamic_axes, spec.input_names, example),
            "outputs": _shapes(spec.dynamic_axes, spec.output_names, outputs),
            "torch": torch.__version__, "max_abs_diff": max_diff, "max_rel_diff": max_rel,
            "time_unit": spec.time_unit,
            "min_length": spec.min_length, "min_time": spec.min_time}


def check_graph(spec, graph, generator, base: int, checks: int, frozen=()) -> tuple:
    """``(largest absolute, largest relative difference)`` between ``graph`` and ``spec.module`` over
    :func:`check_cases`; raises :class:`ExportError` beyond :func:`allowed_difference`. The relative
    difference is the absolute one over ``max|output|``."""
    worst = [0.0, 0.0]
    for expected, got, lengths, what in check_cases(spec, graph, generator, base, checks):
        _worse(worst, _compare(spec, expected, got, lengths, frozen, what))
    return worst[0], worst[1]


def check_cases(spec, graph, generator, base: int, checks: int):
    """``(expected, got, lengths, what)`` for ``checks`` batches of random lengths (batch sizes 1, 3, 4,
    ...; lengths from ``min_length`` to 2.5x the export example) of the spec's example input and, where the
    spec has one, of speech-like input: PyTorch's outputs against ``graph``'s, then each item of a batch run
    alone by ``graph`` against the same item in its batch."""
    inputs = [("white noise", spec.example)]
    if getattr(spec, "speech_example", None) is not None:
        inputs.append(("speech-like input", spec.speech_example))
    for kind, make in inputs:
        for index in range(checks):
            batch = 1 if index == 0 else 2 + index
            lengths = torch.randint(spec.min_length, int(base * 2.5) + 1, (batch,), generator=generator)
            x = make(lengths.tolist())
            with torch.no_grad():
                expected = _as_tuple(spec.module(x, lengths))
            got = graph(x, lengths)
            yield expected, got, lengths, f"a batch of {kind}"
            for item in range(batch if batch > 1 else 0):
                n = int(lengths[item])
                alone = graph(x[item:item + 1, :n], lengths[item:item + 1])
                in_batch = tuple(_item(spec, out, item, alone_out) for out, alone_out in zip(got, alone))
                yield (in_batch, alone, lengths[item:item + 1],
                       f"an item of {kind} alone against the same item in a padded batch")


def _worse(worst: list, found: tuple) -> None:
    worst[0], worst[1] = max(worst[0], found[0]), max(worst[1], found[1])


def _item(spec, out: torch.Tensor, item: int, like: torch.Tensor) -> torch.Tensor:
    """Item ``item`` of a batch output, cut to the shape of the same output computed for it alone."""
    out = out[item:item + 1]
    if out.dim() == 1:
        return out
    return out[tuple(slice(0, n) for n in like.shape)]


def _compare(spec, expected, got, lengths, frozen, what: str) -> tuple:
    worst = [0.0, 0.0]
    for name, e, g in zip(spec.output_names, expected, got):
        e, g = torch.as_tensor(e), torch.as_tensor(g)
        if e.shape != g.shape:
            raise ExportError(_mismatch(spec, f"output '{name}' has shape {tuple(g.shape)} instead of "
                                              f"{tuple(e.shape)}", lengths, frozen, what))
        if not e.is_floating_point():
            if not torch.equal(e, g):
                raise ExportError(_mismatch(spec, f"output '{name}' is {g.tolist()} instead of {e.tolist()}",
                                            lengths, frozen, what))
            continue
        diff = float((e.double() - g.double()).abs().max()) if e.numel() else 0.0
        allowed = allowed_difference(e)
        scale = float(e.abs().max()) if e.numel() else 0.0
        if not diff <= allowed:
            problem = (f"output '{name}' differs by {diff:.3g} (its values reach {scale:.3g}; the tolerance "
                       f"is {allowed:.3g} = {ABS_TOLERANCE:g} + {REL_TOLERANCE:g} x that)")
            raise ExportError(_mismatch(spec, problem, lengths, frozen, what))
        _worse(worst, (diff, diff / scale if scale > 0 else 0.0))
    return worst[0], worst[1]


def _mismatch(spec, problem: str, lengths, frozen, what: str) -> str:
    where = (f"; the trace froze Python values of tensors at {', '.join(frozen[:6])}" if frozen else "")
    return (f"{spec.name}: the exported graph differs from PyTorch on {what} of lengths {lengths.tolist()} "
            f"(never seen at export): {problem}{where}")


def _as_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _shapes(axes: dict, names, tensors) -> dict:
    """name -> dims: the dynamic axes' names, the fixed sizes as numbers."""
    return {name: [axes.get(name, {}).get(i, size) for i, size in enumerate(tensor.shape)]
            for name, tensor in zip(names, tensors)}


def _to_onnx(spec, module, example, path: pathlib.Path) -> None:
    try:
        torch.onnx.export(module, example, str(path), dynamo=False, opset_version=OPSET,
                          input_names=list(spec.input_names), output_names=list(spec.output_names),
                          dynamic_axes=spec.dynamic_axes)
    except Exception as error:  # the exporter raises many types; every one becomes a clear ExportError
        raise ExportError(f"{spec.name}: cannot export to ONNX: "
                          f"{describe_failure(error, module, example)}") from None
    restore_missing_initializers(path, module)


def restore_missing_initializers(path: pathlib.Path, module: torch.nn.Module) -> None:
    """Give every weight of the file its own initializer.

    The exporter merges parameters of equal values (two freshly initialized normalizations) into one
    initializer read through ``Identity`` nodes, which onnxruntime's graph optimizer removes, leaving nodes
    that read a name nothing defines; the file is then refused. Each such ``Identity`` becomes a copy of
    its initializer.
    """
    import onnx

    model = onnx.load(str(path))
    graph = model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    aliases = [node for node in graph.node
               if node.op_type == "Identity" and len(node.input) == 1 and node.input[0] in initializers]
    if not aliases:
        return
    for node in aliases:
        copy_ = onnx.TensorProto()
        copy_.CopyFrom(initializers[node.input[0]])
        copy_.name = node.output[0]
        graph.initializer.append(copy_)
        graph.node.remove(node)
    onnx.save(model, str(path))


def _to_torchscript(spec, module, example, path: pathlib.Path) -> None:
    try:
        traced = torch.jit.trace(module, example, check_trace=False)
    except Exception as error:
        raise ExportError(f"{spec.name}: cannot trace to TorchScript: "
                          f"{describe_failure(error, module, example)}") from None
    traced.save(str(path))


def describe_failure(error: Exception, module: torch.nn.Module, example=None) -> str:
    """``module <path> (<Class>): operation <op>: <first line of the error>`` from an exporter error.

    The exporter names the operation; the module is the one whose traced code calls it (found by tracing
    ``module`` on ``example`` and reading the scope of the first node of that operation)."""
    text = str(error)
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    op = None
    for pattern in (r"operator '?(?:[a-z_]+::)?([A-Za-z0-9_]+)'?", r"aten::([A-Za-z0-9_]+)"):
        found = re.search(pattern, text)
        if found:
            op = found.group(1)
            break
    where = _module_calling(op, module, example) if op and example is not None else None
    if where is None:
        scope = re.search(r"scope: ([^\s#]+)", text)
        where = _module_of_scope(scope.group(1), module) if scope else None
    where = where or "unknown (the exporter names none)"
    return f"module {where}: operation {op or 'unknown'}: {first[:300]}"


def _module_calling(op: str, module: torch.nn.Module, example):
    """``path (Class)`` of the first module whose traced code runs ``aten::<op>`` (any case)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = torch.jit.trace(module, example, check_trace=False).inlined_graph
    except Exception:  # the trace itself fails: the exporter's message is all there is
        return None
    wanted = op.lower()
    for node in graph.nodes():
        if node.kind().split("::")[-1].lower().strip("_") == wanted:
            path = node.scopeName().split("/")[-1].replace("__module.", "").replace("__module", "")
            return _module_of_path(path, module)
    return None


def _module_of_path(path: str, root: torch.nn.Module) -> str:
    module = root
    for name in [n for n in path.split(".") if n]:
        module = getattr(module, name, None)
        if module is None:
            return path
    return f"{path or '(root)'} ({type(module).__name__})"


def _module_of_scope(scope: str, root: torch.nn.Module):
    """``encoder.layers.0 (LSTM)`` from a TorchScript scope such as
    ``pkg.Graph::/pkg.Encoder::encoder/torch.nn.modules.rnn.LSTM::0``."""
    parts = [p for p in scope.split("/") if "::" in p][1:]
    return _module_of_path(".".join(p.split("::", 1)[1] for p in parts), root) if parts else None

