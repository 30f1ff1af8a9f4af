"""RTTM files (NIST Rich Transcription Time Marked): one speaker turn per line.

``SPEAKER <file> <channel> <start> <duration> <NA> <NA> <speaker> <NA> <NA>``; only ``SPEAKER`` lines are
read (other types are skipped). Segments are ``(start, end, speaker)`` in seconds.

Example:
    >>> lines = format_rttm("meeting", [(0.5, 2.0, "A"), (2.1, 3.0, "B")])
    >>> lines[0]
    'SPEAKER meeting 1 0.500 1.500 <NA> <NA> A <NA> <NA>'
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence

from speechkit.atomic_files import atomic_write
from speechkit.errors import DataError


def format_rttm(file_id: str, segments: Sequence[tuple], channel: int = 1) -> list:
    """RTTM lines of one recording's ``segments``, sorted by start."""
    if not file_id or any(c.isspace() for c in file_id):
        raise DataError(f"an RTTM file id must be one word, got {file_id!r}")
    lines = []
    for start, end, speaker in sorted(segments, key=lambda s: (s[0], s[1])):
        if any(c.isspace() for c in str(speaker)) or not str(speaker):
            raise DataError(f"an RTTM speaker label must be one word, got {speaker!r}")
        lines.append(f"SPEAKER {file_id} {channel} {start:.3f} {end - start:.3f} <NA> <NA> {speaker} "
                     "<NA> <NA>")
    return lines


def write_rttm(path: str, recordings: dict) -> str:
    """Write ``{file_id: segments}`` to ``path`` (through a temporary file); returns the path."""
    lines = [line for file_id in recordings for line in format_rttm(file_id, recordings[file_id])]
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with atomic_write(path) as handle:
        handle.write("\n".join(lines) + ("\n" if lines else ""))
    return path


def read_rttm(path: str) -> dict:
    """``{file_id: [(start, end, speaker), ...]}`` of an RTTM file.

    Raises:
        DataError: naming the file and line of a malformed ``SPEAKER`` line.
    """
    recordings: dict = {}
    try:
        handle = open(path, encoding="utf-8")
    except OSError as error:
        raise DataError(f"cannot read RTTM file {path}: {error.strerror}") from None
    with handle:
        for number, line in enumerate(handle, 1):
            fields = line.split()
            if not fields or fields[0] != "SPEAKER":
                continue
            if len(fields) < 8:
                raise DataError(f"{path}, line {number}: a SPEAKER line needs 8 fields or more, got "
                                f"{len(fields)}")
            try:
                start, duration = float(fields[3]), float(fields[4])
            except ValueError:
                raise DataError(f"{path}, line {number}: start and duration must be numbers, got "
                                f"{fields[3]!r} and {fields[4]!r}") from None
            if not (math.isfinite(start) and math.isfinite(duration)) or start < 0 or duration < 0:
                raise DataError(f"{path}, line {number}: bad times (start {start}, duration {duration})")
            recordings.setdefault(fields[1], []).append((start, start + duration, fields[7]))
    return recordings
