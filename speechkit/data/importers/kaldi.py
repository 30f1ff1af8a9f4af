"""Kaldi data directories: ``wav.scp``, ``text``, ``utt2spk`` and optionally ``segments``.

- ``wav.scp``: ``<recording id> <path>``; a piped command (``... |``, e.g. ``sph2pipe -f wav x.sph |``) is
  refused: speechkit reads audio files, and running commands named in a data file would let that file run
  anything. Convert those recordings to files first (run the commands once) and list the files.
- ``segments`` (optional): ``<utterance id> <recording id> <start> <end>`` in seconds; each utterance is
  then a segment ``{"file", "start", "stop", "unit": "seconds"}`` of its recording.
- ``text``: ``<utterance id> <words...>``; ``utt2spk``: ``<utterance id> <speaker>``.

Relative paths are taken from ``--audio-root`` (default: the data directory) and no path may leave it.
``SRC`` is one data directory (split by speaker), or a folder holding ``train``, ``dev`` (or ``valid``)
and ``test`` data directories.

Example::

    speechkit data import kaldi ~/kaldi/egs/mine/s5/data --dest data/mine --audio-root ~/kaldi/egs/mine/s5
"""
from __future__ import annotations

import os
from typing import Any, Optional

from speechkit.data.importers.base import DOCS, Utterance, is_regular_file, resolve_inside
from speechkit.errors import ManifestError

SPLIT_NAMES = {"train": "train", "valid": "valid", "dev": "valid", "test": "test"}


def read_table(path: str, columns: int, required: bool = True) -> dict:
    """``{first field: (rest, line)}`` of a Kaldi table; ``columns`` is the least number of fields."""
    if not os.path.isfile(path):
        if required:
            raise ManifestError(f"{path}: missing (a Kaldi data directory holds wav.scp, text and utt2spk; "
                                f"{DOCS})")
        return {}
    table: dict = {}
    with open(path, encoding="utf-8") as handle:
        for line, content in enumerate(handle, start=1):
            content = content.strip()
            if not content:
                continue
            parts = content.split(maxsplit=1 if columns <= 2 else columns - 1)
            if len(parts) < columns:
                raise ManifestError(f"{path}, line {line}: expected {columns} fields, got {content!r}")
            if parts[0] in table:
                raise ManifestError(f"{path}, line {line}: id {parts[0]!r} given twice (first on line "
                                    f"{table[parts[0]][1]})")
            table[parts[0]] = (parts[1:] if columns > 2 else (parts[1] if len(parts) > 1 else ""), line)
    return table


def read_directory(folder: str, split: Optional[str], audio_root: str) -> list:
    """The utterances of one Kaldi data directory."""
    scp = os.path.join(folder, "wav.scp")
    recordings = read_table(scp, 2)
    texts = read_table(os.path.join(folder, "text"), 1)
    speakers = read_table(os.path.join(folder, "utt2spk"), 2)
    segments = read_table(os.path.join(folder, "segments"), 4, required=False)
    files: dict = {}
    for recording, (command, line) in recordings.items():
        where = f"{scp}, line {line}"
        if command.rstrip().endswith("|"):
            raise ManifestError(f"{where}: recording {recording!r} is a piped command ({command!r}); "
                                "speechkit reads audio files only and never runs commands from a data file: "
                                f"run it once to write a file, and list that file ({DOCS})")
        files[recording] = (resolve_inside(audio_root, command.strip(), where), where)
    utterances = []
    ids = segments if segments else recordings
    for data_id in ids:
        if segments:
            (recording, start, end), line = segments[data_id]
            where = f"{os.path.join(folder, 'segments')}, line {line}"
            if recording not in files:
                raise ManifestError(f"{where}: recording {recording!r} of {data_id!r} is not in {scp}")
            try:
                first, last = float(start), float(end)
            except ValueError:
                raise ManifestError(f"{where}: start and end must be seconds, got {start!r} "
                                    f"{end!r}") from None
            if not 0.0 <= first < last:
                raise ManifestError(f"{where}: segment {data_id!r} needs 0 <= start < end, got {first} "
                                    f"{last}")
            path = files[recording][0]
            wav: Any = {"file": path, "start": first, "stop": last, "unit": "seconds"}
        else:
            path, where = files[data_id]
            wav = path
        if data_id not in texts:
            raise ManifestError(f"{where}: utterance {data_id!r} has no line in "
                                f"{os.path.join(folder, 'text')}")
        if data_id not in speakers:
            raise ManifestError(f"{where}: utterance {data_id!r} has no line in "
                                f"{os.path.join(folder, 'utt2spk')}")
        if not is_regular_file(path, data_id, where):
            continue
        utterances.append(Utterance(data_id, wav, text=" ".join(texts[data_id][0].split()),
                                    speaker=speakers[data_id][0].strip(), split=split, where=where))
    return utterances


def read(source: str, *, audio_root: Optional[str] = None, **_: Any) -> list:
    """Every utterance of the data directory ``source``, or of its split directories."""
    if os.path.isfile(os.path.join(source, "wav.scp")):
        return read_directory(source, None, audio_root or source)
    found = {}
    for name in sorted(os.listdir(source)):
        if name.lower() in SPLIT_NAMES and os.path.isfile(os.path.join(source, name, "wav.scp")):
            found[SPLIT_NAMES[name.lower()]] = name
    if set(found) != {"train", "valid", "test"}:
        raise ManifestError(f"{source}: no wav.scp, nor train, dev (or valid) and test data directories "
                            f"holding one (found: {sorted(found.values()) or 'none'}; {DOCS})")
    return [u for split, name in found.items()
            for u in read_directory(os.path.join(source, name), split, audio_root or source)]
