"""Export models as ONNX or TorchScript graphs that equal PyTorch, and run them (docs/deploy.md).

Example:
    >>> from speechkit.export import export_folder
    >>> export_folder("results/model", "results/model-onnx", formats=["onnx"])        # doctest: +SKIP
    >>> from speechkit.pretrained import EncoderASR
    >>> asr = EncoderASR.from_hparams("results/model-onnx", backend="onnx")           # doctest: +SKIP
"""
from speechkit.export.convert import ExportError, export_graph
from speechkit.export.folder import export_folder
from speechkit.export.greedy import ctc_greedy_numpy
from speechkit.pretrained.backends import attach_backend, load_graph

__all__ = ["ExportError", "attach_backend", "ctc_greedy_numpy", "export_folder", "export_graph", "load_graph"]
