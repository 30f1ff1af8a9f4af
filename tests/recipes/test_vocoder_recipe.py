"""recipes/SynthSpeech/vocoder: training runs on a small corpus, logs the STFT distances, writes the test
report (vocoder and Griffin-Lim per utterance), and a rerun resumes instead of training again."""
from __future__ import annotations

from pathlib import Path

from tests.recipes.recipe_helpers import run_script, write_corpus

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "SynthSpeech" / "vocoder"


def test_vocoder_recipe_trains_reports_and_resumes(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", counts=(8, 2, 3))
    output = tmp_path / "out"
    args = ["hparams/train.yaml", "--data_folder", str(corpus), "--output_folder", str(output),
            "--preset", "tiny", "--number_of_epochs", "1", "--valid_utterances", "2",
            "--test_utterances", "3", "--segment_seconds", "0.2", "--noprogressbar"]
    run_script(RECIPE / "train.py", args, timeout=300)
    log = (output / "train_log.txt").read_text()
    assert "epoch: 1 | stage: valid" in log and "spectral_convergence" in log and "stage: test" in log
    report = (output / "vocoder_test.txt").read_text().splitlines()
    assert report[0].split("\t") == ["id", "vocoder_sc", "vocoder_logmag", "griffin_lim_sc",
                                     "griffin_lim_logmag"]
    assert len(report) == 4 and all(len(line.split("\t")) == 5 for line in report)
    run_script(RECIPE / "train.py", args, timeout=300)  # resumes: no second training epoch
    assert (output / "train_log.txt").read_text().count("stage: train") == 1
