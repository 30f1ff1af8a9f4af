"""``speechkit diarize``: a trained voice activity detector from ``--vad``, an overlapped-speech detector
from ``--overlap``."""
from __future__ import annotations

import pytest
import torch

from speechkit.diarization import FrameVAD, TrainedVAD, energy_vad
from tests.unit.diarization.voice_bursts import RATE, bursts


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


@pytest.mark.slow  # a speaker model and a diarization through the command (about 10 s)
def test_speechkit_diarize_gives_overlapped_speech_a_second_speaker(tmp_path, capsys):
    """``--overlap WEIGHTS``: two speakers talk at once only inside the segments that detector finds, and
    there they do; a missing weight file is named."""
    import numpy as np
    import soundfile

    from speechkit.cli import main
    from speechkit.data.rttm import read_rttm
    from speechkit.diarization import OverlapDetector
    from speechkit.diarization.trained_vad import overlap_frames, reference_frames
    from tests.helpers import job_models

    folder = job_models.write_speaker_model(tmp_path / "spk")
    torch.manual_seed(5)
    detector = OverlapDetector(FrameVAD())  # random weights, centred so that part of the speech "overlaps"
    wave = bursts(6, seconds=6.0)[0]
    with torch.no_grad():
        logits = torch.logit(torch.from_numpy(detector.probabilities(torch.from_numpy(wave))).double())
        detector.model.output.bias -= float(logits.quantile(0.7))
    detector.save(tmp_path / "overlap.safetensors")
    soundfile.write(tmp_path / "talk.wav", wave, RATE)
    assert main(["diarize", str(tmp_path / "talk.wav"), "--model", str(folder), "--rttm",
                 str(tmp_path / "out.rttm"), "--num-speakers", "2", "--overlap",
                 str(tmp_path / "overlap.safetensors")]) == 0
    turns = read_rttm(str(tmp_path / "out.rttm"))["talk"]
    frames = int(len(wave) / 160)
    both = overlap_frames(turns, frames)
    found = reference_frames(detector(torch.from_numpy(wave), RATE), frames)
    assert both.any() and not (both & ~np.convolve(found, np.ones(3), "same").astype(bool)).any()
    assert main(["diarize", str(tmp_path / "talk.wav"), "--model", str(folder), "--rttm",
                 str(tmp_path / "x.rttm"), "--overlap", str(tmp_path / "missing.safetensors")]) != 0
    assert "--overlap: no weight file" in capsys.readouterr().err and not (tmp_path / "x.rttm").exists()


@pytest.mark.slow  # a speaker model and three diarizations through the command (about 10 s)
def test_speechkit_diarize_takes_the_scales(tmp_path, capsys):
    """``--scales`` with lengths (multi-scale, the default has two) or none (one scale); a bad length is
    named before anything is written."""
    import soundfile

    from speechkit.cli import main
    from speechkit.data.rttm import read_rttm
    from tests.helpers import job_models

    folder = job_models.write_speaker_model(tmp_path / "spk")
    soundfile.write(tmp_path / "talk.wav", bursts(4, seconds=4.0)[0], RATE)
    command = ["diarize", str(tmp_path / "talk.wav"), "--model", str(folder), "--rttm"]
    for name, scales in (("one", ["--scales"]), ("two", ["--scales", "2.0", "1.0"])):
        assert main(command + [str(tmp_path / f"{name}.rttm")] + scales) == 0
        assert read_rttm(str(tmp_path / f"{name}.rttm"))["talk"]
    assert main(command + [str(tmp_path / "bad.rttm"), "--scales", "1.5", "0"]) != 0
    assert "scales" in capsys.readouterr().err and not (tmp_path / "bad.rttm").exists()
