"""The speech recognition template, copied with `speechkit new-recipe`, runs from its new folder; LM-only
fine-tuning leaves every other weight bit-identical; test hypotheses do not depend on batching."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

import speechkit
from speechkit.augment import generator_for
from speechkit.checkpoints import Checkpointer
from speechkit.cli import main as speechkit_main
from speechkit.data.manifest import load_manifest
from speechkit.data.trim import trim_splits_once
from speechkit.errors import HparamsError
from speechkit.pretrained import EncoderASR
from speechkit.templating import copy_template, templates_root
from tests.helpers.scripts import load_script
from tests.recipes.recipe_helpers import TINY_MODEL, run_script, write_corpus

pytestmark = pytest.mark.slow  # each test starts recipe processes (a few seconds each)


#: The LM step's flags for the tiny model (it reads the ASR model's entries as asr_model.*).
LM_MODEL = [f"--asr_{flag[2:]}" if flag.startswith("--model.") else flag for flag in TINY_MODEL]


@pytest.fixture(scope="module")
def trained_copy(tiny_corpus, tmp_path_factory) -> Path:
    """The template copied to a new folder and its three steps run as the demo runs them: tokenizer, LM, then
    the ASR model for two tiny epochs of two batches (joint CTC/attention, so every module of the model has
    weights worth checking), its test set decoded by CTC beam search with the LM and the lexicon."""
    dest = copy_template("speech_recognition", tmp_path_factory.mktemp("recipe") / "my_asr")
    run_script(dest / "Tokenizer" / "train.py",
               ["hparams/tokenizer.yaml", "--data_folder", str(tiny_corpus), "--token_type", "char",
                "--vocab_size", "40"])
    run_script(dest / "LM" / "train.py",
               ["hparams/lm.yaml", "--data_folder", str(tiny_corpus), *LM_MODEL, "--debug",
                "--noprogressbar"])
    run_script(dest / "ASR" / "train.py",
               ["hparams/train.yaml", "--data_folder", str(tiny_corpus), *TINY_MODEL, "--debug",
                "--noprogressbar", "--ctc_weight", "0.5", "--number_of_epochs", "2"])
    return dest


def _best_checkpoint(save_folder: Path, key: str = "WER"):
    best = Checkpointer(save_folder).find_checkpoint(min_key=key)
    assert best is not None, f"no checkpoint with {key} in {save_folder}"
    return best.path


def test_copied_template_trains_and_reports_wer(trained_copy, tiny_corpus):
    assert (trained_copy / "Tokenizer" / "results" / "tokenizer" / "tokenizer.model").is_file()
    results = trained_copy / "ASR" / "results" / "asr" / "1234"
    report = (results / "wer_test.txt").read_text()
    assert "WER" in report and "utt-test-" in report
    log = (results / "train_log.txt").read_text()
    assert "stage: test" in log or "test" in log
    names = {p.name for p in _best_checkpoint(results / "save").iterdir()}
    assert {"encoder.ckpt", "ctc_head.ckpt", "decoder.ckpt", "lm.ckpt"} <= names
    # Every split was read through a trimmed manifest: segments inside the original files.
    for split in ("train", "valid", "test"):
        rows = load_manifest(results / "manifests" / "trim_margin-0.1" / f"{split}.json", file_fields=())
        whole = load_manifest(tiny_corpus / f"{split}.json", file_fields=())
        assert rows.keys() == whole.keys()
        for data_id, row in rows.items():
            assert row["wav"]["file"] == whole[data_id]["wav"]
            assert 0 < row["duration"] <= whole[data_id]["duration"]


def test_copied_lm_step_writes_weights_the_asr_model_loads(trained_copy):
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
    return load_script(folder / "train.py", f"asr_train_{abs(hash(folder))}", search_path=folder)


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
    # No checkpoint in save_folder: the freshly initialized model decodes. Unlike a model trained for two
    # batches (all blanks), it emits tokens everywhere, so any padding leak would change some hypothesis.
    # The LM of the copy's LM step shapes the beam search.
    hparams["lm_checkpoint"] = str(trained_copy / "LM" / "results" / "lm" / "lm.ckpt")
    brain = recipe.build_brain(hparams, {"noprogressbar": True}, manifests)
    datasets = recipe.dataio_prepare(hparams, manifests, brain.tokenizer)
    assert hparams["decoding"] == "ctc_beam" and hparams["lm_weight"] > 0 and brain.lexicon is not None
    for search in ("greedy", "ctc_beam"):
        brain.hparams.decoding = search
        runs = {}
        for name, kwargs in {"batch 1": {"batch_size": 1}, "batch 8": {"batch_size": 8},
                             "dynamic": {"dynamic_batching": {"max_batch_length": 3.0}}}.items():
            brain.evaluate(datasets["test"], min_key="WER", test_loader_kwargs=kwargs)
            runs[name] = dict(brain.hypotheses)
        assert len(runs["batch 1"]) == 12
        assert runs["batch 1"] == runs["batch 8"] == runs["dynamic"], search
        # Empty hypotheses would make the comparison vacuous.
        assert all(runs["batch 1"].values()) if search == "greedy" else any(runs["batch 1"].values())


def test_trim_splits_must_name_existing_splits(trained_copy, tiny_corpus, tmp_path):
    manifests = {s: str(tiny_corpus / f"{s}.json") for s in ("train", "valid", "test")}
    assert trim_splits_once(manifests, ["dev"], str(tmp_path), margin=None) == manifests
    with pytest.raises(HparamsError, match=r"trim_splits: no split 'dev' \(the splits are"):
        trim_splits_once(manifests, ["train", "dev"], str(tmp_path), margin=0.1)


def test_template_lives_in_the_repository():
    folder = templates_root() / "speech_recognition"
    for step in ("Tokenizer", "LM", "ASR"):
        assert (folder / step / "train.py").is_file()
        assert (folder / step / "prepare.py").is_file()
    for name in ("ASR.yaml", "train.yaml", "finetune.yaml"):
        assert (folder / "ASR" / "hparams" / name).is_file()
    for name in ("train.yaml", "finetune.yaml"):
        assert "!include:ASR.yaml" in (folder / "ASR" / "hparams" / name).read_text()


def _tiny_inference_yaml(asr: Path, name: str) -> Path:
    """hparams/<name> with the sizes of TINY_MODEL (the model folder's YAML holds the sizes at its top)."""
    sizes = {flag[8:]: value for flag, value in zip(TINY_MODEL[::2], TINY_MODEL[1::2])}
    lines = (asr / "hparams" / name).read_text().splitlines()
    resized = [f"{line.split(':')[0]}: {sizes[line.split(':')[0]]}" if line.split(":")[0] in sizes else line
               for line in lines]
    path = asr / "hparams" / f"tiny_{name}"
    path.write_text("\n".join(resized) + "\n")
    return path


def test_copied_template_exports_a_model_that_transcribes(trained_copy, tiny_corpus):
    asr = trained_copy / "ASR"
    # inference.yaml holds the sizes at its top (it becomes a self-contained hyperparams.yaml): resize them.
    tiny_inference = _tiny_inference_yaml(asr, "inference.yaml")
    model = asr / "results" / "model"
    tokenizer = trained_copy / "Tokenizer" / "results" / "tokenizer" / "tokenizer.model"
    assert speechkit_main(["export", "--checkpoints", str(asr / "results" / "asr" / "1234" / "save"),
                           "--hparams", str(tiny_inference), "--min-key", "WER",
                           "--output", str(model), "--file", f"tokenizer={tokenizer}"]) == 0
    recognizer = EncoderASR.from_hparams(str(model), savedir=trained_copy / "fetched")
    audio = tiny_corpus / "test" / "utt-test-000.flac"
    text = recognizer.transcribe_file(str(audio))
    assert isinstance(text, str)
    assert recognizer.trim_silence == {"margin": 0.1, "threshold_db": -40.0}  # trained on trimmed audio
    # The exported LM is the recipe's: the beam search of the model folder uses the trained weights.
    best = _best_checkpoint(asr / "results" / "asr" / "1234" / "save")
    trained_lm = torch.load(best / "lm.ckpt", weights_only=True)
    for key, value in recognizer.mods["lm"].state_dict().items():
        assert torch.equal(value.cpu(), trained_lm[key]), key


def test_the_documented_export_command_takes_the_runs_sizes(trained_copy, tiny_corpus, capsys):
    """inference.yaml as shipped (the template's sizes) exports a model trained with other sizes: export
    reads them from the run's hyperparams.yaml, and the model card says which changed."""
    asr = trained_copy / "ASR"
    model = asr / "results" / "model-own-sizes"
    tokenizer = trained_copy / "Tokenizer" / "results" / "tokenizer" / "tokenizer.model"
    assert speechkit_main(["export", "--checkpoints", str(asr / "results" / "asr" / "1234" / "save"),
                           "--hparams", str(asr / "hparams" / "inference.yaml"), "--min-key", "WER",
                           "--output", str(model), "--file", f"tokenizer={tokenizer}"]) == 0
    assert "d_model 256 -> 32" in (model / "README.md").read_text()
    assert yaml.safe_load((model / "hyperparams.yaml").read_text().split("\ninterface:")[0])["d_model"] == 32
    recognizer = EncoderASR.from_hparams(str(model), savedir=trained_copy / "fetched-own-sizes")
    assert isinstance(recognizer.transcribe_file(str(tiny_corpus / "test" / "utt-test-000.flac")), str)
    capsys.readouterr()
    kept = ["export", "--checkpoints", str(asr / "results" / "asr" / "1234" / "save"), "--hparams",
            str(asr / "hparams" / "inference.yaml"), "--min-key", "WER", "--output",
            str(asr / "results" / "model-kept"), "--file", f"tokenizer={tokenizer}", "--run-hparams", "none"]
    assert speechkit_main(kept) != 0 and "does not load back" in capsys.readouterr().err  # sizes kept: no fit


def test_the_training_vocabulary_goes_into_a_model_folder_that_decodes_with_it(trained_copy, tiny_corpus):
    """train.py writes its training transcripts' words (closed_vocabulary), and inference_vocabulary.yaml
    exports a model folder whose beam search spells only them, as the test search did."""
    asr = trained_copy / "ASR"
    run = asr / "results" / "asr" / "1234"
    words = (run / "vocabulary.txt").read_text().split()
    normalize = speechkit.load_hparams(asr / "hparams" / "ASR.yaml")["text_normalizer"]
    rows = json.loads((tiny_corpus / "train.json").read_text()).values()
    assert words == sorted({word for row in rows for word in normalize(row["text"]).split()})
    model = asr / "results" / "model-vocabulary"
    tokenizer = trained_copy / "Tokenizer" / "results" / "tokenizer" / "tokenizer.model"
    assert speechkit_main(["export", "--checkpoints", str(run / "save"), "--min-key", "WER", "--hparams",
                           str(asr / "hparams" / "inference_vocabulary.yaml"), "--output", str(model),
                           "--file", f"tokenizer={tokenizer}",
                           "--file", f"vocabulary={run / 'vocabulary.txt'}"]) == 0
    recognizer = EncoderASR.from_hparams(str(model), savedir=trained_copy / "fetched-vocabulary")
    assert recognizer.hparams["vocabulary"].words == tuple(words)
    assert recognizer.hparams["decoder"].options["lexicon"] is not None
    text = recognizer.transcribe_file(str(tiny_corpus / "test" / "utt-test-000.flac"))
    assert set(text.split()) <= set(words)


def test_a_model_trained_without_the_lm_exports_without_it(trained_copy, tiny_corpus, capsys):
    """--lm_weight 0 and no LM file: the LM stays at its initial weights, so inference.yaml (which ships the
    LM with lm_weight 1.0) is refused and inference_no_lm.yaml exports a recognizer."""
    asr = trained_copy / "ASR"
    output = asr / "results" / "no_lm"
    run_script(asr / "train.py", ["hparams/train.yaml", "--data_folder", str(tiny_corpus), *TINY_MODEL,
                                  "--debug", "--noprogressbar", "--lm_weight", "0", "--lm_checkpoint", "none",
                                  "--output_folder", str(output)])
    tokenizer = trained_copy / "Tokenizer" / "results" / "tokenizer" / "tokenizer.model"
    export = ["export", "--checkpoints", str(output / "save"), "--min-key", "WER", "--file",
              f"tokenizer={tokenizer}"]
    capsys.readouterr()
    code = speechkit_main([*export, "--hparams", str(_tiny_inference_yaml(asr, "inference.yaml")), "--output",
                           str(output / "model_with_lm")])
    assert code == 1 and "'lm' was frozen and never trained or loaded" in capsys.readouterr().err
    assert not (output / "model_with_lm").exists()
    assert speechkit_main([*export, "--hparams", str(_tiny_inference_yaml(asr, "inference_no_lm.yaml")),
                           "--output", str(output / "model")]) == 0
    recognizer = EncoderASR.from_hparams(str(output / "model"), savedir=output / "fetched")
    assert "lm" not in recognizer.mods and not (output / "model" / "lm.safetensors").exists()
    assert isinstance(recognizer.transcribe_file(str(tiny_corpus / "test" / "utt-test-000.flac")), str)


def test_missing_lm_weights_stop_the_run_before_training(trained_copy, tiny_corpus):
    asr = trained_copy / "ASR"
    missing = trained_copy / "LM" / "results" / "no_such_lm.ckpt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "train.py", "hparams/train.yaml", "--data_folder", str(tiny_corpus), *TINY_MODEL,
         "--output_folder", str(asr / "results" / "missing_lm"), "--lm_checkpoint", str(missing),
         "--noprogressbar"], cwd=asr, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert str(missing) in done.stderr and "--lm_weight 0" in done.stderr
    assert not (asr / "results" / "missing_lm" / "save").exists()  # nothing was trained


def test_a_corpus_of_another_size_is_used_with_a_warning(tmp_path, caplog):
    prepare = load_script(templates_root() / "speech_recognition" / "ASR" / "prepare.py", "asr_prepare_size")
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.json").write_text("{}")
    settings = {"num_train": 800, "num_valid": 100, "num_test": 150}
    (tmp_path / "corpus.json").write_text(json.dumps({"settings": settings}))
    with caplog.at_level("WARNING"):
        manifests = prepare.prepare_data(str(tmp_path), corpus_size="demo")
    assert manifests["train"] == str(tmp_path / "train.json")
    assert caplog.text == ""  # the size asked for: silent
    with caplog.at_level("WARNING"):
        prepare.prepare_data(str(tmp_path), corpus_size="medium")
    assert "800/100/150" in caplog.text and "'medium' size (20000/500/800)" in caplog.text


def test_waveform_augmentation_trains_from_the_yaml(trained_copy, tiny_corpus):
    """train.yaml's waveform_augmentation (an Augmenter of speechkit.augment by default) trains with draws
    fixed by the seed, the epoch and the ids: two runs give the same weights, and null trains other ones."""
    asr = trained_copy / "ASR"
    yaml_text = (asr / "hparams" / "train.yaml").read_text()
    assert "augmentation_preset: default" in yaml_text and "waveform_augmentations:" in yaml_text
    weights = []
    for run, extra in (("a", []), ("b", []), ("none", ["--waveform_augmentation", "null"])):
        run_script(asr / "train.py", ["hparams/train.yaml", "--data_folder", str(tiny_corpus), *TINY_MODEL,
                                      "--debug", "--noprogressbar", "--lm_weight", "0", "--output_folder",
                                      f"results/augmented-{run}", *extra])
        best = Checkpointer(asr / "results" / f"augmented-{run}" / "save").find_checkpoint()
        weights.append(torch.load(best.path / "encoder.ckpt", weights_only=True))
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert not all(torch.equal(weights[0][k], weights[2][k]) for k in weights[0])


def test_test_only_scores_the_held_out_engine_split(trained_copy, tiny_corpus, tmp_path):
    """A corpus built with --held-out-engine has test_engine.json; `--test_only --test_set test_engine`
    scores it with the trained model into wer_test_engine.txt (trimmed like the other splits)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for item in tiny_corpus.iterdir():
        (corpus / item.name).symlink_to(item)
    test = json.loads((tiny_corpus / "test.json").read_text())
    (corpus / "test_engine.json").write_text(json.dumps(dict(list(test.items())[:5])))
    asr = trained_copy / "ASR"
    run_script(asr / "train.py", ["hparams/train.yaml", "--data_folder", str(corpus), *TINY_MODEL,
                                  "--noprogressbar", "--ctc_weight", "0.5", "--number_of_epochs", "2",
                                  "--test_only", "--test_set", "test_engine"])
    results = asr / "results" / "asr" / "1234"
    report = (results / "wer_test_engine.txt").read_text()
    assert report.count("utt-test-") == 5
    assert (results / "manifests" / "trim_margin-0.1" / "test_engine.json").is_file()


def _test_only(asr: Path, tiny_corpus: Path, output: Path, launcher: list) -> str:
    """Score the test set with the freshly initialized model (same seed in both runs; no checkpoint in the
    new output folder): it emits tokens everywhere, so every utterance has its own hypothesis and edits."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    done = subprocess.run([*launcher, "train.py", "hparams/train.yaml", "--data_folder", str(tiny_corpus),
                           *TINY_MODEL, "--noprogressbar", "--test_only", "--output_folder", str(output)],
                          cwd=asr, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return (output / "wer_test.txt").read_text()


def test_wer_file_under_ddp_equals_the_single_process_file(trained_copy, tiny_corpus, tmp_path):
    asr = trained_copy / "ASR"
    single = _test_only(asr, tiny_corpus, tmp_path / "one", [sys.executable])
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    double = _test_only(asr, tiny_corpus, tmp_path / "two", torchrun)
    assert "Scored 12 sentences, 0 not present in hyp." in single  # every test item, once
    assert "Text normalised before scoring: unicode NFKC; numbers as written; upper case;" in single
    assert sum(line.startswith("utt-test-") for line in single.splitlines()) == 12
    assert double == single


def test_characters_the_tokenizer_cannot_spell_stop_the_run(trained_copy, tmp_path):
    """A corpus with a character outside the copy's tokenizer: refused before training, naming it; allowed
    with a policy."""
    corpus = write_corpus(tmp_path / "corpus", counts=(6, 2, 2))
    rows = json.loads((corpus / "valid.json").read_text())
    first = sorted(rows)[0]
    rows[first]["text"] = "CAFÉ " + rows[first]["text"]
    (corpus / "valid.json").write_text(json.dumps(rows))
    args = ["hparams/train.yaml", "--data_folder", str(corpus), *TINY_MODEL, "--noprogressbar", "--debug",
            "--number_of_epochs", "1", "--output_folder", str(tmp_path / "out"), "--lm_weight", "0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "train.py", *args], cwd=trained_copy / "ASR", env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "valid: 1 characters outside the alphabet, 1 occurrences in 1 of 2 utterances" in done.stderr
    assert f"'É' (U+00C9 LATIN CAPITAL LETTER E WITH ACUTE): 1 times, e.g. {first}" in done.stderr
    assert not (tmp_path / "out" / "save").exists() or not any((tmp_path / "out" / "save").iterdir())
    run_script(trained_copy / "ASR" / "train.py",
               [*args[:-4], "--output_folder", str(tmp_path / "dropped"), "--lm_weight", "0",
                "--model.unknown_characters", "drop_utterance"])


def test_template_normalizer_maps_the_built_in_corpus_to_itself_and_inference_agrees():
    import random

    from speechkit.corpus.text import make_sentences, vocabulary

    folder = templates_root() / "speech_recognition" / "ASR" / "hparams"
    normalize = speechkit.load_hparams(folder / "ASR.yaml")["text_normalizer"]
    sentences = make_sentences(500, random.Random(0))
    assert [normalize(sentence) for sentence in sentences] == sentences
    assert [normalize(word) for word in vocabulary()] == vocabulary()
    assert normalize("Nine, ten!") == "NINE TEN"
    for model_folder_yaml in ("inference.yaml", "inference_no_lm.yaml", "inference_streaming.yaml"):
        exported = speechkit.load_hparams(folder / model_folder_yaml)["text_normalizer"]
        assert repr(exported) == repr(normalize), model_folder_yaml


def test_the_telephone_and_real_voices_presets_add_to_the_default_augmentations(tmp_path):
    template = Path(__file__).resolve().parents[2] / "templates" / "speech_recognition" / "ASR" / "hparams"
    presets = {}
    for preset in ("default", "telephone", "real_voices"):
        hparams = speechkit.load_hparams(template / "train.yaml", {
            "augmentation_preset": preset, "output_folder": str(tmp_path / preset)})
        presets[preset] = hparams["waveform_augmentation"]
    default, telephone = presets["default"], presets["telephone"]
    names = lambda augmenter: [type(a).__name__ for a in augmenter.augmentations]
    assert names(default) == ["SpeedPerturb", "Equalizer", "AddNoise"]
    assert default.probabilities == [1.0, 0.5, 0.3]
    assert names(telephone) == names(default) + ["BandLimit"] and telephone.probabilities[-1] == 0.5
    assert telephone.augmentations[-1].high_hz == (3300.0, 4000.0)
    real_voices = presets["real_voices"]
    assert names(real_voices) == ["SpeedPerturb", "TimeStretch", "Equalizer", "AddNoise", "BandLimit"]
    assert real_voices.probabilities == [1.0, 0.5, 0.5, 0.3, 0.5]
    assert real_voices.augmentations[1].rate_range == (0.55, 1.0)  # slower only: people read slower
    assert real_voices.augmentations[-1].high_hz == (3300.0, 4000.0)
    wave = 0.1 * torch.randn(16000, generator=torch.Generator().manual_seed(0))
    lengths = [real_voices.augment(wave, generator_for(seed)).shape[-1] for seed in range(24)]
    assert min(lengths) >= 16000 / 1.1 - 1  # nothing faster than the speed perturbation's 1.1
    assert max(lengths) > 16000 * 1.25  # slowed down beyond what the speed perturbation's 0.9 gives
