"""CSV, TSV and JSON Lines tables naming audio files, with configurable columns.

A row needs the audio path (column ``--path-column``, default ``path``); the transcript (``--text-column``,
default ``text``), the speaker (``--speaker-column``, default ``speaker``) and the id (``--id-column``,
default: the file name without extension) are used when present. Paths are relative to ``--audio-root``
(default: the folder holding the table) and may not leave it. ``SRC`` is one table (split by speaker) or a
folder holding ``train``, ``valid`` (or ``dev``) and ``test`` tables of one format.

Example::

    speechkit data import csv metadata.csv --dest data/mine --path-column file --text-column transcription
"""
from __future__ import annotations

import csv
import json
import os
from typing import Any, Optional

from speechkit.data.importers.base import DOCS, Utterance, is_regular_file, resolve_inside
from speechkit.errors import ManifestError

EXTENSIONS = (".csv", ".tsv", ".jsonl")
SPLIT_NAMES = {"train": "train", "valid": "valid", "dev": "valid", "test": "test"}


def _records(path: str):
    """Yield ``(line, {column: value})`` per row of a CSV, TSV or JSON Lines file."""
    with open(path, encoding="utf-8-sig", newline="") as handle:
        if path.endswith(".jsonl"):
            for line, content in enumerate(handle, start=1):
                if not content.strip():
                    continue
                try:
                    record = json.loads(content)
                except json.JSONDecodeError as error:
                    raise ManifestError(f"{path}, line {line}: malformed JSON: {error.msg}") from None
                if not isinstance(record, dict):
                    raise ManifestError(f"{path}, line {line}: expected a JSON object, got "
                                        f"{type(record).__name__}")
                yield line, {key: "" if value is None else str(value) for key, value in record.items()}
            return
        reader = csv.reader(handle, delimiter="\t" if path.endswith(".tsv") else ",", strict=True)
        try:
            header = [name.strip() for name in next(reader)]
        except StopIteration:
            raise ManifestError(f"{path}: empty file (no header line)") from None
        except csv.Error as error:
            raise ManifestError(f"{path}, line 1: malformed header ({error})") from None
        while True:
            line = reader.line_num + 1
            try:
                values = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                raise ManifestError(f"{path}, line {line}: malformed record ({error})") from None
            if not values or all(not value.strip() for value in values):
                continue
            if len(values) != len(header):
                raise ManifestError(f"{path}, line {line}: expected {len(header)} fields "
                                    f"({', '.join(header)}), got {len(values)}")
            yield line, dict(zip(header, values))


def read_table(path: str, split: Optional[str], audio_root: str, path_column: str = "path",
               text_column: str = "text", speaker_column: str = "speaker",
               id_column: Optional[str] = None) -> list:
    """The utterances of one table."""
    utterances = []
    for line, record in _records(path):
        where = f"{path}, line {line}"
        if path_column not in record:
            raise ManifestError(f"{where}: no column {path_column!r} (columns: {', '.join(record)}); choose "
                                f"it with --path-column ({DOCS})")
        relative = record[path_column].strip()
        if id_column:
            if id_column not in record:
                raise ManifestError(f"{where}: no column {id_column!r} (columns: {', '.join(record)})")
            data_id = record[id_column].strip()
        else:
            data_id = os.path.splitext(os.path.basename(relative))[0]
        if not data_id:
            raise ManifestError(f"{where}: empty id")
        wav = resolve_inside(audio_root, relative, where)
        if not is_regular_file(wav, data_id, where):
            continue
        text = record.get(text_column)
        speaker = record.get(speaker_column)
        utterances.append(Utterance(data_id, wav, text=None if text is None else text.strip(),
                                    speaker=None if speaker is None else speaker.strip(), split=split,
                                    where=where))
    return utterances


def read(source: str, *, audio_root: Optional[str] = None, path_column: str = "path",
         text_column: str = "text", speaker_column: str = "speaker", id_column: Optional[str] = None,
         **_: Any) -> list:
    """Every utterance of the table ``source`` or of the split tables in the folder ``source``."""
    columns = {"path_column": path_column, "text_column": text_column, "speaker_column": speaker_column,
               "id_column": id_column}
    if os.path.isfile(source):
        if not source.endswith(EXTENSIONS):
            raise ManifestError(f"{source}: expected a .csv, .tsv or .jsonl file")
        return read_table(source, None, audio_root or os.path.dirname(os.path.abspath(source)), **columns)
    tables = {}
    for name in sorted(os.listdir(source)):
        stem, ext = os.path.splitext(name)
        if ext in EXTENSIONS and stem.lower() in SPLIT_NAMES:
            split = SPLIT_NAMES[stem.lower()]
            if split in tables:
                raise ManifestError(f"{source}: two tables for the {split} split: {tables[split]} and {name}")
            tables[split] = name
    if set(tables) != {"train", "valid", "test"}:
        raise ManifestError(f"{source}: expected train, valid (or dev) and test tables (.csv, .tsv or "
                            f".jsonl), found {sorted(tables.values()) or 'none'}; or give one table as SRC "
                            f"({DOCS})")
    root = audio_root or source
    return [u for split, name in tables.items()
            for u in read_table(os.path.join(source, name), split, root, **columns)]
