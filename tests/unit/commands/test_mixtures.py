"""``speechkit mixtures``: a mixture set from a manifest; settings out of range and unusable sources
refused, naming them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile

from speechkit.data.mixtures import write_mixtures
from speechkit.errors import DataError
from tests.unit.data.mixture_sources import speaker_tones_manifest


def test_mixtures_command(tmp_path, capsys):
    from speechkit.cli import main as speechkit_main

    manifest = speaker_tones_manifest(tmp_path, speakers=("a", "b"))
    assert speechkit_main(["mixtures", manifest, str(tmp_path / "out"), "--split", "valid", "--num-mixtures",
                           "2", "--sample-rate", "16000", "--replace", f"data_root={tmp_path}"]) == 0
    rows = json.loads((tmp_path / "out" / "valid.json").read_text())
    assert len(rows) == 2 and all(row["s1_spk"] != row["s2_spk"] for row in rows.values())
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"x1": {"wav": str(tmp_path / "a0.flac"), "duration": 1.0}}))
    assert speechkit_main(["mixtures", str(broken), str(tmp_path / "bad"), "--num-mixtures", "1"]) == 1
    assert "'x1' has no 'spk' field" in capsys.readouterr().err


@pytest.mark.parametrize("flag, value", [("--num-mixtures", "-3"), ("--num-mixtures", "0"),
                                         ("--num-speakers", "1"), ("--sample-rate", "0")])
def test_mixtures_command_refuses_settings_out_of_range(tmp_path, capsys, flag, value):
    from speechkit.cli import main as speechkit_main

    manifest = speaker_tones_manifest(tmp_path, speakers=("a", "b"), per_speaker=1)
    arguments = {"--num-mixtures": "2", flag: value}
    with pytest.raises(SystemExit) as stopped:
        speechkit_main(["mixtures", manifest, str(tmp_path / "out"), *[x for pair in arguments.items()
                                                                      for x in pair]])
    assert stopped.value.code == 2 and f"{flag}: " in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(DataError, match="num_mixtures must be a whole number >= 1, got -3"):
        write_mixtures(manifest, str(tmp_path / "out"), "test", -3, replacements={"data_root": str(tmp_path)})
    with pytest.raises(DataError, match="level_range_db must be a finite number >= 0"):
        write_mixtures(manifest, str(tmp_path / "out"), "test", 1, level_range_db=float("nan"),
                       replacements={"data_root": str(tmp_path)})
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("samples, message", [
    (np.zeros(0, np.float32), r"item 'b-0': .*b0.wav holds no samples at 8000 Hz"),
    (np.array([0.1, np.nan, 0.2, np.inf], np.float32),
     r"b0.wav: 2 sample\(s\) are NaN or infinite \(the first at sample 1\)"),
])
def test_a_source_without_samples_or_with_nan_is_refused_naming_it(tmp_path, capsys, samples, message):
    from speechkit.cli import main as speechkit_main

    manifest = speaker_tones_manifest(tmp_path, speakers=("a", "b"), per_speaker=1)
    rows = json.loads(Path(manifest).read_text())
    soundfile.write(tmp_path / "b0.wav", samples, 16000, subtype="FLOAT")
    rows["b-0"]["wav"] = "$data_root/b0.wav"
    Path(manifest).write_text(json.dumps(rows))
    assert speechkit_main(["mixtures", manifest, str(tmp_path / "out"), "--num-mixtures", "2",
                           "--replace", f"data_root={tmp_path}"]) == 1
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert not (tmp_path / "out" / "test.json").exists()
