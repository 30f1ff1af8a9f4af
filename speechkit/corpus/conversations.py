"""Conversations for diarization: utterances of 2-4 speakers taking turns, with pauses and some overlap, and
the reference RTTM of who spoke when.

Each conversation draws its number of speakers, then turns: the next speaker is any other participant, the
gap before a turn is a pause (``pause_range`` seconds) or, with probability ``overlap_probability``, an
overlap (the turn starts up to ``max_overlap`` of the previous turn's length before it ends). With the
defaults about 10% of the speech time is overlapped (12 conversations of the built-in corpus: 10-11%); each
conversation's measured share is in the manifest. Speech of each utterance (edge silence trimmed by
level) makes the turns, so the reference marks speech, not the corpus' leading and trailing silence.

Writes ``<output>/<id>.wav`` (16-bit mono), ``<output>/<id>.rttm``, ``<output>/all.rttm`` and
``<output>/conversations.json`` ({id: {"wav", "rttm", "duration", "speakers", "overlap"}}).

Example:
    >>> rows = load_speaker_rows("data/train.json", "data")
    >>> write_conversations(rows, "data/conversations", count=2, speakers_range=(2, 2), seed=1)
    'data/conversations/conversations.json'
    >>> sorted(os.listdir("data/conversations"))
    ['all.rttm', 'conversation-0000.rttm', 'conversation-0000.wav', 'conversation-0001.rttm',
    'conversation-0001.wav', 'conversations.json']
"""
from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence

import numpy as np
import soundfile

from speechkit.atomic_files import atomic_write
from speechkit.corpus.speakers import speaker_rows
from speechkit.errors import DataError


def load_speaker_rows(manifest: str, data_root: str) -> dict:
    """A corpus manifest's rows with identities (``spk``), ``$data_root`` replaced in ``wav``."""
    with open(manifest, encoding="utf-8") as handle:
        rows = json.load(handle)
    rows = speaker_rows(rows)
    for row in rows.values():
        row["wav"] = str(row["wav"]).replace("$data_root", data_root)
    return rows


def _speech(wave: np.ndarray, rate: int, margin_db: float = 35.0) -> np.ndarray:
    """``wave`` without its leading and trailing frames more than ``margin_db`` below its loudest."""
    hop = rate // 100
    frames = len(wave) // hop
    if frames == 0:
        return wave
    levels = 10 * np.log10((wave[: frames * hop].reshape(frames, hop) ** 2).mean(1) + 1e-12)
    loud = np.flatnonzero(levels > levels.max() - margin_db)
    return wave[loud[0] * hop:(loud[-1] + 1) * hop]


def make_conversation(rows: dict, speakers: Sequence[str], turns: int, rng: random.Random,
                      pause_range=(0.2, 1.0), overlap_probability: float = 0.3, max_overlap: float = 0.5,
                      rate: int = 16000) -> tuple:
    """``(wave (time,) float32, segments [(start, end, speaker)])`` of one conversation among ``speakers``."""
    by_speaker: dict = {}
    for utt_id in sorted(rows):
        by_speaker.setdefault(rows[utt_id]["spk"], []).append(utt_id)
    placed, cursor, previous, last_length = [], 0.0, None, 0.0
    for index in range(turns):
        speaker = rng.choice([s for s in speakers if s != previous] or list(speakers))
        wave, found = soundfile.read(rows[rng.choice(by_speaker[speaker])]["wav"], dtype="float32")
        if found != rate:
            raise DataError(f"conversation audio must be {rate} Hz, got {found} Hz")
        wave = _speech(wave if wave.ndim == 1 else wave.mean(1), rate)
        if index == 0:
            start = rng.uniform(*pause_range)
        elif rng.random() < overlap_probability:
            start = cursor - rng.uniform(0.05, max_overlap) * last_length
        else:
            start = cursor + rng.uniform(*pause_range)
        start = max(0.0, start)
        placed.append((start, wave, speaker))
        cursor = max(cursor, start + len(wave) / rate)
        previous, last_length = speaker, len(wave) / rate
    total = int((cursor + rng.uniform(*pause_range)) * rate) + 1
    mix = np.zeros(total, dtype=np.float32)
    segments = []
    for start, wave, speaker in placed:
        first = int(round(start * rate))
        mix[first:first + len(wave)] += wave
        segments.append((first / rate, (first + len(wave)) / rate, speaker))
    peak = float(np.abs(mix).max())
    if peak > 0.99:
        mix *= 0.99 / peak
    return mix, segments


def overlap_share(segments: Sequence[tuple], resolution: float = 0.01) -> float:
    """Share of the speech time (any speaker) where two speakers or more talk."""
    end = max(e for _, e, _ in segments)
    count = np.zeros(int(end / resolution) + 1)
    for start, stop, _ in segments:
        count[int(start / resolution):int(stop / resolution)] += 1
    speech = (count > 0).sum()
    return float((count > 1).sum() / speech) if speech else 0.0


def write_conversations(rows: dict, output: str, count: int, speakers_range=(2, 3), turns_range=(6, 12),
                        overlap_probability: float = 0.3, max_overlap: float = 0.5, seed: int = 0) -> str:
    """Write ``count`` conversations from ``rows`` (identities in ``spk``, readable ``wav``) to ``output``;
    returns the manifest's path."""
    from speechkit.data.rttm import format_rttm

    low, high = speakers_range
    available = sorted({row["spk"] for row in rows.values()})
    if not 1 <= low <= high or high > len(available):
        raise DataError(f"speakers_range {speakers_range} does not fit the {len(available)} speakers "
                        "available")
    if not 0.0 <= overlap_probability <= 1.0 or not 0.0 < max_overlap < 1.0:
        raise DataError("need 0 <= overlap_probability <= 1 and 0 < max_overlap < 1")
    rng = random.Random(seed)
    os.makedirs(output, exist_ok=True)
    manifest, all_lines = {}, []
    for index in range(count):
        conversation_id = f"conversation-{index:04d}"
        speakers = rng.sample(available, rng.randint(low, high))
        wave, segments = make_conversation(rows, speakers, rng.randint(*turns_range), rng,
                                           overlap_probability=overlap_probability, max_overlap=max_overlap)
        wav_path = os.path.join(output, f"{conversation_id}.wav")
        soundfile.write(wav_path, wave, 16000, subtype="PCM_16")
        lines = format_rttm(conversation_id, segments)
        with open(os.path.join(output, f"{conversation_id}.rttm"), "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
        all_lines += lines
        manifest[conversation_id] = {"wav": os.path.abspath(wav_path),
                                     "rttm": os.path.abspath(os.path.join(output, f"{conversation_id}.rttm")),
                                     "duration": round(len(wave) / 16000, 3), "speakers": len(speakers),
                                     "overlap": round(overlap_share(segments), 4)}
    with open(os.path.join(output, "all.rttm"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(all_lines) + "\n")
    path = os.path.join(output, "conversations.json")
    with atomic_write(path) as handle:
        json.dump(manifest, handle, indent=1)
    return path


def read_conversations(folder: str) -> list:
    """``[(conversation id, wave (time,) float32, reference turns), ...]`` of a folder
    :func:`write_conversations` wrote (its ``conversations.json``)."""
    from speechkit.data.rttm import read_rttm

    with open(os.path.join(folder, "conversations.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    out = []
    for conversation_id, entry in manifest.items():
        wave, _ = soundfile.read(entry["wav"], dtype="float32")
        out.append((conversation_id, wave, read_rttm(entry["rttm"])[conversation_id]))
    return out
