"""What every importer shares: safe paths under the source folder, audio headers, the speaker split and the
manifests written at the end.

An importer reads a corpus layout into :class:`Utterance` records (the audio as an absolute path, the
transcript, the speaker, the split when the layout has one) and :func:`write_import` turns them into
``DEST/train.json``, ``DEST/valid.json`` and ``DEST/test.json``::

    {"utt1": {"wav": "/abs/path/utt1.flac", "duration": 2.48, "sample_rate": 16000, "channels": 1,
              "speaker": "1034", "text": "HELLO THERE"}, ...}

**The path rule.** Audio paths are written absolute (the source folder resolved once, joined with each
row's relative path), so the manifests work from any working directory and any recipe, without
``replacements``. Moving the audio means importing again; moving the manifests needs nothing.

Example:
    >>> rows = [Utterance(f"utt{n}", os.path.abspath(f"data/utt{n}.wav"), text="HI", speaker=f"speaker{n}",
    ...                   split="train") for n in (1, 2, 3)]
    >>> write_import(rows, "data/mine", source="data", layout="folder")
    train: 3 utterances -> data/mine/train.json
    valid: 0 utterances -> data/mine/valid.json
    test: 0 utterances -> data/mine/test.json
    {'train': 'data/mine/train.json', 'valid': 'data/mine/valid.json', 'test': 'data/mine/test.json'}
"""
from __future__ import annotations

import json
import math
import os
import random
import stat
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from speechkit.atomic_files import atomic_write
from speechkit.data.manifest import write_json_manifest
from speechkit.errors import ManifestError

#: The manifests every importer writes, in this order: the names the templates read.
SPLITS = ("train", "valid", "test")
#: Extensions taken as audio when a layout is found by walking a folder (what libsndfile decodes).
AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".aiff", ".aif")
#: Where the errors point: the page that lists every layout and its rules.
DOCS = "docs/data.md#bring-your-own-data"
#: Name of the split report written next to the manifests when the importer made the split.
SPLIT_REPORT = "split.json"


@dataclass
class Utterance:
    """One row to import: ``wav`` is an absolute path (or a segment ``{"file", "start", "stop", "unit"}``);
    ``split`` is one of :data:`SPLITS` when the layout says, else ``None``; ``extra`` holds the fields of
    layouts with more than one audio file per row (``mix_wav``, ``s1_wav``...)."""

    id: str
    wav: Any
    text: Optional[str] = None
    speaker: Optional[str] = None
    split: Optional[str] = None
    where: str = ""  # file and line it came from, for error messages
    extra: dict = field(default_factory=dict)


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def resolve_inside(root: str, relative: str, where: str) -> str:
    """``root/relative`` as an absolute path; refuses a path that leaves ``root`` (``..``, or an absolute path
    elsewhere), naming ``where``. The check is on the path as written (symbolic links inside ``root`` are
    followed later, like any file)."""
    if not relative or "\x00" in relative:
        raise ManifestError(f"{where}: empty or malformed audio path {relative!r}")
    root = os.path.abspath(root)
    path = os.path.normpath(os.path.join(root, os.path.expanduser(relative)))
    if os.path.commonpath([root, path]) != root:
        raise ManifestError(f"{where}: audio path {relative!r} leaves the source folder {root}; every "
                            f"audio file must be under it (pass --audio-root to name another folder; {DOCS})")
    return path


def is_regular_file(path: str, data_id: str, where: str) -> bool:
    """True for a regular file (after symbolic links); ``False`` with a warning for a FIFO, socket, device or
    folder (reading one could block for ever); :class:`ManifestError` naming the id when nothing is there."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ManifestError(f"{where}: id {data_id!r}: audio file not found: {path}") from None
    except OSError as error:
        raise ManifestError(f"{where}: id {data_id!r}: cannot read {path}: {error}") from None
    if not stat.S_ISREG(mode):
        warn(f"{where}: id {data_id!r}: {path} is not a regular file (a FIFO, socket, device or folder); "
             "skipped")
        return False
    return True


def walk_files(root: str, suffixes: Sequence[str]) -> list:
    """Regular files under ``root`` whose lower-cased name ends with one of ``suffixes``, sorted; others with
    such names (FIFOs, sockets, devices) are skipped with a warning."""
    found = []
    for folder, subfolders, names in os.walk(root, followlinks=True):
        subfolders.sort()
        for name in sorted(names):
            if not name.lower().endswith(tuple(suffixes)):
                continue
            path = os.path.join(folder, name)
            try:
                regular = stat.S_ISREG(os.stat(path).st_mode)
            except OSError:
                regular = False  # a dangling link
            if regular:
                found.append(path)
            else:
                warn(f"{path} is not a regular file (a FIFO, socket, device or dangling link); skipped")
    return found


def header(path: str, data_id: str) -> tuple:
    """``(frames, sample_rate, channels)`` of an audio file from its header, without decoding it."""
    import soundfile

    try:
        found = soundfile.info(path)
    except Exception as error:  # libsndfile reports every failure as its own error types
        raise ManifestError(f"id {data_id!r}: cannot read audio file {path}: {error}") from None
    if found.samplerate <= 0 or found.frames < 0:
        raise ManifestError(f"id {data_id!r}: {path} has a broken header ({found.samplerate} Hz, "
                            f"{found.frames} frames)")
    return int(found.frames), int(found.samplerate), int(found.channels)


def audio_fields(wav: Any, data_id: str) -> dict:
    """``duration`` (seconds), ``sample_rate`` and ``channels`` of a row's audio (a path or a segment)."""
    path = wav["file"] if isinstance(wav, dict) else wav
    frames, rate, channels = header(path, data_id)
    duration = frames / rate
    if isinstance(wav, dict):
        start, stop = float(wav["start"]), float(wav["stop"])
        if stop > duration + 0.01:
            raise ManifestError(f"id {data_id!r}: segment {start}-{stop} s ends after the end of {path} "
                                f"({duration:.3f} s)")
        duration = min(stop, duration) - start
    return {"duration": round(duration, 6), "sample_rate": rate, "channels": channels}


def split_by_speaker(utterances: Sequence[Utterance], valid_fraction: float, test_fraction: float,
                     seed: int) -> dict:
    """Assign each speaker (all of their utterances) to train, valid or test; returns ``{split: [speakers]}``.

    Speakers are shuffled with ``seed`` and dealt to test, then valid, until each holds its fraction of the
    utterances; the rest train. With fewer than three speakers the split is by utterance instead (a warning
    says so), and speakers are shared.
    """
    for name, value in (("valid fraction", valid_fraction), ("test fraction", test_fraction)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and 0.0 <= value < 1.0):
            raise ManifestError(f"the {name} must be a number in [0, 1), got {value!r}")
    if valid_fraction + test_fraction >= 1.0:
        raise ManifestError(f"valid ({valid_fraction}) and test ({test_fraction}) fractions leave nothing to "
                            "train on")
    by_speaker: dict = {}
    for utterance in utterances:
        by_speaker.setdefault(utterance.speaker or utterance.id, []).append(utterance)
    speakers = sorted(by_speaker)
    groups = speakers if len(speakers) >= 3 else [u.id for u in utterances]
    if len(speakers) < 3:
        warn(f"only {len(speakers)} speaker(s): the split is drawn by utterance, so speakers are shared")
        by_speaker = {u.id: [u] for u in utterances}
    random.Random(seed).shuffle(groups)
    total = sum(len(by_speaker[g]) for g in groups)
    chosen: dict = {"test": [], "valid": [], "train": []}
    counts = {"test": 0, "valid": 0}
    # at least one group in a split asked for, so that a small corpus still has a valid and a test set
    targets = {"test": max(test_fraction > 0, round(total * test_fraction)),
               "valid": max(valid_fraction > 0, round(total * valid_fraction))}
    for group in groups:
        for split in ("test", "valid"):
            if counts[split] < targets[split]:
                chosen[split].append(group)
                counts[split] += len(by_speaker[group])
                break
        else:
            chosen["train"].append(group)
    for split, members in chosen.items():
        for group in members:
            for utterance in by_speaker[group]:
                utterance.split = split
    return {split: sorted(members) for split, members in chosen.items()}


def _row(utterance: Utterance, has_text: bool) -> dict:
    row: dict = {}
    if utterance.wav is not None:
        row["wav"] = utterance.wav
    row.update(utterance.extra)
    audio = utterance.wav if utterance.wav is not None else utterance.extra.get("mix_wav")
    if audio is not None:
        row.update(audio_fields(audio, utterance.id))
    row["speaker"] = "" if utterance.speaker is None else str(utterance.speaker)
    if has_text:
        row["text"] = "" if utterance.text is None else utterance.text
    return row


def write_import(utterances: Iterable[Utterance], dest: str, *, source: str, layout: str,
                 valid_fraction: float = 0.1, test_fraction: float = 0.1, seed: int = 1234,
                 has_text: bool = True, log: Callable[[str], None] = print,
                 progress: Optional[Callable[[int, int], None]] = None) -> dict:
    """Write ``dest/{train,valid,test}.json`` from ``utterances``; returns ``{split: path}``.

    Rows without a split are split by speaker (:func:`split_by_speaker`, seeded, reported in ``log`` and in
    ``dest/split.json``); a layout that gives some splits but not others is refused, as are duplicate ids.
    Headers are read for every row (rate, channels, duration); the manifests are written only once every
    row is read, so a failure leaves the destination as it was.
    """
    utterances = list(utterances)
    if not utterances:
        raise ManifestError(f"{source}: no utterances found for the {layout!r} layout ({DOCS})")
    seen: dict = {}
    for utterance in utterances:
        if utterance.id in seen:
            raise ManifestError(f"{utterance.where or source}: duplicate id {utterance.id!r} (first in "
                                f"{seen[utterance.id] or source})")
        seen[utterance.id] = utterance.where
    with_split = [u for u in utterances if u.split is not None]
    report = None
    if not with_split:
        speakers = split_by_speaker(utterances, valid_fraction, test_fraction, seed)
        report = {"layout": layout, "source": os.path.abspath(source), "seed": seed, "by": "speaker",
                  "valid_fraction": valid_fraction, "test_fraction": test_fraction,
                  "utterances": {s: sum(u.split == s for u in utterances) for s in SPLITS},
                  "speakers": speakers}
    elif len(with_split) != len(utterances):
        missing = next(u for u in utterances if u.split is None)
        raise ManifestError(f"{missing.where or source}: id {missing.id!r} belongs to no split while others "
                            "do")
    manifests: dict = {split: {} for split in SPLITS}
    for done, utterance in enumerate(utterances, start=1):
        if utterance.split not in manifests:
            raise ManifestError(f"{utterance.where or source}: unknown split {utterance.split!r}")
        manifests[utterance.split][utterance.id] = _row(utterance, has_text)
        if progress:
            progress(done, len(utterances))
    empty = [split for split in SPLITS if not manifests[split]]
    if empty:
        warn(f"{layout} import of {source}: no utterance in {', '.join(empty)} (the manifest is empty)")
    written = {}
    for split in SPLITS:
        written[split] = os.path.join(dest, f"{split}.json")
        write_json_manifest(manifests[split], written[split])
    report_path = os.path.join(dest, SPLIT_REPORT)
    if report is not None:
        with atomic_write(report_path) as handle:
            json.dump(report, handle, indent=1, ensure_ascii=False)
        counts = report["utterances"]
        log(f"{layout}: no split in the source; split by speaker with seed {seed}: "
            + ", ".join(f"{s} {counts[s]} utterances / {len(report['speakers'][s])} speakers" for s in SPLITS)
            + f" (written to {report_path})")
    elif os.path.isfile(report_path):
        os.remove(report_path)  # a report of an earlier import would describe another split
    for split in SPLITS:
        log(f"{split}: {len(manifests[split])} utterances -> {written[split]}")
    return written
