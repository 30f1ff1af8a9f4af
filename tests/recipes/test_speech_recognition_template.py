"""The speech recognition template, copied with `speechkit new-recipe`, runs from its new folder; LM-only
fine-tuning leaves every other weight bit-identical; test hypotheses do not depend on batching."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import yaml

import speechkit
from speechkit.checkpoints import Checkpointer
from speechkit.templating import copy_template, templates_root
from tests.recipes.recipe_helpers import TINY_MODEL, run_script

pytestmark = pytest.mark.slow  # each test starts recipe processes (a few seconds each)


@pytest.fixture(scope="module")
def trained_copy(tiny_corpus, tmp_path_factory) -> Path:
    """The template copied to a new folder, its tokenizer trained, its ASR trained for two tiny epochs of two
    batches (joint CTC/attention, so every module of the model has weights worth checking)."""
    dest = copy_template("speech_recognition", tmp_path_factory.mktemp("recipe") / "my_asr")
    run_script(dest / "Tokenizer" / "train.py",
               ["hparams/tokenizer.yaml", "--data_folder", str(tiny_corpus), "--token_type", "char",
                "--vocab_size", "40"])
    run_script(dest / "ASR" / "train.py",
               ["hparams/train.yaml", "--data_folder", str(tiny_corpus), *TINY_MODEL, "--debug",
                "--noprogressbar", "--ctc_weight", "0.5", "--number_of_epochs", "2"])
    return dest


def _best_checkpoint(save_folder: Path, key: str = "WER"):
    best = Checkpointer(save_folder).find_checkpoint(min_key=key)
    assert best is not None, f"no checkpoint with {key} in {save_folder}"
    return best.path


def test_copied_template_trains_and_reports_wer(trained_copy):
    assert (trained_copy / "Tokenizer" / "results" / "tokenizer" / "tokenizer.model").is_file()
    results = trained_copy / "ASR" / "results" / "asr" / "1234"
    report = (results / "wer_test.txt").read_text()
    assert "WER" in report and "utt-test-" in report
    log = (results / "train_log.txt").read_text()
    assert "stage: test" in log or "test" in log
    names = {p.name for p in _best_checkpoint(results / "save").iterdir()}
    assert {"encoder.ckpt", "ctc_head.ckpt", "decoder.ckpt", "lm.ckpt"} <= names


def test_copied_lm_step_writes_weights_the_asr_model_loads(trained_copy, tiny_corpus):
    lm_args = [f"--asr_{flag[2:]}" if flag.startswith("--model.") else flag for flag in TINY_MODEL]
    run_script(trained_copy / "LM" / "train.py",
               ["hparams/lm.yaml", "--data_folder", str(tiny_corpus), *lm_args, "--debug", "--noprogressbar"])
    weights = torch.load(trained_copy / "LM" / "results" / "lm" / "lm.ckpt", weights_only=True)
    sizes = {flag[8:]: yaml.safe_load(value) for flag, value in zip(TINY_MODEL[::2], TINY_MODEL[1::2])}
    model = speechkit.load_hparams(trained_copy / "ASR" / "hparams" / "ASR.yaml", sizes)
    model["lm"].load_state_dict(weights)  # strict: the LM step and the ASR model agree on the architecture


def test_lm_only_finetuning_keeps_every_other_weight(trained_copy, tiny_corpus):
    asr = trained_copy / "ASR"
    pretrained = _best_checkpoint(asr / "results" / "asr" / "1234" / "save")
    run_script(asr / "finetune.py",
               ["hparams/finetune.yaml", "--data_folder", str(tiny_corpus), *TINY_MODEL, "--noprogressbar",
                "--number_of_epochs", "2", "--lr", "0.01"])
    tuned = _best_checkpoint(asr / "results" / "asr_finetune" / "1234" / "save")
    for name in ("encoder", "ctc_head", "decoder"):
        before = torch.load(pretrained / f"{name}.ckpt", weights_only=True)
        after = torch.load(tuned / f"{name}.ckpt", weights_only=True)
        assert before.keys() == after.keys()
        for key in before:
            assert torch.equal(before[key], after[key]), f"{name}.{key} changed while frozen"
    lm_before = torch.load(pretrained / "lm.ckpt", weights_only=True)
    lm_after = torch.load(tuned / "lm.ckpt", weights_only=True)
    changed = [key for key in lm_before if not torch.equal(lm_before[key], lm_after[key])]
    assert changed, "the LM did not learn"


def _load_train_module(folder: Path):
    """Import a copy's ASR/train.py under a unique name (its folder goes on sys.path for prepare.py)."""
    spec = importlib.util.spec_from_file_location(f"asr_train_{abs(hash(folder))}", folder / "train.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
    return module


def test_test_hypotheses_identical_for_batch_size_1_8_and_dynamic(trained_copy, tiny_corpus):
    asr = trained_copy / "ASR"
    recipe = _load_train_module(asr)
    overrides = {"data_folder": str(tiny_corpus), "output_folder": str(asr / "results" / "invariance")}
    pairs = zip(TINY_MODEL[::2], TINY_MODEL[1::2])
    overrides.update({flag[2:]: yaml.safe_load(value) for flag, value in pairs})
    overrides["model.tokenizer_file"] = str(trained_copy / "Tokenizer/results/tokenizer/tokenizer.model")
    hparams = speechkit.load_hparams(asr / "hparams" / "train.yaml", overrides)
    Path(hparams["output_folder"]).mkdir(parents=True)
    manifests = {s: str(tiny_corpus / f"{s}.json") for s in ("train", "valid", "test")}
    tokenizer = recipe.load_tokenizer(hparams, manifests["train"])
    datasets = recipe.dataio_prepare(hparams, manifests, tokenizer)
    # No checkpoint in save_folder: the freshly initialized model decodes. Unlike a model trained for two
    # batches (all blanks), it emits tokens everywhere, so any padding leak would change some hypothesis.
    brain = recipe.build_brain(hparams, {"noprogressbar": True})
    brain.tokenizer = tokenizer
    runs = {}
    for name, kwargs in {"batch 1": {"batch_size": 1}, "batch 8": {"batch_size": 8},
                         "dynamic": {"dynamic_batching": {"max_batch_length": 3.0}}}.items():
        brain.evaluate(datasets["test"], min_key="WER", test_loader_kwargs=kwargs)
        runs[name] = dict(brain.hypotheses)
    assert len(runs["batch 1"]) == 12
    assert runs["batch 1"] == runs["batch 8"] == runs["dynamic"]
    assert all(runs["batch 1"].values()), "empty hypotheses would make this comparison vacuous"


def test_template_lives_in_the_repository():
    folder = templates_root() / "speech_recognition"
    for step in ("Tokenizer", "LM", "ASR"):
        assert (folder / step / "train.py").is_file()
        assert (folder / step / "prepare.py").is_file()
    for name in ("ASR.yaml", "train.yaml", "finetune.yaml"):
        assert (folder / "ASR" / "hparams" / name).is_file()
    for name in ("train.yaml", "finetune.yaml"):
        assert "!include:ASR.yaml" in (folder / "ASR" / "hparams" / name).read_text()
