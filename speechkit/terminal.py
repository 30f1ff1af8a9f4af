"""Progress bars on the terminal, and log lines that share the terminal with them.

Training, ``speechkit infer`` and every long command (``corpus``, ``manifest``, ``prepare-librispeech``,
``trim-silence``, ``mixtures``, ``embed``, ``separate``, ``transcribe``, ``evaluate``) show the same tqdm
bar on stderr, and only when stderr is a terminal: a log file or a pipe gets no bar. ``--no-progress`` and
``--noprogressbar`` (synonyms, accepted by each of these commands and by recipes) turn it off. While a bar
is shown, console log lines go through it (tqdm's logging redirect), so a line is printed above the bar
instead of onto it.

Example::

    with Progress("corpus", unit="utt", enabled=not args.no_progress) as bar:
        build_corpus(config, progress=bar.report, log=bar.write)

    for path in progress(paths, "transcribe", unit="file", enabled=not args.no_progress):
        ...
"""
from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterable, Iterator
from typing import Any, Optional

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

#: The two spellings of the switch, both accepted everywhere (recipes used the second, `infer` the first).
PROGRESS_FLAGS = ("--no-progress", "--noprogressbar")


def add_progress_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--no-progress`` and its synonym ``--noprogressbar`` (``args.no_progress``) to a command."""
    parser.add_argument(*PROGRESS_FLAGS, dest="no_progress", action="store_true",
                        help="No progress bar (none is shown either when stderr is not a terminal).")


def is_terminal(stream: Any = None) -> bool:
    """Whether ``stream`` (default: stderr) is an interactive terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Progress:
    """A tqdm bar on stderr, shown only when ``enabled`` and stderr is a terminal; logging goes through it.

    Args:
        description: the bar's label (``"corpus"``, ``"epoch 3 train"``).
        total: steps expected (None: unknown; :meth:`report` may set it later).
        unit: what a step is (``"utt"``, ``"file"``, ``"batch"``).
        enabled: False hides the bar whatever the terminal (``--no-progress``, a process other than rank 0).
        initial: steps already done (a resumed run).
        leave: keep the finished bar on screen.

    Use it as a context manager, or call :meth:`close`: closing ends the logging redirect.
    """

    def __init__(self, description: str, total: Optional[int] = None, unit: str = "it", enabled: bool = True,
                 initial: int = 0, leave: bool = True, **tqdm_options: Any):
        self.shown = bool(enabled) and is_terminal()
        self.bar = tqdm(total=total, initial=initial, desc=description, unit=unit, leave=leave,
                        disable=not self.shown, dynamic_ncols=True, file=sys.stderr, **tqdm_options)
        self._redirect = _LoggingThroughBars() if self.shown else None
        if self._redirect is not None:
            self._redirect.start()

    def update(self, steps: int = 1) -> None:
        self.bar.update(steps)

    def report(self, done: int, total: Optional[int] = None) -> None:
        """Set the count of steps done (and the total): the ``progress(done, total)`` callback of the
        library functions behind the commands (``build_corpus``, ``build_manifest``, ...)."""
        if total is not None and total != self.bar.total:
            self.bar.total = total
        self.bar.update(done - self.bar.n)

    def set_postfix(self, **values: Any) -> None:
        self.bar.set_postfix(refresh=False, **values)

    def write(self, text: str) -> None:
        """Print a line on stdout, above the bar when one is shown (the ``log`` callback of the library)."""
        if self.shown:
            tqdm.write(text, file=sys.stdout)
        else:
            print(text, flush=True)

    def close(self) -> None:
        if self._redirect is not None:
            self._redirect.stop()
            self._redirect = None
        self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def progress(items: Iterable, description: str, total: Optional[int] = None, unit: str = "it",
             enabled: bool = True) -> Iterator:
    """Yield ``items`` while a :class:`Progress` bar counts them (``total`` defaults to ``len(items)``)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)
    with Progress(description, total, unit, enabled) as bar:
        for item in items:
            yield item
            bar.update()


class _LoggingThroughBars:
    """tqdm's logging redirect over the root logger, keeping the replaced console handler's level (tqdm's
    own handler would otherwise let through records the console handler filtered out)."""

    def __init__(self):
        self._context = None

    def start(self) -> None:
        root = logging.getLogger()
        console = next((h for h in root.handlers if isinstance(h, logging.StreamHandler)
                        and getattr(h, "stream", None) in (sys.stdout, sys.stderr)), None)
        self._context = logging_redirect_tqdm()
        self._context.__enter__()
        added = root.handlers[-1]  # the redirect appends its handler
        # Without a console handler, logging would print warnings through its last-resort handler, onto the
        # bar's line: the redirect's handler takes its place, at its level.
        added.setLevel(console.level if console is not None
                       else getattr(logging.lastResort, "level", logging.WARNING))

    def stop(self) -> None:
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = None
