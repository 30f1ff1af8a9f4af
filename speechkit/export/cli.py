"""``speechkit export --format onnx|torchscript [--quantize int8]``: a model folder with its exported graphs.

From a model folder (``--model``: local, Hub repo id or URL) or from a recipe's checkpoint
(``--checkpoints`` and ``--hparams``, as without ``--format``: the PyTorch model folder is written first).

Example::

    speechkit export --model results/model --format onnx --format torchscript --output results/model-onnx
    speechkit export --model results/model --quantize int8 --output results/model-int8
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import tempfile

from speechkit.errors import SpeechkitError


def run_export(args: argparse.Namespace, export_model) -> int:
    """Run the command; ``export_model`` writes the PyTorch folder of a recipe's checkpoint."""
    from speechkit.export.folder import check_quantize, export_folder

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
