"""The code blocks of a Markdown page and the ``doc-test`` markers that say how tests/docs runs them.

A marker is an HTML comment (invisible on the rendered page) on the lines just before a fenced block:

``<!-- doc-test: skip CATEGORY: why -->``
    the block cannot run here; CATEGORY is one of :data:`SKIP_CATEGORIES` (``covered`` names the test file
    that runs the same thing, which must exist).
``<!-- doc-test: skip-lines /REGEX/ CATEGORY: why -->``
    a bash block's command lines matching REGEX are left out (the others run).
``<!-- doc-test: sub OLD => NEW -->``
    replace OLD by NEW before running: the tiny settings a quick run uses (``--size small => --size tiny``).
``<!-- doc-test: file PATH -->``
    write the block to PATH in the page's folder (a script or YAML file a later block runs); a YAML file is
    still loaded.
``<!-- doc-test: run COMMAND -->``
    after writing the file, run the bash COMMAND in the page's folder.
``<!-- doc-test: setup`` ... ``-->``
    code run before the block, in its language (for YAML: text put before it): what the page assumes exists.
``<!-- doc-test: pending why -->``
    the block runs, but a failure is reported as an expected failure (a fix under way elsewhere).

Blocks without a language or marked ``text`` show output, not code, and are not run.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

#: Why a block may be left out: the list the test prints must stay short and say why.
SKIP_CATEGORIES = {
    "gpu": "needs a CUDA GPU",
    "network": "needs the network (downloads, a model hub)",
    "slurm": "needs a SLURM cluster",
    "long": "trains or runs for minutes",
    "covered": "the same commands run in the named test",
    "external-data": "needs a corpus that is not in the repository",
}

RUNNABLE = ("bash", "python", "yaml", "json")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[ \t]*\n(?P<code>.*?)^(?P=indent)```[ \t]*$",
                    re.S | re.M)
_MARKER = re.compile(r"<!--\s*doc-test:\s*(?P<body>.*?)-->", re.S)


@dataclass
class Block:
    """One fenced code block of a page and its markers."""

    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    skip: Optional[str] = None  # "category: why"
    skip_lines: list = field(default_factory=list)  # [(regex, "category: why")]
    subs: list = field(default_factory=list)  # [(old, new)]
    file: Optional[str] = None
    run: list = field(default_factory=list)
    setup: list = field(default_factory=list)
    pending: Optional[str] = None

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"

    def prepared(self, text: str) -> str:
        for old, new in self.subs:
            if old not in text:
                raise ValueError(f"{self.where}: doc-test sub: {old!r} is not in the block")
            text = text.replace(old, new)
        return text


def read_blocks(page: Path) -> list:
    """Every fenced block of ``page`` in order, with the markers just above it."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        indent = match.group("indent")
        code = "\n".join(row[len(indent):] if row.startswith(indent) else row
                         for row in match.group("code").splitlines()) + "\n"
        block = Block(page, line, match.group("lang").lower(), code)
        for marker in _markers_before(text, match.start()):
            _apply_marker(block, marker)
        blocks.append(block)
    return blocks


def _markers_before(text: str, start: int) -> list:
    """The doc-test comments between the previous paragraph (or block) and the fence at ``start``."""
    before = text[:start]
    markers: list = []
    while True:
        stripped = before.rstrip()
        if not stripped.endswith("-->"):
            return markers
        opening = stripped.rfind("<!--")
        match = _MARKER.fullmatch(stripped[opening:])
        if opening < 0 or match is None:
            return markers
        markers.insert(0, match.group("body"))
        before = stripped[:opening]


def _apply_marker(block: Block, body: str) -> None:
    match = re.match(r"\s*(?P<keyword>\S+)[ \t]*(?P<rest>.*)", body, re.S)
    keyword, rest = match.group("keyword"), match.group("rest")
    rest = rest.strip("\n") if keyword == "setup" else rest.strip()
    if keyword == "skip":
        _check_category(block, rest)
        block.skip = rest
    elif keyword == "skip-lines":
        match = re.fullmatch(r"/(?P<regex>.+?)/\s+(?P<why>.+)", rest, re.S)
        if match is None:
            raise ValueError(f"{block.where}: doc-test skip-lines needs /REGEX/ CATEGORY: why, got {rest!r}")
        _check_category(block, match.group("why"))
        block.skip_lines.append((re.compile(match.group("regex")), match.group("why")))
    elif keyword == "sub":
        old, arrow, new = rest.partition(" => ")
        if not arrow:
            raise ValueError(f"{block.where}: doc-test sub needs 'OLD => NEW', got {rest!r}")
        block.subs.append((old, new))
    elif keyword == "file":
        block.file = rest
    elif keyword == "run":
        block.run.append(rest)
    elif keyword == "setup":
        block.setup.append(textwrap.dedent(rest) + "\n")
    elif keyword == "pending":
        block.pending = rest
    else:
        raise ValueError(f"{block.where}: unknown doc-test marker {keyword!r}")


def _check_category(block: Block, why: str) -> None:
    category = why.split(":", 1)[0].strip()
    if category not in SKIP_CATEGORIES or ":" not in why:
        raise ValueError(f"{block.where}: a doc-test skip says 'CATEGORY: why' with CATEGORY one of "
                         f"{', '.join(SKIP_CATEGORIES)}; got {why!r}")


def command_lines(code: str) -> list:
    """The commands of a bash block: continuation lines joined, comments and blank lines dropped."""
    joined, current = [], ""
    for row in code.splitlines():
        current += row[:-1] + " " if row.rstrip().endswith("\\") else row
        if not row.rstrip().endswith("\\"):
            if current.strip() and not current.lstrip().startswith("#"):
                joined.append(current)
            current = ""
    return joined
