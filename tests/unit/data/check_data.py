"""Manifests of real audio for the data check tests (library and command): rows, splits, a clean corpus."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import soundfile

from tests.unit.data.importers.layouts import tone


def row(path: Path, text: str = "hello there", speaker: str = "a", duration: float = None) -> dict:
    info = soundfile.info(str(path))
    return {"wav": str(path), "duration": info.frames / info.samplerate if duration is None else duration,
            "speaker": speaker, "text": text}


def write(folder: Path, splits: dict) -> dict:
    paths = {}
    for split, rows in splits.items():
        paths[split] = folder / f"{split}.json"
        paths[split].write_text(json.dumps(rows))
    return {split: str(path) for split, path in paths.items()}


@pytest.fixture
def clean(tmp_path) -> dict:
    """Nine utterances by six speakers, at 16 kHz, mono, speaking at one rate: nothing to report."""
    splits = {"train": {}, "valid": {}, "test": {}}
    for n in range(9):
        split = ("train", "train", "train", "train", "train", "valid", "valid", "test", "test")[n]
        path = tone(tmp_path / f"u{n}.wav", 1.0 + 0.1 * n, 16000, seed=n)
        speaker = f"s{min(n, 5) if n < 7 else 6 + n}"
        splits[split][f"u{n}"] = row(path, "word " * (2 + n // 5), speaker=speaker)
    return write(tmp_path, splits)
