"""argparse ``type=`` converters shared by the command-line tools of every layer (it imports nothing of
speechkit, so ``data/`` and ``pretrained/`` alike can use it)."""
from __future__ import annotations

import argparse
import math
from typing import Any, Callable, Optional


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


def number(kind: type = float, low: Optional[float] = None, high: Optional[float] = None, *,
           above: bool = False) -> Callable[[str], Any]:
    """argparse ``type=`` of a finite ``kind`` (int or float) in ``[low, high]`` (``(low, high]`` when
    ``above``); argparse names the flag in its error and exits with status 2.

    Example:
        >>> probability = number(float, 0.0, 1.0)
        >>> probability("0.25")
        0.25
        >>> number(int, 1)("0")
        Traceback (most recent call last):
        argparse.ArgumentTypeError: must be >= 1, got 0
    """

    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'a whole number' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if low is not None and (value <= low if above else value < low):
            raise argparse.ArgumentTypeError(f"must be {'>' if above else '>='} {low:g}, got {text}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high:g}, got {text}")
        return value

    convert.__name__ = kind.__name__  # argparse's "invalid <name> value" message
    return convert


class OrderedPair(argparse.Action):
    """``nargs=2`` action refusing ``MIN MAX`` with MIN > MAX (each value checked by the option's ``type``).

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> _ = parser.add_argument("--snr-range", nargs=2, type=number(float), action=OrderedPair)
        >>> parser.parse_args(["--snr-range", "5", "30"]).snr_range
        (5.0, 30.0)
    """

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        low, high = values
        if low > high:
            raise argparse.ArgumentError(self, f"MIN {low:g} is above MAX {high:g}; give MIN MAX")
        setattr(namespace, self.dest, (low, high))
