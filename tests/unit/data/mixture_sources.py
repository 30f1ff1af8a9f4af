"""A manifest of short tones, one pitch per speaker, for the mixture tests (library and command)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile


def speaker_tones_manifest(folder: Path, speakers=("a", "b", "c", "d"), per_speaker: int = 3) -> str:
    """A manifest of short 16 kHz tones, one pitch per speaker, lengths varying per utterance."""
    rng = np.random.default_rng(0)
    rows = {}
    for s, spk in enumerate(speakers):
        for u in range(per_speaker):
            n = 4000 + 800 * u + 160 * s
            t = np.arange(n) / 16000
            wave = 0.1 * np.sin(2 * np.pi * (150 + 60 * s) * t) + 0.01 * rng.standard_normal(n)
            path = folder / f"{spk}{u}.flac"
            soundfile.write(path, wave.astype(np.float32), 16000)
            rows[f"{spk}-{u}"] = {"wav": f"$data_root/{path.name}", "spk": spk, "duration": n / 16000}
    manifest = folder / "train.json"
    manifest.write_text(json.dumps(rows))
    return str(manifest)
