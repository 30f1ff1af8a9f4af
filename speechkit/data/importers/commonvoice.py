"""Common Voice: ``clips/*.mp3`` (48 kHz MP3) and tab-separated ``train.tsv``, ``dev.tsv``, ``test.tsv``.

Each TSV row names its clip (``path``, relative to ``clips/``), its transcript (``sentence``) and its speaker
(``client_id``, a long hash). ``dev`` becomes ``valid``. A release with only ``validated.tsv`` (or a folder
with one other TSV) is split by speaker. The files are read without quote handling, as Common Voice writes
them (a sentence may hold a ``"``).

Example::

    speechkit data import commonvoice ~/cv-corpus-17.0/en --dest data/cv
"""
from __future__ import annotations

import csv
import os
from typing import Any

from speechkit.data.importers.base import DOCS, Utterance, is_regular_file, resolve_inside
from speechkit.errors import ManifestError

#: TSV name -> split.
SPLIT_FILES = {"train.tsv": "train", "dev.tsv": "valid", "test.tsv": "test"}
REQUIRED_COLUMNS = ("path", "sentence", "client_id")


def read_tsv(path: str, split: Any, clips: str) -> list:
    """The utterances of one Common Voice TSV (``split`` may be ``None``: split later)."""
    utterances = []
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None:
            raise ManifestError(f"{path}: empty file (expected a header with {', '.join(REQUIRED_COLUMNS)})")
        missing = [name for name in REQUIRED_COLUMNS if name not in header]
        if missing:
            raise ManifestError(f"{path}, line 1: no column {missing[0]!r} in the header {header} ({DOCS})")
        index = {name: header.index(name) for name in REQUIRED_COLUMNS}
        for values in reader:
            line = reader.line_num
            where = f"{path}, line {line}"
            if not values or values == [""]:
                continue
            if len(values) != len(header):
                raise ManifestError(f"{where}: expected {len(header)} tab-separated fields, got "
                                    f"{len(values)}")
            relative = values[index["path"]].strip()
            data_id = os.path.splitext(os.path.basename(relative))[0]
            if not data_id:
                raise ManifestError(f"{where}: empty 'path'")
            wav = resolve_inside(clips, relative, where)
            if not is_regular_file(wav, data_id, where):
                continue
            utterances.append(Utterance(data_id, wav, text=values[index["sentence"]].strip(),
                                        speaker=values[index["client_id"]].strip(), split=split, where=where))
    return utterances


def read(source: str, **_: Any) -> list:
    """Every utterance of a Common Voice folder (``source`` holds ``clips/`` and the TSVs)."""
    clips = os.path.join(source, "clips")
    if not os.path.isdir(clips):
        raise ManifestError(f"{source}: no clips/ folder (a Common Voice folder holds clips/ and train.tsv, "
                            f"dev.tsv, test.tsv; {DOCS})")
    present = [name for name in SPLIT_FILES if os.path.isfile(os.path.join(source, name))]
    if present:
        if len(present) != len(SPLIT_FILES):
            missing = sorted(set(SPLIT_FILES) - set(present))
            raise ManifestError(f"{source}: has {', '.join(present)} but not {', '.join(missing)}; give all "
                                "three, or only validated.tsv to have the split made by speaker")
        return [u for name in SPLIT_FILES
                for u in read_tsv(os.path.join(source, name), SPLIT_FILES[name], clips)]
    for name in ("validated.tsv",) + tuple(sorted(n for n in os.listdir(source) if n.endswith(".tsv"))):
        if os.path.isfile(os.path.join(source, name)):
            return read_tsv(os.path.join(source, name), None, clips)
    raise ManifestError(f"{source}: no train.tsv/dev.tsv/test.tsv nor validated.tsv ({DOCS})")
