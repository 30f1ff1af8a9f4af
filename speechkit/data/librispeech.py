"""Manifests for a corpus in the LibriSpeech layout (what ``speechkit prepare-librispeech`` writes).

Layout::

    DATA/train-clean-100/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac
    DATA/train-clean-100/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt   # "<utt id> WORDS ..." per line

Every split becomes ``SAVE/<split>.json``: ``{id: {"wav", "duration", "spk", "chapter", "text"}}``, the same
fields as the built-in corpus, so recipes read either. Durations come from FLAC headers. When the splits
prepared include a ``train-*``, a ``dev-*`` and a ``test-*`` folder, ``SAVE/train.json``, ``valid.json`` and
``test.json`` are written too (every ``train-*``; ``dev-clean`` and ``test-clean`` when prepared, else every
``dev-*``/``test-*``): the names the templates read. ``speechkit data import librispeech`` writes those
alone, with ``speaker``, rate and channels (docs/data.md, "Bring your own data").

Example::

    speechkit prepare-librispeech /corpora/LibriSpeech --dest manifests --splits train-clean-100 dev-clean

or, in a recipe (once, on the main process)::

    prepare_librispeech("/corpora/LibriSpeech", "manifests", ["dev-clean"], placeholder="data_root")
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Optional

from speechkit.data.manifest import is_regular_file, read_durations, write_json_manifest
from speechkit.errors import ManifestError

TRANSCRIPT_SUFFIX = ".trans.txt"


def find_splits(data_folder: str) -> list:
    """The sub-folders of ``data_folder`` that hold at least one ``*.trans.txt`` two levels down."""
    splits = []
    for name in sorted(os.listdir(data_folder)):
        split_folder = os.path.join(data_folder, name)
        if os.path.isdir(split_folder) and _transcripts(split_folder):
            splits.append(name)
    return splits


def _transcripts(split_folder: str) -> list:
    found = []
    for speaker in sorted(os.listdir(split_folder)):
        speaker_folder = os.path.join(split_folder, speaker)
        if not os.path.isdir(speaker_folder):
            continue
        for chapter in sorted(os.listdir(speaker_folder)):
            chapter_folder = os.path.join(speaker_folder, chapter)
            if not os.path.isdir(chapter_folder):
                continue
            found.extend(path for path in (os.path.join(chapter_folder, name)
                                           for name in sorted(os.listdir(chapter_folder))
                                           if name.endswith(TRANSCRIPT_SUFFIX))
                         if is_regular_file(path))  # a FIFO would block the read for ever
    return found


def template_groups(splits: Sequence[str]) -> dict:
    """``{"train": [...], "valid": [...], "test": [...]}``: the LibriSpeech split folders behind each of the
    templates' names (every ``train-*``; ``dev-clean``/``test-clean`` when present, else every
    ``dev-*``/``test-*``); a name without folders gets ``[]``."""
    def pick(prefix: str, preferred: str) -> list:
        return [preferred] if preferred in splits else [s for s in splits if s.startswith(prefix)]

    return {"train": [s for s in splits if s.startswith("train")], "valid": pick("dev", "dev-clean"),
            "test": pick("test", "test-clean")}


def write_template_manifests(written: dict, save_folder: str) -> dict:
    """Merge the prepared split manifests into ``train.json``, ``valid.json``, ``test.json`` (when every one
    of the three has a split folder and none of the folders is itself named so); returns ``{name: path}``."""
    import json

    groups = template_groups(sorted(written))
    if not all(groups.values()) or set(written) & set(groups):
        return {}
    out = {}
    for name, splits in groups.items():
        rows: dict = {}
        for split in splits:
            with open(written[split], encoding="utf-8") as handle:
                rows.update(json.load(handle))
        out[name] = os.path.join(save_folder, f"{name}.json")
        write_json_manifest(rows, out[name])
    return out


def read_split(split_folder: str, *, ext: str = "flac") -> dict:
    """Rows ``{id: {"wav": absolute path, "spk", "chapter", "text"}}`` of one split (no durations yet).

    Raises:
        ManifestError: a malformed transcript line, an id given twice, a transcript line whose audio file is
            missing, or an audio file without a transcript line (each names the file and line).
    """
    rows: dict = {}
    origin: dict = {}
    transcripts = _transcripts(split_folder)
    if not transcripts:
        raise ManifestError(f"no <speaker>/<chapter>/*{TRANSCRIPT_SUFFIX} files under {split_folder}")
    suffix = "." + ext.lstrip(".")
    for transcript in transcripts:
        chapter_folder = os.path.dirname(transcript)
        chapter = os.path.basename(chapter_folder)
        speaker = os.path.basename(os.path.dirname(chapter_folder))
        with open(transcript, encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, start=1):
                line = line.strip()
                if not line:
                    continue
                parts = line.split(maxsplit=1)
                if len(parts) != 2:
                    raise ManifestError(f"{transcript}, line {line_number}: expected '<utterance id> "
                                        f"<words>', got {line!r}")
                data_id, text = parts
                where = f"{transcript}, line {line_number}"
                if data_id in rows:
                    raise ManifestError(f"{where}: duplicate id {data_id!r} (first in {origin[data_id]})")
                wav = os.path.join(chapter_folder, data_id + suffix)
                if not os.path.lexists(wav):
                    raise ManifestError(f"{where}: id {data_id!r} has no audio file {wav}")
                if not is_regular_file(wav):  # a FIFO, socket or device: skipped, named in the log
                    continue
                rows[data_id] = {"wav": wav, "spk": speaker, "chapter": chapter, "text": text}
                origin[data_id] = where
        for name in sorted(os.listdir(chapter_folder)):
            if name.endswith(suffix) and name[: -len(suffix)] not in rows \
                    and is_regular_file(os.path.join(chapter_folder, name), warn=False):
                raise ManifestError(f"{os.path.join(chapter_folder, name)} has no line in {transcript}")
    return rows


def prepare_librispeech(data_folder: str, save_folder: str, splits: Optional[Sequence[str]] = None, *,
                        placeholder: Optional[str] = None, num_workers: int = 1, ext: str = "flac",
                        skip_if_exists: bool = True,
                        progress: Optional[Callable[[int, int], None]] = None) -> dict:
    """Write ``save_folder/<split>.json`` for each split of a LibriSpeech-layout ``data_folder``.

    Arguments:
        splits: split folder names (default: every folder that has transcripts).
        placeholder: write ``$placeholder/<split>/...`` paths (load with ``replacements={placeholder:
            data_folder}``) instead of absolute ones.
        num_workers: processes reading durations from file headers.
        skip_if_exists: leave manifests that already exist untouched (so recipes can call this every run).
        progress: called as ``progress(done, total)`` after each file's header, over every split written.

    Returns:
        ``{split: manifest path}``.
    """
    data_folder = os.path.abspath(data_folder)
    if not os.path.isdir(data_folder):
        raise ManifestError(f"LibriSpeech folder not found: {data_folder}")
    available = find_splits(data_folder)
    splits = list(splits) if splits else available
    if not splits:
        raise ManifestError(f"{data_folder} holds no split with <speaker>/<chapter>/*{TRANSCRIPT_SUFFIX} "
                            "files")
    written: dict = {}
    todo = []  # (destination, rows): every split's transcripts first, so the total of files is known
    for split in splits:
        destination = os.path.join(save_folder, f"{split}.json")
        written[split] = destination
        if skip_if_exists and os.path.isfile(destination):
            continue
        split_folder = os.path.join(data_folder, split)
        if not os.path.isdir(split_folder):
            raise ManifestError(f"split {split!r} not found in {data_folder} (found: {', '.join(available)})")
        todo.append((destination, read_split(split_folder, ext=ext)))
    total, done = sum(len(rows) for _, rows in todo), 0
    for destination, rows in todo:
        counted = None if progress is None else (lambda n, _, before=done: progress(before + n, total))
        durations = read_durations((row["wav"] for row in rows.values()), num_workers=num_workers,
                                   progress=counted)
        done += len(rows)
        manifest = {}
        for data_id, row in rows.items():
            wav = row["wav"]
            if placeholder:
                wav = f"${placeholder}/" + os.path.relpath(wav, data_folder).replace(os.sep, "/")
            duration = round(durations[row["wav"]][0], 6)
            manifest[data_id] = {"wav": wav, "duration": duration, "spk": row["spk"],
                                 "chapter": row["chapter"], "text": row["text"]}
        write_json_manifest(manifest, destination)
    return {**written, **write_template_manifests(written, save_folder)}
