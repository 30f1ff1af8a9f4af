"""Add exported graphs to a model folder: ``<artefact>.onnx`` / ``<artefact>.pt``, ``export.json`` and one
model-card line per artefact.

The written folder is the PyTorch model folder plus its graphs, so the same folder loads with
``backend="torch"``, ``"onnx"`` or ``"torchscript"``. It is assembled in a temporary folder and renamed
when complete.

Example:
    >>> export_folder("results/model", "results/model-onnx", formats=["onnx"])   # doctest: +SKIP
    PosixPath('results/model-onnx')
"""
from __future__ import annotations

import json
import logging
import os
import pathlib
import shutil
import tempfile

from speechkit.atomic_files import replacing_folder
from speechkit.errors import ExportError, SpeechkitError
from speechkit.output_folder import check_model_output
from speechkit.pretrained.backends import MANIFEST, SUFFIXES

logger = logging.getLogger(__name__)


def export_folder(source, output, formats=("onnx",), force: bool = False, verify: bool = True,
                  quantize=None, **load_options) -> pathlib.Path:
    """Load the model folder ``source`` (local path, Hub repo id or URL), export its graphs in ``formats``
    into a copy of it at ``output``; every graph is checked against PyTorch first
    (:func:`speechkit.export.convert.export_graph`) unless ``verify`` is False. ``quantize="int8"`` also
    writes each ONNX graph's int8 version (:mod:`speechkit.export.quantize`; the streaming step stays
    float32), which the manifest then names, so ``backend="onnx"`` runs it. Files are written with the
    user's umask, as any other file (weights copied from a folder whose writer made them private too).
    Returns ``output``."""
    from speechkit.export.convert import export_graph
    from speechkit.export.graphs import graph_specs
    from speechkit.export.stream_step import export_stream_step, stream_step_of
    from speechkit.pretrained.interfaces import Pretrained
    from speechkit.pretrained.sources.fetching import FetchFrom, resolve_source

    output = pathlib.Path(output).expanduser().absolute()
    for fmt in formats:
        if fmt not in SUFFIXES:
            raise SpeechkitError(f"unknown export format {fmt!r}; use {' or '.join(SUFFIXES)}")
    check_quantize(quantize, formats)
    fetch_source = resolve_source(source)
    local = fetch_source.kind is FetchFrom.LOCAL
    check_model_output(output, force, [pathlib.Path(os.path.expanduser(fetch_source.path))] if local else [])
    with tempfile.TemporaryDirectory(prefix="speechkit-export-") as download:
        if fetch_source.kind is FetchFrom.LOCAL:
            folder = pathlib.Path(os.path.expanduser(fetch_source.path))
            interface = Pretrained.from_hparams(str(folder), **load_options)
        else:  # a copy of every file, so that the exported folder stands alone
            folder = pathlib.Path(download)
            interface = Pretrained.from_hparams(source, savedir=folder, strategy="copy", **load_options)
        if output.exists() and output.resolve() == folder.resolve():
            raise SpeechkitError(f"{output}: is the source folder; write the exported copy elsewhere")
        with replacing_folder(output) as tmp:
            shutil.copytree(folder, tmp, symlinks=False, ignore=shutil.ignore_patterns(".*"),
                            dirs_exist_ok=True)
            manifest = {"interface": type(interface).__name__, "artefacts": {}}
            for spec in graph_specs(interface):
                for fmt in formats:
                    name = f"{spec.name}{SUFFIXES[fmt]}"
                    logger.info("exporting %s", name)
                    entry = export_graph(spec, tmp / name, fmt, verify=verify)
                    entry.update(spec.notes)
                    if quantize and fmt == "onnx":
                        _add_quantized(entry, spec, tmp / name, verify)
                    manifest["artefacts"][f"{spec.name}.{fmt}"] = entry
            if quantize and not any("quantization" in e for e in manifest["artefacts"].values()):
                raise ExportError(f"{type(interface).__name__}: none of its graphs has an operator int8 "
                                  "dynamic quantisation applies to; export it without --quantize")
            step = stream_step_of(interface)
            for fmt in formats if step is not None else ():
                name = f"stream_step{SUFFIXES[fmt]}"
                diff = export_stream_step(step, tmp / name, fmt, step.encoder.input_size, verify=verify)
                manifest["artefacts"][f"stream_step.{fmt}"] = _step_entry(name, fmt, step, diff)
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
            card = tmp / "README.md"
            text = card.read_text(encoding="utf-8") if card.is_file() else f"# {output.name}\n"
            card.write_text(text.rstrip("\n") + "\n\n" + card_section(manifest), encoding="utf-8")
            honour_umask(tmp)
    return output


def _add_quantized(entry: dict, spec, fp32_path: pathlib.Path, verify: bool) -> None:
    """Write the int8 graph next to ``fp32_path`` and make ``entry`` name it; a graph without anything to
    quantise (a mel front end) stays float32."""
    from speechkit.export.quantize import NothingToQuantize, quantize_graph, quantized_name

    int8_name = quantized_name(fp32_path.name)
    try:
        entry["quantization"] = quantize_graph(spec, fp32_path, fp32_path.with_name(int8_name), verify=verify)
    except NothingToQuantize as error:
        logger.info("%s stays float32: %s", fp32_path.name, error)
        return
    entry["file"] = int8_name


def check_quantize(quantize, formats) -> None:
    """Raise :class:`SpeechkitError` for a ``--quantize`` value or format it does not apply to."""
    from speechkit.export.quantize import QUANTIZATIONS

    if quantize is None:
        return
    if quantize not in QUANTIZATIONS:
        raise SpeechkitError(f"--quantize {quantize}: unknown; use {' or '.join(QUANTIZATIONS)}")
    if "torchscript" in formats:
        raise SpeechkitError(f"--quantize {quantize} applies to ONNX graphs only; TorchScript (deprecated) "
                             "is exported in float32: drop --format torchscript, or export it to another "
                             "folder without --quantize")


def current_umask() -> int:
    """The process's umask (read by setting it and putting it back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def honour_umask(folder: pathlib.Path) -> None:
    """Give ``folder`` and everything in it the modes a new file or folder gets under the user's umask."""
    mask = current_umask()
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod((0o777 if path.is_dir() else 0o666) & ~mask)


def _step_entry(name: str, fmt: str, step, diff: float) -> dict:
    import torch

    from speechkit.export.convert import OPSET

    state = ["layers", "h_c" if step.parts == 2 else "h", "batch", step.hidden_size]
    enc = step.encoder
    return {"file": name, "format": fmt, "opset": OPSET if fmt == "onnx" else None,
            "inputs": {"feats": ["batch", f"frames (multiple of {enc.stride})", enc.input_size],
                       "state": state},
            "outputs": {"log_probs": ["batch", "out_frames", "vocabulary"],
                        "encoded": ["batch", "out_frames", enc.d_model], "next_state": state},
            "torch": torch.__version__, "max_abs_diff": diff}


def card_section(manifest: dict) -> str:
    """The model card's ``Exported graphs`` section: one line per artefact."""
    lines = ["## Exported graphs", "",
             f"Load with `{manifest['interface']}.from_hparams(<this folder>, backend=\"onnx\")` (or "
             "`\"torchscript\"`); see docs/deploy.md of speechkit. Lengths are absolute (samples or frames) "
             "and must not exceed the padded input. Each graph was checked against PyTorch on batches of "
             "random lengths never seen at export and on each item alone, unless said otherwise below.", ""]
    for entry in manifest["artefacts"].values():
        inputs = ", ".join(f"{n} {_dims(d)}" for n, d in entry["inputs"].items())
        outputs = ", ".join(f"{n} {_dims(d)}" for n, d in entry["outputs"].items())
        opset = f"opset {entry['opset']}, " if entry.get("opset") else ""
        checked = ("not checked against PyTorch (exported with --no-verify)" if entry["max_abs_diff"] is None
                   else f"largest difference to PyTorch {entry['max_abs_diff']:.2g}"
                   + (f" ({entry['max_rel_diff']:.2g} of the output's scale)" if entry.get("max_rel_diff")
                      is not None else ""))
        quantized = entry.get("quantization")
        if quantized:
            checked = f"the float32 graph `{quantized['fp32_file']}`: {checked}; " + (
                "int8 graph not checked against PyTorch (exported with --no-verify)"
                if quantized["min_snr_db"] is None else
                f"int8 graph: signal-to-error against PyTorch at least {quantized['min_snr_db']:.1f} dB "
                f"(required: {quantized['required_snr_db']:g} dB)")
            opset = f"int8 dynamic quantisation, {opset}"
        lines.append(f"- `{entry['file']}` ({entry['format']}, {opset}PyTorch {entry['torch']}): "
                     f"inputs {inputs}; outputs {outputs}; {checked}.")
    return "\n".join(lines) + "\n"


def _dims(dims) -> str:
    return "(" + ", ".join(str(d) for d in dims) + ")"
