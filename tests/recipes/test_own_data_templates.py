"""The templates train on a folder written by ``speechkit data import`` as it is (no corpus built there),
refuse a folder with other or partial manifests, and stop before training on data the check finds errors
in."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from speechkit.cli import main as speechkit_main
from speechkit.errors import DataError
from speechkit.templating import copy_template, templates_root
from tests.helpers.scripts import load_script
from tests.recipes.recipe_helpers import TINY_MODEL, WORDS, run_script, separation_args
from tests.unit.data.importers import layouts

pytestmark = pytest.mark.slow  # each test starts recipe processes


def commonvoice_release(root: Path, counts=(24, 4, 8), seed: int = 0) -> Path:
    """A Common Voice-style release (clips/*.mp3, train/dev/test.tsv) of tones with transcripts of WORDS, by
    six speakers (two of them only in dev and test)."""
    rng = np.random.default_rng(seed)
    header = "client_id\tpath\tsentence\tup_votes\tdown_votes\tage\tgender\taccents\tlocale\tsegment\n"
    speakers = {"train.tsv": ["c1" * 20, "c2" * 20, "c3" * 20, "c4" * 20], "dev.tsv": ["c5" * 20],
                "test.tsv": ["c6" * 20]}
    n = 0
    for name, count in zip(("train.tsv", "dev.tsv", "test.tsv"), counts):
        lines = []
        for index in range(count):
            clip = f"common_voice_en_{2000 + n}.mp3"
            layouts.tone(root / "clips" / clip, float(rng.uniform(0.5, 1.2)), 16000, seed=n % 7, fmt="MP3")
            text = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 4))))
            lines.append(f"{speakers[name][index % len(speakers[name])]}\t{clip}\t{text}\t2\t0\t\t\t\ten\t\n")
            n += 1
        (root / name).write_text(header + "".join(lines), encoding="utf-8")
    return root


def test_speech_recognition_trains_on_an_imported_folder(tmp_path):
    release = commonvoice_release(tmp_path / "cv-corpus")
    data = tmp_path / "data" / "cv"
    assert speechkit_main(["data", "import", "commonvoice", str(release), "--dest", str(data),
                           "--no-progress"]) == 0
    dest = copy_template("speech_recognition", tmp_path / "my_asr")
    output = dest / "ASR" / "results" / "own"
    run_script(dest / "ASR" / "train.py",
               ["hparams/train.yaml", "--data_folder", str(data), *TINY_MODEL, "--debug", "--noprogressbar",
                "--lm_weight", "0", "--lm_checkpoint", "none", "--output_folder", str(output),
                "--model.tokenizer_file", str(output / "tokenizer.model")], timeout=300)
    assert sorted(p.name for p in data.iterdir()) == ["test.json", "train.json", "valid.json"]  # no corpus
    wer = (output / "wer_test.txt").read_text()
    test_ids = json.loads((data / "test.json").read_text())
    assert all(data_id in wer for data_id in test_ids)
    assert len(list((output / "data_check").glob("data_check-*.json"))) == 1


def test_speech_recognition_refuses_data_with_errors_naming_them(tmp_path):
    release = commonvoice_release(tmp_path / "cv-corpus", counts=(6, 2, 2))
    data = tmp_path / "cv"
    assert speechkit_main(["data", "import", "commonvoice", str(release), "--dest", str(data),
                           "--no-progress"]) == 0
    rows = json.loads((data / "train.json").read_text())
    first = next(iter(rows))
    rows[first]["text"] = " "
    (data / "train.json").write_text(json.dumps(rows))
    dest = copy_template("speech_recognition", tmp_path / "my_asr")
    args = ["hparams/train.yaml", "--data_folder", str(data), *TINY_MODEL, "--debug", "--noprogressbar",
            "--lm_weight", "0", "--lm_checkpoint", "none"]
    done = subprocess.run([sys.executable, "train.py", *args], cwd=dest / "ASR", capture_output=True,
                          text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode != 0
    assert f"error: empty transcript [train] 1 item(s): {first}: the text is empty" in done.stderr
    assert "--check_data False" in done.stderr


def test_a_folder_with_other_manifests_is_refused_not_built_into(tmp_path):
    prepare = load_script(templates_root() / "speech_recognition" / "ASR" / "prepare.py", "asr_prepare_own")
    folder = tmp_path / "libri"
    folder.mkdir()
    (folder / "train-clean-100.json").write_text("{}")
    with pytest.raises(DataError, match=r"holds train-clean-100.json but not train.json, valid.json, "
                                        r"test.json.*speechkit data\s+import"):
        prepare.prepare_data(str(folder), corpus_size="tiny")
    (folder / "train.json").write_text("{}")
    with pytest.raises(DataError, match=r"holds train.json, train-clean-100.json but not valid.json, "
                                        r"test.json"):
        prepare.prepare_data(str(folder), corpus_size="tiny")
    assert sorted(p.name for p in folder.iterdir()) == ["train-clean-100.json", "train.json"]


def test_separation_trains_on_imported_librimix(tmp_path):
    source = layouts.librimix(tmp_path / "Libri2Mix" / "wav8k" / "min")
    data = tmp_path / "libri2mix"
    assert speechkit_main(["data", "import", "librimix", str(source), "--dest", str(data),
                           "--no-progress"]) == 0
    dest = copy_template("separation", tmp_path / "my_separation")
    output = dest / "results" / "own"
    run_script(dest / "train.py", separation_args(data, output), timeout=600)
    assert sorted(p.name for p in data.iterdir()) == ["test.json", "train.json", "valid.json"]
    report = (output / "separation_test.txt").read_text()
    assert "1089-134686-0000_121-121726-0014" in report


def test_separation_mixes_imported_single_speaker_recordings(tmp_path):
    """A VoxCeleb-style tree (speakers in ``speaker``, not ``spk``): the template writes valid and test
    mixtures of its valid and test speakers and mixes the training speakers anew."""
    for s in range(8):
        for v in range(2):
            layouts.tone(tmp_path / "vox" / "wav" / f"id1000{s}" / "1zcIwhmdeo4" / f"{v + 1:05d}.wav", 0.8,
                         16000, seed=s * 2 + v)
    data = tmp_path / "vox-data"
    assert speechkit_main(["data", "import", "voxceleb", str(tmp_path / "vox"), "--dest", str(data),
                           "--valid-fraction", "0.25", "--test-fraction", "0.25", "--no-progress"]) == 0
    dest = copy_template("separation", tmp_path / "my_separation")
    output = dest / "results" / "own"
    mixtures_folder = str(tmp_path / "mixtures")
    args = separation_args(data, output, "--corpus_size", "null", "--mixtures_folder", mixtures_folder)
    run_script(dest / "train.py", args, timeout=600)
    test_speakers = {row["speaker"] for row in json.loads((data / "test.json").read_text()).values()}
    mixtures = json.loads((tmp_path / "mixtures" / "test.json").read_text())
    assert mixtures and all({m["s1_spk"], m["s2_spk"]} == test_speakers for m in mixtures.values())
    assert (output / "separation_test.txt").is_file()
