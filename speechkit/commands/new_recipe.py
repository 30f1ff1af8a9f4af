"""``speechkit new-recipe TEMPLATE DEST``: copy a recipe template to a new folder, ready to run from there.

The copy (and the rewriting of paths that leave the template) is :func:`speechkit.templating.copy_template`.

Example::

    speechkit new-recipe --list
    speechkit new-recipe speech_recognition my_asr
    cd my_asr/ASR && python train.py hparams/train.yaml
"""
from __future__ import annotations

import argparse

from speechkit.templating import (
    TemplateError,
    copy_template,
    no_templates_hint,
    template_folders,
    templates_root,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("template", nargs="?", help="Template name (see --list), e.g. speech_recognition, or "
                        "one recipe of it, e.g. speech_recognition/ASR.")
    parser.add_argument("dest", nargs="?", help="Folder to create.")
    parser.add_argument("--list", action="store_true", help="List the available templates and exit.")
    parser.add_argument("--force", action="store_true", help="Copy into an existing, non-empty folder.")


def run(args: argparse.Namespace) -> int:
    root = templates_root()
    if args.list:
        folders = template_folders(root)
        if not folders:
            raise TemplateError(f"available templates: {no_templates_hint(root)}")
        for folder in folders:
            print(folder.name)
        return 0
    if not args.template or not args.dest:
        names = ", ".join(folder.name for folder in template_folders(root)) or no_templates_hint(root)
        raise TemplateError(f"usage: speechkit new-recipe TEMPLATE DEST; available templates: {names}")
    dest = copy_template(args.template, args.dest, force=args.force)
    print(f"Copied template {args.template!r} to {dest}")
    readme = dest / "README.md"
    if readme.is_file():
        print(f"Next: read {readme}")
    return 0
