"""Verification trial lists: which pairs of utterances a verifier scores, and whether each is a target.

A trial file has one trial per line, ``label enrol test kind``: ``label`` 1 (same speaker, a target trial)
or 0; ``enrol`` and ``test`` utterance ids of a manifest; ``kind`` ``target``, ``same_engine`` (a non-target
pair of two voices of one speech engine, the harder kind) or ``cross_engine``. A VoxCeleb-style list (three
columns) reads too, its non-targets as kind ``nontarget``.

:func:`make_trials` pairs every utterance with ``targets_per_utt`` utterances of its speaker and
``nontargets_per_utt`` of other speakers (of its engine and of other engines in equal numbers when the
manifest has an ``engine`` field), each pair once. Utterances cut from the same recordings (connected digit
strings sharing a take, say) can be kept apart with ``source_key``: a trial between them would score a
recording against itself.

Example:
    >>> rows = {f"u{i}": {"spk": "ab"[i % 2], "engine": "x"} for i in range(6)}
    >>> trials = make_trials(rows, targets_per_utt=1, nontargets_per_utt=1, seed=0)
    >>> sorted({t.kind for t in trials})
    ['same_engine', 'target']
"""
from __future__ import annotations

import os
import random
from typing import NamedTuple, Optional

from speechkit.atomic_files import atomic_write
from speechkit.errors import DataError

KINDS = ("target", "same_engine", "cross_engine", "nontarget")


class Trial(NamedTuple):
    label: int
    enrol: str
    test: str
    kind: str


def make_trials(rows: dict, targets_per_utt: int = 2, nontargets_per_utt: int = 4, seed: int = 0,
                source_key: Optional[str] = None) -> list:
    """Trials over the utterances of ``rows`` (``{id: {"spk": ..., "engine": ... (optional)}}``).

    Each pair appears once (in either order); speakers with a single utterance give no target trial. With
    ``source_key``, every row names the recordings it is made of in that field (a space-separated string or
    a list) and two rows sharing one are never paired.

    Raises:
        DataError: a row without ``spk`` (or without ``source_key``), fewer than two speakers.
    """
    rng = random.Random(seed)
    sources = _sources(rows, source_key) if source_key else None
    by_speaker: dict = {}
    for utt_id in sorted(rows):
        row = rows[utt_id]
        if "spk" not in row:
            raise DataError(f"item {utt_id!r} has no 'spk' field (the speaker)")
        by_speaker.setdefault(str(row["spk"]), []).append(utt_id)
    if len(by_speaker) < 2:
        raise DataError(f"trials need two speakers or more; the manifest has {len(by_speaker)}")
    engine = {utt_id: str(rows[utt_id].get("engine", "")) for utt_id in rows}
    speaker = {utt_id: spk for spk, ids in by_speaker.items() for utt_id in ids}
    seen, trials = set(), []

    def apart(first: str, second: str) -> bool:
        return sources is None or sources[first].isdisjoint(sources[second])

    def add(first: str, second: str, label: int, kind: str) -> None:
        key = (min(first, second), max(first, second))
        if first != second and key not in seen:
            seen.add(key)
            trials.append(Trial(label, first, second, kind))

    for utt_id in sorted(rows):
        own = [u for u in by_speaker[speaker[utt_id]] if u != utt_id and apart(utt_id, u)]
        for other in rng.sample(own, min(targets_per_utt, len(own))):
            add(utt_id, other, 1, "target")
        others = [u for u in speaker if speaker[u] != speaker[utt_id] and apart(utt_id, u)]
        if any(engine.values()):
            same = [u for u in others if engine[u] == engine[utt_id]]
            cross = [u for u in others if engine[u] != engine[utt_id]]
            half = nontargets_per_utt // 2 if same and cross else nontargets_per_utt
            for pool, kind, count in ((same, "same_engine", half),
                                      (cross, "cross_engine", nontargets_per_utt - half if same else half)):
                for other in rng.sample(pool, min(count, len(pool))):
                    add(utt_id, other, 0, kind)
        else:
            for other in rng.sample(others, min(nontargets_per_utt, len(others))):
                add(utt_id, other, 0, "nontarget")
    return trials


def _sources(rows: dict, key: str) -> dict:
    """``{id: frozenset of source names}`` from each row's ``key`` (space-separated or a list)."""
    out = {}
    for utt_id, row in rows.items():
        value = row.get(key)
        names = value.split() if isinstance(value, str) else value
        if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) for n in names):
            raise DataError(f"item {utt_id!r}: {key!r} must name the recordings it is made of (a space-"
                            f"separated string or a list of names), got {value!r}")
        out[utt_id] = frozenset(names)
    return out


def write_trials(trials: list, path: str) -> str:
    """Write ``trials`` to ``path`` (through a temporary file); returns the path."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_write(path) as handle:
        for trial in trials:
            handle.write(f"{trial.label} {trial.enrol} {trial.test} {trial.kind}\n")
    return path


def read_trials(path: str, known_ids=None) -> list:
    """The trials of a file written by :func:`write_trials` (or a three-column VoxCeleb list).

    Raises:
        DataError: naming the file and line of a malformed trial, or of an id not in ``known_ids``.
    """
    trials = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) not in (3, 4) or fields[0] not in ("0", "1"):
                raise DataError(f"{path}, line {number}: expected 'label enrol test [kind]' with label 0 "
                                f"or 1, got {line.strip()!r}")
            label = int(fields[0])
            kind = fields[3] if len(fields) == 4 else ("target" if label else "nontarget")
            if kind not in KINDS or (kind == "target") != (label == 1):
                raise DataError(f"{path}, line {number}: kind {kind!r} does not fit label {label}")
            for utt_id in fields[1:3]:
                if known_ids is not None and utt_id not in known_ids:
                    raise DataError(f"{path}, line {number}: utterance {utt_id!r} is not in the manifest")
            trials.append(Trial(label, fields[1], fields[2], kind))
    if not trials:
        raise DataError(f"{path}: no trials")
    return trials
