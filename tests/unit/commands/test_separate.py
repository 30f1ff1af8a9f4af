"""``speechkit separate``: inputs of one file name kept apart in the output folder."""
from __future__ import annotations

import json

import numpy as np
import soundfile

from speechkit.cli import main as speechkit_main
from speechkit.pretrained import SeparationModel
from tests.unit.jobs import audio_job_files

files = audio_job_files.files  # a shared fixture: pytest finds it under this name


def test_separate_command_keeps_files_of_one_name_apart(files, tmp_path, capsys):
    rows = json.loads(files["manifest"].read_text())
    inputs = []
    for folder, item_id in (("d1", "utt0001"), ("d2", "utt0002")):
        (tmp_path / folder).mkdir()
        wav, rate = soundfile.read(rows[item_id]["wav"], dtype="float32")
        soundfile.write(tmp_path / folder / "mix.wav", wav, rate)
        inputs.append(str(tmp_path / folder / "mix.wav"))
    out = tmp_path / "sep"
    assert speechkit_main(["separate", str(files["separator"]), *inputs, "--out", str(out)]) == 0
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.wav"))
    assert written == ["d1/mix_s1.wav", "d1/mix_s2.wav", "d2/mix_s1.wav", "d2/mix_s2.wav"]
    model = SeparationModel.from_hparams(str(files["separator"]))
    for folder, path in zip(("d1", "d2"), inputs):
        expected = model.separate_file(path)
        got, _ = soundfile.read(out / folder / "mix_s1.wav", dtype="float32")
        assert np.abs(got - expected[0].numpy() * min(1.0, 0.99 / float(expected.abs().max()))).max() < 1e-4
    capsys.readouterr()
    assert speechkit_main(["separate", str(files["separator"]), inputs[0], inputs[0], "--out", str(out)]) == 1
    assert "would both be written as mix_s1.wav" in capsys.readouterr().err
