"""``speechkit export``: a recipe's best checkpoint as a model folder, and a model folder's graphs.

Without ``--format`` or ``--quantize`` the command writes the PyTorch model folder of a recipe's
checkpoint (``--checkpoints`` and ``--hparams``; :mod:`speechkit.export.model_folder`). With them it writes a
model folder with its exported graphs (:func:`speechkit.export.folder.export_folder`): from a model folder
(``--model``: local, Hub repo id or URL) or from a recipe's checkpoint, whose PyTorch folder is written first.

Example::

    speechkit export --checkpoints results/asr/save --hparams hparams/inference.yaml --min-key WER \\
        --output models/asr-ctc
    speechkit export --model results/model --format onnx --format torchscript --output results/model-onnx
    speechkit export --model results/model --quantize int8 --output results/model-int8
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import tempfile

from speechkit.argtypes import name_value
from speechkit.errors import SpeechkitError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoints", default=None,
                        help="The recipe's checkpoints folder (CKPT+* inside; the best by --min-key/"
                        "--max-key is exported), or one checkpoint folder (a CKPT+ folder, or one written by "
                        "speechkit average-checkpoints).")
    parser.add_argument("--hparams", default=None, help="The inference YAML that becomes hyperparams.yaml.")
    parser.add_argument("--model", default=None, help="Export graphs of this model folder (local, Hub repo "
                        "id or URL) instead of a recipe's checkpoint (with --format).")
    parser.add_argument("--format", action="append", default=[], choices=["onnx", "torchscript"],
                        help="Also write the model's graphs in this format (repeatable; docs/deploy.md).")
    parser.add_argument("--quantize", default=None, choices=["int8"],
                        help="Also write each ONNX graph's int8 version (dynamic quantisation), checked "
                        "against PyTorch with int8's tolerance; backend='onnx' then runs it "
                        "(docs/deploy.md).")
    parser.add_argument("--output", required=True, help="The model folder to write.")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--min-key", default=None, help="Pick the checkpoint with the lowest value (WER).")
    group.add_argument("--max-key", default=None, help="Pick the checkpoint with the highest value.")
    parser.add_argument("--map", action="append", default=[], type=name_value, metavar="NAME=CKPT[:PREFIX]",
                        help="Loadable NAME takes the tensors of CKPT.ckpt whose keys start with PREFIX.")
    parser.add_argument("--file", action="append", default=[], type=name_value, metavar="NAME=PATH",
                        help="Loadable NAME's file is copied from PATH (e.g. a tokenizer model).")
    parser.add_argument("--name", default=None, help="Model name for the card (default: the output folder).")
    parser.add_argument("--description", default="", help="A paragraph for the model card.")
    parser.add_argument("--force", action="store_true", help="Replace an existing output folder.")
    parser.add_argument("--no-verify", action="store_true", help="Skip loading the exported model back, and "
                        "comparing exported graphs (--format) with PyTorch.")
    parser.add_argument("--run-hparams", default="auto", help="The training run's hyperparams.yaml whose "
                        "whole-number sizes replace the inference YAML's (default: the one of the run the "
                        "checkpoints belong to; 'none' keeps the inference YAML as it is).")


def run(args: argparse.Namespace) -> int:
    if args.format or args.model or args.quantize:
        return _export_graphs(args)
    if not (args.checkpoints and args.hparams):
        raise SpeechkitError("give --checkpoints and --hparams (a recipe's checkpoint), or --model with "
                             "--format")
    from speechkit.export.model_folder import export_model

    folder = export_model(
        args.checkpoints, args.hparams, args.output, min_key=args.min_key, max_key=args.max_key,
        mapping=dict(args.map), files=dict(args.file), name=args.name,
        description=args.description, force=args.force, verify=not args.no_verify,
        run_hparams=None if args.run_hparams == "none" else args.run_hparams)
    print(folder)
    return 0


def _export_graphs(args: argparse.Namespace) -> int:
    """``--format``/``--quantize``: the graphs of a model folder, or of a recipe's checkpoint (exported
    first)."""
    from speechkit.export.folder import check_quantize, export_folder
    from speechkit.export.model_folder import export_model

    formats = list(dict.fromkeys(args.format)) or ["onnx"]
    quantize = getattr(args, "quantize", None)
    check_quantize(quantize, formats)  # before a recipe's checkpoint is exported
    if args.model and (args.checkpoints or args.hparams):
        raise SpeechkitError("give either --model, or --checkpoints with --hparams, not both")
    if args.model:
        folder = export_folder(args.model, args.output, formats=formats, force=args.force,
                               verify=not args.no_verify, quantize=quantize)
    elif args.checkpoints and args.hparams:
        staging = pathlib.Path(tempfile.mkdtemp(prefix="speechkit-export-"))
        try:
            model = export_model(args.checkpoints, args.hparams, staging / "model", min_key=args.min_key,
                                 max_key=args.max_key, mapping=dict(args.map), files=dict(args.file),
                                 name=args.name or pathlib.Path(args.output).name,
                                 description=args.description, verify=not args.no_verify,
                                 run_hparams=None if args.run_hparams == "none" else args.run_hparams)
            folder = export_folder(model, args.output, formats=formats, force=args.force,
                                   verify=not args.no_verify, quantize=quantize)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    else:
        raise SpeechkitError("give --model FOLDER, or --checkpoints and --hparams")
    print(folder)
    return 0
