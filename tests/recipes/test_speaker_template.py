"""``speechkit new-recipe speaker_recognition DEST`` copies a speaker verification recipe that trains, scores
unseen speakers (EER, minDCF with AS-norm) and exports a model folder that ``speechkit verify`` uses."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from speechkit.cli import main as speechkit_main
from speechkit.templating import available_templates
from tests.recipes.recipe_helpers import run_script, write_speaker_corpus

pytestmark = pytest.mark.slow


def speaker_args(corpus: Path, output: Path, *extra) -> list:
    """The recipe's command line with the tiny model, short crops and one epoch."""
    return ["hparams/train.yaml", "--data_folder", str(corpus), "--corpus_size", "null", "--output_folder",
            str(output), "--preset", "tiny", "--n_mels", "24", "--number_of_epochs", "2",
            "--crop_seconds", "0.3",
            "--cohort_size", "6", "--as_norm_top_k", "3", "--margin_warmup_steps", "2",
            "--train_loader_kwargs", "{speaker_balanced: {speakers_per_batch: 2, utterances_per_speaker: 2}}",
            "--noprogressbar", *extra]


def test_copied_template_trains_reports_exports_and_verifies(tmp_path, capsys):
    assert "speaker_recognition" in available_templates()
    dest = tmp_path / "my_speaker"
    assert speechkit_main(["new-recipe", "speaker_recognition", str(dest)]) == 0
    corpus = write_speaker_corpus(tmp_path / "corpus")
    # speeds as new speakers (SpeedIdentities): the classifier learns three identities per training speaker
    speeds = ("--speed_identities", "!new:speechkit.augment.SpeedIdentities {}")
    done = run_script(dest / "train.py", speaker_args(corpus, dest / "results" / "run", *speeds), timeout=600)
    report = (dest / "results" / "run" / "verification_test.txt").read_text()
    assert "EER" in report and "minDCF(0.01)" in report and "AS-norm cohort 6" in report
    assert "EER" in done.stdout
    scores = (dest / "results" / "run" / "scores_test.txt").read_text().splitlines()
    trials = (corpus / "speaker" / "test_trials.txt").read_text().splitlines()
    assert len(scores) == len(trials) > 0
    log = (dest / "results" / "run" / "train_log.txt").read_text()
    assert "eer" in log
    newest = sorted((dest / "results" / "run" / "save").glob("CKPT+*"))[-1]
    classes = torch.load(newest / "classifier.ckpt", map_location="cpu")
    speakers = len({row["spk"] for row in json.loads((corpus / "train.json").read_text()).values()})
    # three identities per speaker (speeds), each with the template's three sub-centres
    assert max(tensor.shape[0] for tensor in classes.values() if tensor.dim() == 2) == 3 * speakers * 3
    inference = (dest / "hparams" / "inference.yaml").read_text()
    tiny = inference
    for big, small in (("n_mels: 80", "n_mels: 24"), ("[128, 128, 128, 128, 384]", "[32, 32, 32, 32, 96]"),
                       ("attention_channels: 32", "attention_channels: 16"),
                       ("se_channels: 32", "se_channels: 8"), ("lin_neurons: 128", "lin_neurons: 16")):
        tiny = tiny.replace(big, small)
    (tmp_path / "tiny_inference.yaml").write_text(tiny)
    assert speechkit_main(["export", "--checkpoints", str(dest / "results" / "run" / "save"), "--hparams",
                           str(tmp_path / "tiny_inference.yaml"), "--output",
                           str(tmp_path / "model")]) == 0
    first, second = sorted((corpus / "test").iterdir())[:2]
    capsys.readouterr()
    assert speechkit_main(["verify", str(first), str(second), "--model", str(tmp_path / "model")]) == 0
    out = capsys.readouterr().out
    assert "score" in out and ("same speaker" in out or "different speakers" in out)
