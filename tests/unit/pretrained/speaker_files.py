"""A small random speaker model and three tone recordings, for the speaker tests (library, embed, verify)."""
from __future__ import annotations

import numpy as np
import pytest
import soundfile

from tests.helpers.job_models import write_speaker_model


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_speaker_model(tmp_path_factory.mktemp("speaker") / "model")


@pytest.fixture(scope="module")
def audio(tmp_path_factory):
    root = tmp_path_factory.mktemp("audio")
    rng = np.random.default_rng(0)
    paths = []
    for index, (seconds, rate) in enumerate(((1.3, 16000), (0.7, 16000), (1.0, 8000))):
        t = np.arange(int(seconds * rate)) / rate
        wave = 0.3 * np.sin(2 * np.pi * (140 + 60 * index) * t) + 0.02 * rng.standard_normal(t.size)
        path = root / f"utt{index}.flac"
        soundfile.write(path, wave.astype(np.float32), rate)
        paths.append(path)
    return paths
