"""recipes/LibriSpeech/ASR prepares a LibriSpeech folder tree and trains on it (a tiny fake tree here)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile

from tests.recipes.recipe_helpers import TINY_CONFORMER, WORDS, run_script

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "LibriSpeech" / "ASR"


def write_librispeech_tree(root: Path, splits=("train-clean-100", "dev-clean", "test-clean")) -> Path:
    """<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac with one .trans.txt per chapter."""
    rng = np.random.default_rng(1)
    for split_index, split in enumerate(splits):
        for speaker in (f"{100 + split_index}", f"{200 + split_index}"):
            chapter = root / split / speaker / "7"
            chapter.mkdir(parents=True)
            lines = []
            for utt in range(4 if split.startswith("train") else 3):
                utt_id = f"{speaker}-7-{utt:04d}"
                samples = int(16000 * rng.uniform(0.5, 1.2))
                wave = 0.1 * np.sin(np.arange(samples) * rng.uniform(0.02, 0.1)).astype(np.float32)
                soundfile.write(chapter / f"{utt_id}.flac", wave, 16000, subtype="PCM_16")
                lines.append(f"{utt_id} {' '.join(rng.choice(WORDS, size=2))}")
            (chapter / f"{speaker}-7.trans.txt").write_text("\n".join(lines) + "\n")
    return root


@pytest.mark.slow
def test_librispeech_recipe_prepares_and_trains(tmp_path):
    data = write_librispeech_tree(tmp_path / "LibriSpeech")
    recipe = tmp_path / "recipe"
    shutil.copytree(RECIPE, recipe)  # copies the linked scripts' content; results stay in tmp_path
    run_script(recipe / "train.py",
               ["hparams/train.yaml", "--data_folder", str(data), *TINY_CONFORMER, "--debug",
                "--noprogressbar", "--decoding", "greedy", "--ctc_weight", "0.5", "--prep_workers", "1",
                "--train_loader_kwargs.num_workers", "0", "--eval_loader_kwargs.num_workers", "0",
                # eight random training sentences miss letters the test sentences hold: score them as unknown
                "--model.unknown_characters", "unknown"])
    manifests = recipe / "results" / "manifests"
    train = json.loads((manifests / "train.json").read_text())
    assert len(train) == 8
    assert all(row["wav"].startswith("$data_root/train-clean-100/") for row in train.values())
    assert len(json.loads((manifests / "test.json").read_text())) == 6
    report = (recipe / "results" / "conformer" / "1234" / "wer_test.txt").read_text()
    assert "200-7-0000" in report or "102-7-0000" in report
