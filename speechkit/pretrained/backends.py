"""Run exported graphs (``speechkit.export``): onnxruntime or TorchScript behind the interfaces' usual calls.

:func:`load_graph` gives a callable ``graph(x, lengths) -> tuple of tensors`` that checks its inputs first
(a graph cannot raise a readable error itself: a length past the padded signal would silently read
padding). :func:`attach_backend` puts such graphs in place of an interface's modules, so
``transcribe_file``, ``separate_file``, ``generate`` and ``extract_file`` run the exported artefacts.

Example:
    >>> graph = load_graph("model/recognizer.onnx", "onnx", ("wavs", "lengths"), ("log_probs",
    ...                    "frame_lengths"))                                              # doctest: +SKIP
    >>> log_probs, frames = graph(torch.randn(2, 16000), torch.tensor([16000, 9000]))     # doctest: +SKIP
"""
from __future__ import annotations

import json
import os
import pathlib
from typing import Optional

import numpy as np
import torch

from speechkit.errors import DataError, HparamsError, SpeechkitError

#: Formats of ``backend=`` and the suffix of their files.
SUFFIXES = {"onnx": ".onnx", "torchscript": ".pt"}
#: The model folder's description of its exported graphs.
MANIFEST = "export.json"
#: onnxruntime's graph optimisation level for every session: all of them (constant folding, redundant node
#: elimination, and the fusions of its CPU provider: Conv+Add+activation, MatMul+Add into Gemm, GELU, layer
#: normalization, attention), set explicitly so that no build's other default applies.
ORT_OPTIMIZATION = "ORT_ENABLE_ALL"


class Graph:
    """An exported graph with two inputs (padded signal, int64 lengths); see :func:`load_graph`."""

    def __init__(self, path, fmt: str, input_names, output_names, threads: Optional[int] = None,
                 min_time: int = 1):
        self.path, self.format, self.min_time = pathlib.Path(path), fmt, int(min_time)
        self.input_names, self.output_names = tuple(input_names), tuple(output_names)
        if fmt == "onnx":
            try:
                import onnxruntime
            except ImportError:
                raise SpeechkitError("the onnx backend needs onnxruntime: pip install 'speechkit[onnx]'") \
                    from None
            options = onnxruntime.SessionOptions()
            options.graph_optimization_level = getattr(onnxruntime.GraphOptimizationLevel, ORT_OPTIMIZATION)
            options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL  # one graph, one stream of ops
            options.intra_op_num_threads = threads or _omp_threads()
            options.inter_op_num_threads = 1
            try:
                self.session = onnxruntime.InferenceSession(str(path), options,
                                                            providers=["CPUExecutionProvider"])
            except Exception as error:  # onnxruntime raises its own classes (InvalidProtobuf, Fail, ...)
                raise SpeechkitError(f"{path}: onnxruntime cannot load this graph: {_first_line(error)}") \
                    from None
        elif fmt == "torchscript":
            try:
                self.module = torch.jit.load(str(path), map_location="cpu").eval()
            except Exception as error:
                raise SpeechkitError(f"{path}: not a TorchScript file torch can load: {_first_line(error)}") \
                    from None
        else:
            raise SpeechkitError(f"unknown backend {fmt!r}; use torch, onnx or torchscript")

    def __call__(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple:
        """Outputs for the padded batch ``x`` (float32) with ``lengths`` (batch,) valid steps per item."""
        x = torch.as_tensor(x)
        lengths = torch.as_tensor(lengths)
        if lengths.is_floating_point() or lengths.dim() != 1 or lengths.shape[0] != x.shape[0]:
            raise DataError(f"{self.path.name}: lengths must be ({x.shape[0]},) absolute integer lengths, "
                            f"got {lengths.dtype} of shape {tuple(lengths.shape)}")
        if lengths.numel() and (int(lengths.max()) > x.shape[1] or int(lengths.min()) < 0):
            raise DataError(f"{self.path.name}: lengths {lengths.tolist()} must lie in [0, {x.shape[1]}] "
                            f"(the padded size of input '{self.input_names[0]}')")
        if x.shape[1] < self.min_time:
            raise DataError(f"{self.path.name}: input '{self.input_names[0]}' must be padded to at least "
                            f"{self.min_time} steps, got {x.shape[1]}")
        device = x.device
        x, lengths = x.detach().to("cpu", torch.float32), lengths.detach().to("cpu", torch.int64)
        if self.format == "onnx":
            feeds = {self.input_names[0]: np.ascontiguousarray(x.numpy()),
                     self.input_names[1]: np.ascontiguousarray(lengths.numpy())}
            outputs = [torch.from_numpy(np.asarray(o)) for o in self._run(feeds)]
        else:
            with torch.no_grad():
                out = self.module(x, lengths)
            outputs = list(out) if isinstance(out, (tuple, list)) else [out]
        return tuple(o.to(device) for o in outputs)

    def _run(self, feeds: dict) -> list:
        return run_session(self, feeds)


def _first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:300]}"


def run_session(graph: Graph, feeds: dict) -> list:
    """``graph.session.run`` with onnxruntime's errors (a graph whose inputs do not match the manifest, a
    kernel failing on a shape) turned into one naming the file."""
    try:
        return graph.session.run(None, feeds)
    except Exception as error:
        shapes = ", ".join(f"{name} {tuple(value.shape)}" for name, value in feeds.items())
        raise SpeechkitError(f"{graph.path}: onnxruntime failed on inputs {shapes}: {_first_line(error)}") \
            from None


def _omp_threads() -> int:
    """OMP_NUM_THREADS as onnxruntime's thread count (0: its own default), as torch reads it."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() else 0


def load_graph(path, fmt: str, input_names, output_names, threads: Optional[int] = None,
               min_time: int = 1) -> Graph:
    """Open an exported graph for :meth:`Graph.__call__`."""
    return Graph(path, fmt, input_names, output_names, threads, min_time)


class StepRunner:
    """The ``stream_step`` graph (:mod:`speechkit.export.stream_step`): ``runner(feats, state)`` ->
    ``(log_probs, encoded, next_state)`` tensors."""

    def __init__(self, path, fmt: str, threads: Optional[int] = None):
        self.graph = Graph(path, fmt, ("feats", "state"), ("log_probs", "encoded", "next_state"), threads)

    def __call__(self, feats: torch.Tensor, state: torch.Tensor) -> tuple:
        feats, state = feats.detach().to("cpu", torch.float32), state.detach().to("cpu", torch.float32)
        if self.graph.format == "onnx":
            outputs = run_session(self.graph, {"feats": np.ascontiguousarray(feats.numpy()),
                                               "state": np.ascontiguousarray(state.numpy())})
            return tuple(torch.from_numpy(np.asarray(o)) for o in outputs)
        with torch.no_grad():
            return tuple(self.graph.module(feats, state))


class GraphModule(torch.nn.Module):
    """An exported graph standing where an interface expects a module: ``forward(x, lengths)`` returns
    the single output, or the tuple of outputs."""

    def __init__(self, graph: Graph):
        super().__init__()
        self.graph = graph

    def forward(self, x: torch.Tensor, lengths: torch.Tensor):
        outputs = self.graph(x, lengths)
        return outputs[0] if len(outputs) == 1 else outputs


class _Passthrough(torch.nn.Module):
    """``forward(x, lengths) -> (x, lengths)``: where an exported graph takes the waveform itself."""

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple:
        return x, lengths


class _EncoderOutput:
    """The fields of :class:`speechkit.models.wav2vec2.EncoderOutput` the features interface reads."""

    def __init__(self, output: torch.Tensor, lengths: torch.Tensor):
        self.output, self.lengths = output, lengths


class Wav2Vec2GraphModule(torch.nn.Module):
    """The exported wav2vec 2.0 graph (normalization included) where the interface calls its encoder;
    only the last layer is exported."""

    def __init__(self, graph: Graph):
        super().__init__()
        self.graph = graph

    def forward(self, wavs, lengths, num_layers=None):
        if num_layers is not None:
            raise SpeechkitError("the exported wav2vec 2.0 graph gives the last layer only (layer=None); "
                                 "use backend='torch' for other layers")
        output, frames = self.graph(wavs, lengths)
        return _EncoderOutput(output, frames)


def read_manifest(folder) -> dict:
    """The folder's ``export.json``: artefact name -> card entry (see :func:`convert.export_graph`), every
    field checked (a hand-edited or hostile file fails here, naming the file and the field)."""
    path = pathlib.Path(folder) / MANIFEST
    if not path.is_file():
        raise HparamsError(f"{folder}: has no {MANIFEST}; write one with `speechkit export --format onnx`")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise HparamsError(f"{path}: not valid JSON: {error}") from None
    check_manifest(manifest, path)
    return manifest


def check_manifest(manifest, path) -> None:
    """Raise :class:`HparamsError` naming ``path`` and the field when ``manifest`` is not an ``export.json``
    as :func:`speechkit.export.folder` writes it."""
    from speechkit.pretrained.sources.names import check_relative_name

    if not isinstance(manifest, dict):
        raise HparamsError(f"{path}: must hold a JSON object, got {type(manifest).__name__}")
    artefacts = manifest.get("artefacts", {})
    if not isinstance(artefacts, dict):
        raise HparamsError(f"{path}: 'artefacts' must be an object of artefact name -> entry, got "
                           f"{type(artefacts).__name__}")
    for name, entry in artefacts.items():
        where = f"{path}: artefact '{name}'"
        if not isinstance(entry, dict):
            raise HparamsError(f"{where}: must be an object, got {type(entry).__name__}")
        file = entry.get("file")
        if not isinstance(file, str) or not file:
            raise HparamsError(f"{where}: 'file' must be a file name, got {file!r}"[:300])
        try:
            check_relative_name(file, f"{where}: 'file'")
        except SpeechkitError as error:
            raise HparamsError(str(error)) from None
        for field, least in (("inputs", 2), ("outputs", 1)):
            names = entry.get(field)
            if not isinstance(names, (dict, list)) or len(names) < least \
                    or not all(isinstance(n, str) and n for n in names):
                raise HparamsError(f"{where}: '{field}' must name at least {least} tensor(s) (an object or a "
                                   f"list of names), got {names!r}"[:300])
        quantization = entry.get("quantization")
        if quantization is not None:
            fp32 = quantization.get("fp32_file") if isinstance(quantization, dict) else None
            if not isinstance(fp32, str) or not fp32:
                raise HparamsError(f"{where}: 'quantization' must be an object whose 'fp32_file' names the "
                                   f"float graph, got {quantization!r}"[:300])
            try:
                check_relative_name(fp32, f"{where}: 'quantization.fp32_file'")
            except SpeechkitError as error:
                raise HparamsError(str(error)) from None
        min_time = entry.get("min_time", 1)
        if isinstance(min_time, bool) or not isinstance(min_time, int) or not 1 <= min_time <= 1 << 20:
            raise HparamsError(f"{where}: 'min_time' must be an integer from 1 to {1 << 20}, got "
                               f"{min_time!r}")


def attach_backend(interface, backend: str, folder, fetch_file=None, threads: Optional[int] = None):
    """Replace ``interface``'s modules by the exported graphs of ``folder`` in format ``backend``.

    ``fetch_file(name) -> path`` brings a file of the model folder (for remote sources); by default files
    are read from ``folder``.
    """
    if backend not in SUFFIXES:
        raise SpeechkitError(f"unknown backend {backend!r}; use torch, onnx or torchscript")
    fetch_file = fetch_file or (lambda name: pathlib.Path(folder) / name)
    manifest = read_manifest(pathlib.Path(fetch_file(MANIFEST)).parent)
    artefacts = manifest.get("artefacts", {})

    def graph(name: str) -> Graph:
        key = f"{name}.{backend}"
        if key not in artefacts:
            have = ", ".join(sorted(artefacts)) or "none"
            raise HparamsError(f"{folder}: {MANIFEST} lists no '{key}' artefact (it has {have}); export "
                               f"with `speechkit export --format {backend}`")
        entry = artefacts[key]
        return load_graph(fetch_file(entry["file"]), backend, entry["inputs"], entry["outputs"], threads,
                          entry.get("min_time", 1))

    # By class name (the interfaces import this module, so it imports none of them back).
    kinds = {cls.__name__ for cls in type(interface).__mro__}
    if "EncoderASR" in kinds:
        interface.mods["exported_recognizer"] = GraphModule(graph("recognizer"))
        interface.torch_pipeline = list(interface.hparams["encoder_pipeline"])  # what the graph holds
        interface.hparams = dict(interface.hparams, encoder_pipeline=["exported_recognizer"])
        step = artefacts.get(f"stream_step.{backend}")
        interface.stream_step = StepRunner(fetch_file(step["file"]), backend, threads) if step else None
    elif "SeparationModel" in kinds:
        interface.mods["separator"] = GraphModule(graph("separator"))
    elif "SpeakerRecognition" in kinds:
        # The graph holds the whole pipeline: features in, (normalized) embeddings out.
        for name in ("mean_var_norm", "embedding_norm"):
            if name in interface.mods:
                del interface.mods[name]
        interface.mods["compute_features"] = _Passthrough()
        interface.mods["embedding_model"] = GraphModule(graph("embedder"))
    elif "Vocoder" in kinds:
        interface.mods["mel"] = GraphModule(graph("mel"))
        interface.mods["generator"] = GraphModule(graph("generator"))
    elif "Wav2Vec2Features" in kinds:
        interface.encoder = Wav2Vec2GraphModule(graph("features"))
        if "normalize" in interface.mods:
            del interface.mods["normalize"]  # inside the exported graph
    else:
        raise SpeechkitError(f"{type(interface).__name__} has no exported backend")
    interface.backend = backend
    return interface
