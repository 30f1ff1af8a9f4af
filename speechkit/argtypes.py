"""argparse ``type=`` converters shared by the command-line tools of every layer (it imports nothing of
speechkit, so ``data/`` and ``pretrained/`` alike can use it)."""
from __future__ import annotations

import argparse


def name_value(text: str) -> tuple:
    """argparse ``type=`` of ``NAME=VALUE`` options (repeat them with ``action="append"``, then ``dict()``).

    Example:
        >>> name_value("data_root=/corpora/x")
        ('data_root', '/corpora/x')
    """
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value
