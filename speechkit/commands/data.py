"""``speechkit data SUBCOMMAND``: bring your own recordings in (docs/data.md).

Each subcommand lives in its own module of ``speechkit.commands`` (``data_import``, ``data_check``,
``data_convert``), imported only when it runs, with the usual ``add_arguments(parser)`` and ``run(args)``.

Example::

    speechkit data import commonvoice ~/cv-corpus/en --dest data/cv
    speechkit data check data/cv/train.json data/cv/test.json
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util

#: subcommand -> (module, one-line help)
SUBCOMMANDS = {
    "import": ("speechkit.commands.data_import",
               "Write train/valid/test manifests from a corpus layout (Common Voice, LibriSpeech, CSV, "
               "Kaldi, a folder, VoxCeleb, LibriMix)."),
    "check": ("speechkit.commands.data_check",
              "Report what would go wrong in training on these manifests (rates, durations, text, splits)."),
    "convert": ("speechkit.commands.data_convert",
                "Write a manifest's audio once at the model's rate and channels (FLAC), and a manifest "
                "of it."),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND", required=True)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if importlib.util.find_spec(module_name) is None:  # a subcommand this install does not ship
            continue
        child = sub.add_parser(name, help=help_text, description=help_text,
                               formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        child.set_defaults(data_module=module_name)
        importlib.import_module(module_name).add_arguments(child)


def run(args: argparse.Namespace) -> int | None:
    return importlib.import_module(args.data_module).run(args)
