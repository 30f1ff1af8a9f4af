"""templates/ssl_finetune: a transformers folder (any of the four families) or speechkit's own pretraining
(recipes/SynthSpeech/wav2vec2's encoder.ckpt) fine-tuned with CTC from a copy made by `speechkit new-recipe`,
frozen where it should be, its test set scored, and the run's own inference.yaml exported to a model folder
that transcribes; an encoder.ckpt of other sizes than the run's config is refused by field name."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import speechkit
from speechkit.cli import main as speechkit_main
from tests.recipes.recipe_helpers import run_script
from tests.recipes.wav2vec2_helpers import TINY_ENCODER, copy_recipe, options, pretrain_tiny

#: The fine-tuning run at a test's size (the encoder's sizes come from the folder).
TINY_RUN = ["--noprogressbar", "--number_of_epochs", "2", "--freeze_encoder_updates", "1",
            "--config.mask_channel_length", "4", "--config.mask_length", "2", "--valid_utterances", "4",
            "--train_loader_kwargs.dynamic_batching.max_batch_length", "6.0", "--beam_size", "2",
            "--corpus_size", "null"]


def published_encoder(folder: Path, family: str):
    """A small random encoder of ``family`` written as a transformers folder, as a Hub download is."""
    from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model
    from speechkit.pretrained import export_encoder

    layout = {"wavlm": dict(relative_position_buckets=16, relative_position_max_distance=40),
              "data2vec-audio": dict(pos_conv_layers=2, feature_norm="layer")}.get(family, {})
    encoder = Wav2Vec2Model(Wav2Vec2Config(conv_channels=(16,) * 7, d_model=24, num_layers=1, num_heads=2,
                                           ffn_dim=32, pos_conv_kernel=4, pos_conv_groups=2, **layout))
    export_encoder(encoder, folder, family)
    return encoder


@pytest.mark.slow
def test_a_transformers_hubert_fine_tunes_and_its_export_transcribes(tmp_path, tiny_corpus):
    recipe = tmp_path / "my_ssl"
    assert speechkit_main(["new-recipe", "ssl_finetune", str(recipe)]) == 0
    assert (recipe / "prepare.py").is_file() and not (recipe / "prepare.py").is_symlink()
    published = published_encoder(tmp_path / "hubert", "hubert")
    run_script(recipe / "train.py", ["hparams/train.yaml", "--data_folder", str(tiny_corpus),
                                     "--huggingface_encoder", str(tmp_path / "hubert"), *TINY_RUN])
    output = recipe / "results" / "ssl_finetune" / "1234"
    assert "utt-test-" in (output / "wer_test.txt").read_text()
    checkpoints = sorted((output / "save").glob("CKPT+*"))
    tuned = torch.load(checkpoints[-1] / "encoder.ckpt", weights_only=True)
    for key, tensor in published.state_dict().items():
        unchanged = torch.equal(tuned[key], tensor)
        if key.startswith("feature_encoder."):
            assert unchanged, f"the frozen feature encoder changed ({key})"
        elif key.startswith("encoder.layers.0.ffn_in"):
            assert not unchanged, f"{key}: the Transformer did not learn after freeze_encoder_updates"
    # The run's inference.yaml holds the loaded encoder's sizes: the export builds and loads it strictly.
    assert_exported_model_transcribes(recipe, output, tmp_path / "model", tiny_corpus, encoder_dim=24)


def assert_exported_model_transcribes(recipe: Path, output: Path, model: Path, corpus: Path,
                                      encoder_dim: int) -> None:
    """``speechkit export`` of the run in ``output`` (its best checkpoint, its inference.yaml with the
    encoder's sizes) makes a model folder whose EncoderASR transcribes a test file."""
    inference = (output / "inference.yaml").read_text()
    assert f"encoder_dim: {encoder_dim}" in inference and "num_layers: 1" in inference
    command = [sys.executable, "-m", "speechkit", "export", "--checkpoints", str(output / "save"),
               "--hparams", str(output / "inference.yaml"), "--min-key", "WER", "--file",
               f"tokenizer={output / 'tokenizer' / 'tokenizer.model'}", "--output", str(model)]
    done = subprocess.run(command, cwd=recipe, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    from speechkit.pretrained import EncoderASR

    asr = EncoderASR.from_hparams(model)
    text = asr.transcribe_file(corpus / "test" / "utt-test-000.flac")
    assert isinstance(text, str) and set(text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZ' ")


@pytest.mark.slow
def test_speechkits_own_pretrained_encoder_fine_tunes_from_a_new_recipe_copy(tmp_path, tiny_corpus):
    # Two updates of pretrain.py (wav2vec 2.0 objective) write the encoder.ckpt the template starts from.
    encoder_file = pretrain_tiny(copy_recipe(tmp_path / "repository"), tiny_corpus,
                                 "--optimizer_step_limit", "2", "--warmup_steps", "1")
    pretrained = torch.load(encoder_file, weights_only=True)
    recipe = tmp_path / "my_ssl"
    assert speechkit_main(["new-recipe", "ssl_finetune", str(recipe)]) == 0
    # The template's config given the pretraining's sizes, as recipes/SynthSpeech/wav2vec2 does.
    sizes = options(TINY_ENCODER)[3:]  # without the common options, which TINY_RUN has
    run_script(recipe / "train.py", ["hparams/train.yaml", "--data_folder", str(tiny_corpus),
                                     "--pretrained_encoder", str(encoder_file), *sizes, *TINY_RUN])
    output = recipe / "results" / "ssl_finetune" / "1234"
    assert "utt-test-" in (output / "wer_test.txt").read_text()
    checkpoints = sorted((output / "save").glob("CKPT+*"))
    tuned = torch.load(checkpoints[-1] / "encoder.ckpt", weights_only=True)
    assert sorted(tuned) == sorted(pretrained)
    # What the same copy would have started from without the checkpoint: its own seeded random encoder.
    changes = {f"config.{name}": value for name, value in TINY_ENCODER.items()}
    with contextlib.chdir(recipe):
        random_start = speechkit.load_hparams("hparams/train.yaml", changes)["encoder"].state_dict()
    for key, tensor in pretrained.items():
        if key.startswith("feature_encoder."):  # always frozen: the checkpoint's, bit for bit
            assert torch.equal(tuned[key], tensor), f"{key}: frozen, yet not the checkpoint's"
            assert not torch.equal(tensor, random_start[key]), f"{key}: the checkpoint's is the random start"
        elif key.startswith("encoder.layers.0.ffn_in"):
            assert not torch.equal(tuned[key], tensor), f"{key}: the Transformer did not learn"
    assert_exported_model_transcribes(recipe, output, tmp_path / "model", tiny_corpus,
                                      encoder_dim=TINY_ENCODER["d_model"])


@pytest.mark.slow
def test_an_encoder_checkpoint_of_other_sizes_is_refused_naming_the_file_and_the_config_field(
        tmp_path, tiny_corpus):
    from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model

    sizes = {name: tuple(value) if isinstance(value, list) else value for name, value in TINY_ENCODER.items()}
    encoder_file = tmp_path / "pretrained" / "encoder.ckpt"  # pretrain.py's layout: the encoder alone
    encoder_file.parent.mkdir()
    torch.save(Wav2Vec2Model(Wav2Vec2Config(**sizes)).state_dict(), encoder_file)
    recipe = tmp_path / "my_ssl"
    assert speechkit_main(["new-recipe", "ssl_finetune", str(recipe)]) == 0
    # The template's own config (the "small" layout, d_model 256) with the tiny encoder's file.
    command = [sys.executable, "train.py", "hparams/train.yaml", "--data_folder", str(tiny_corpus),
               "--pretrained_encoder", str(encoder_file), "--check_data", "False", *TINY_RUN]
    done = subprocess.run(command, cwd=recipe, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode != 0
    assert f"{encoder_file}: the saved encoder has other sizes" in done.stderr, done.stderr[-3000:]
    assert "config.d_model is 256 here, 32 in the file" in done.stderr, done.stderr[-3000:]
    assert "--config.d_model 32" in done.stderr and "--config.num_layers 1" in done.stderr
    assert not list((recipe / "results" / "ssl_finetune" / "1234" / "save").glob("CKPT+*"))  # before training


@pytest.mark.parametrize("family", ["wav2vec2", "wavlm", "data2vec-audio"])
def test_every_family_loads_with_the_runs_fine_tuning_settings(tmp_path, family):
    from tests.helpers.scripts import load_script

    template = Path(__file__).resolve().parents[2] / "templates" / "ssl_finetune"
    train = load_script(template / "train.py", "ssl_finetune_template", search_path=template)
    published = published_encoder(tmp_path / family, family)
    from speechkit.models.wav2vec2 import Wav2Vec2Config

    run_config = Wav2Vec2Config(mask_prob=0.3, mask_length=3, mask_channel_prob=0.1, mask_channel_length=2,
                                layer_drop=0.2)
    encoder = train.build_encoder({"encoder": None, "huggingface_encoder": str(tmp_path / family),
                                   "save_folder": str(tmp_path / "save"), "config": run_config,
                                   "pretrained_encoder": None})
    assert encoder.config.d_model == 24
    assert (encoder.config.mask_prob, encoder.config.layer_drop) == (0.3, 0.2)
    assert not any(p.requires_grad for p in encoder.feature_encoder.parameters())
    for name, tensor in published.state_dict().items():
        assert torch.equal(encoder.state_dict()[name], tensor), name
