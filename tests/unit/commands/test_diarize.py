"""``speechkit diarize``: a trained voice activity detector from ``--vad``."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from speechkit.diarization import FrameVAD, TrainedVAD, energy_vad

RATE = 16000


def bursts(seed: int, seconds: float = 3.0) -> tuple:
    """Harmonic bursts (a voice-like comb of partials, pitch 100-250 Hz) between silences:
    ``(wave, turns)``."""
    rng = np.random.default_rng(seed)
    wave, turns, at = np.zeros(int(seconds * RATE), dtype=np.float32), [], float(rng.uniform(0.1, 0.4))
    while at < seconds - 0.4:
        length = float(rng.uniform(0.25, 0.6))
        t = np.arange(int(length * RATE)) / RATE
        pitch = rng.uniform(100, 250)
        burst = sum(np.sin(2 * math.pi * k * pitch * t) / k for k in range(1, 12))
        start = int(at * RATE)
        wave[start:start + len(t)] = 0.2 * burst * np.hanning(len(t)) ** 0.2
        turns.append((at, at + length, "s"))
        at += length + float(rng.uniform(0.3, 0.6))
    return wave, turns


@pytest.mark.slow  # a speaker model and two diarizations through the command (about 10 s)
def test_speechkit_diarize_takes_a_trained_detector(tmp_path, capsys):
    """``--vad WEIGHTS``: the turns written lie inside the speech that detector finds; a missing or foreign
    weight file is named."""
    import soundfile

    from speechkit.cli import main
    from speechkit.data.rttm import read_rttm
    from tests.helpers import job_models

    folder = job_models.write_speaker_model(tmp_path / "spk")
    torch.manual_seed(3)
    vad = TrainedVAD(FrameVAD())  # random weights: speech somewhere else than the energy detector finds it
    wave = bursts(4, seconds=4.0)[0]
    with torch.no_grad():  # centre its logits on this recording, so that about half of it is "speech"
        logits = torch.logit(torch.from_numpy(vad.probabilities(torch.from_numpy(wave))).double())
        vad.model.output.bias -= float(logits.median())
    vad.save(tmp_path / "vad.safetensors")
    soundfile.write(tmp_path / "talk.wav", wave, RATE)
    speech = vad(torch.from_numpy(wave), RATE)
    assert speech and speech != energy_vad(torch.from_numpy(wave), RATE)
    assert main(["diarize", str(tmp_path / "talk.wav"), "--model", str(folder), "--rttm",
                 str(tmp_path / "out.rttm"), "--vad", str(tmp_path / "vad.safetensors")]) == 0
    turns = read_rttm(str(tmp_path / "out.rttm"))["talk"]
    inside = [any(s - 1e-3 <= start and end <= e + 1e-3 for s, e in speech) for start, end, _ in turns]
    assert turns and all(inside)
    for bad, words in (("missing.safetensors", "no weight file"), ("spk/embedding_model.safetensors",
                                                                    "holds no FrameVAD weights")):
        assert main(["diarize", str(tmp_path / "talk.wav"), "--model", str(folder), "--rttm",
                     str(tmp_path / "x.rttm"), "--vad", str(tmp_path / bad)]) != 0
        assert words in capsys.readouterr().err and not (tmp_path / "x.rttm").exists()
