"""recipes/SynthSpeech/wav2vec2: pretraining runs and logs its terms (fp32 and bf16), and 2 torchrun gloo
workers with accumulation auto make exactly the update of one process holding the same global batch."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

import speechkit
from tests.helpers.scripts import load_script
from tests.recipes.recipe_helpers import run_script
from tests.recipes.wav2vec2_helpers import (
    RECIPE,
    TINY_ENCODER,
    TINY_MODEL,
    copy_recipe,
    options,
    pretrain_tiny,
)

#: The tiny model without dropout (whose draws differ between processes).
NO_DROPOUT = {**TINY_MODEL, "dropout": 0.0, "attention_dropout": 0.0, "feature_dropout": 0.0,
              "quantizer_input_dropout": 0.0}


def write_audio_corpus(folder: Path, seconds=(1.0, 1.2)) -> Path:
    """train/valid/test.json of noise-and-tone FLACs (transcripts unused by pretraining)."""
    rng = np.random.default_rng(0)
    for split in ("train", "valid", "test"):
        manifest = {}
        for index, duration in enumerate(seconds):
            samples = int(16000 * duration)
            wave = np.sin(np.arange(samples) * rng.uniform(0.02, 0.2)) * 0.2
            wave += 0.05 * rng.standard_normal(samples)
            relative = f"{split}/{split}-{index}.flac"
            (folder / split).mkdir(parents=True, exist_ok=True)
            soundfile.write(folder / relative, wave.astype(np.float32), 16000, subtype="PCM_16")
            manifest[f"{split}-{index}"] = {"wav": f"$data_root/{relative}", "duration": duration,
                                            "text": "A"}
        (folder / f"{split}.json").write_text(json.dumps(manifest))
    return folder


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, tiny_corpus) -> Path:
    """The recipe folder after a 1-epoch pretraining of a tiny model on the tiny corpus."""
    recipe = copy_recipe(tmp_path_factory.mktemp("w2v"))
    pretrain_tiny(recipe, tiny_corpus, "--ckpt_interval_steps", "2", "--log_interval_steps", "1")
    return recipe


@pytest.mark.slow
def test_pretraining_logs_every_term_and_runs_in_bf16(pretrained, tiny_corpus):
    output = pretrained / "results" / "pretrain" / "1234"
    log = (output / "train_log.txt").read_text()
    for term in ("contrastive", "accuracy", "diversity", "feature_penalty", "prob_perplexity",
                 "code_perplexity", "temperature"):
        assert f"| {term}: " in log, log
    assert "update: 1 | lr: " in log and "update: 2 | lr: " in log, log  # the per-interval curve
    encoder = torch.load(output / "encoder.ckpt", weights_only=True)
    assert "encoder.layers.0.ffn_in.weight" in encoder and not any(k.startswith("quantizer") for k in encoder)
    tiny = ["hparams/pretrain.yaml", "--data_folder", str(tiny_corpus), *options(TINY_MODEL)]
    run_script(pretrained / "pretrain.py", [*tiny, "--debug", "--precision", "bf16", "--max_tokens", "48000",
                                            "--global_batch_seconds", "6", "--output_folder", "results/bf16"])
    assert "| accuracy: " in (pretrained / "results" / "bf16" / "train_log.txt").read_text()


def finetune_options(tiny_corpus: Path, freeze_updates: int, output: str) -> list:
    return ["hparams/finetune.yaml", "--data_folder", str(tiny_corpus), *options(TINY_ENCODER),
            "--config.mask_channel_length", "4", "--number_of_epochs", "2", "--tokenizer_file",
            "results/tokenizer/tokenizer.model", "--freeze_encoder_updates", str(freeze_updates),
            "--output_folder", output]


@pytest.mark.slow
def test_finetuning_freezes_what_it_should_and_the_export_transcribes(pretrained, tiny_corpus):
    pretrained_encoder = torch.load(pretrained / "results" / "pretrain" / "1234" / "encoder.ckpt",
                                    weights_only=True)
    run_script(pretrained / "finetune.py", finetune_options(tiny_corpus, 1000, "results/frozen"))
    run_script(pretrained / "finetune.py", finetune_options(tiny_corpus, 1, "results/thawed"))
    for name, frozen_transformer in (("frozen", True), ("thawed", False)):
        output = pretrained / "results" / name
        assert "utt-test-" in (output / "wer_test.txt").read_text()
        encoder = final_weights(output, "encoder.ckpt")
        for key, tensor in pretrained_encoder.items():
            unchanged = torch.equal(encoder[key], tensor)
            if key.startswith("feature_encoder."):
                assert unchanged, f"{name}: the frozen feature encoder changed ({key})"
            elif key.startswith("encoder.layers.0.ffn_in"):
                assert unchanged == frozen_transformer, f"{name}: {key} changed={not unchanged}"
    # Served: the run's inference.yaml (with the encoder's sizes) exports a folder EncoderASR transcribes.
    inference = (pretrained / "results" / "thawed" / "inference.yaml").read_text()
    assert "encoder_dim: 32" in inference and "num_layers: 1" in inference
    command = [sys.executable, "-m", "speechkit", "export", "--checkpoints", "results/thawed/save",
               "--hparams", "results/thawed/inference.yaml", "--min-key", "WER", "--file",
               "tokenizer=results/tokenizer/tokenizer.model", "--output", "results/model"]
    done = subprocess.run(command, cwd=pretrained, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    from speechkit.pretrained import EncoderASR

    asr = EncoderASR.from_hparams(pretrained / "results" / "model")
    text = asr.transcribe_file(tiny_corpus / "test" / "utt-test-000.flac")
    assert isinstance(text, str) and set(text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZ' ")


def final_weights(output: Path, name: str = "wav2vec2.ckpt") -> dict:
    checkpoints = sorted((output / "save").glob("CKPT+*"))
    return torch.load(checkpoints[-1] / name, weights_only=True)


@pytest.mark.slow
def test_two_gloo_workers_make_the_update_of_one_process_with_the_same_global_batch(tmp_path):
    data = write_audio_corpus(tmp_path / "data")
    recipe = copy_recipe(tmp_path, sgd=True)
    # 1.5 s batches hold one utterance each; 3 s per update: 2 micro-batches on 1 process, 1 on each of 2.
    common = ["hparams/pretrain.yaml", "--data_folder", str(data), *options(NO_DROPOUT),
              "--number_of_epochs", "1", "--max_tokens", "24000", "--global_batch_seconds", "3",
              "--lr", "0.5", "--warmup_steps", "1", "--total_steps", "10", "--max_grad_norm", "0"]
    single = run_script(recipe / "pretrain.py", [*common, "--output_folder", "results/one"], timeout=300)
    assert "1 process(es) x 1.5s dynamic batches x 2 accumulation" in single.stdout + single.stderr
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "pretrain.py", *common, "--output_folder", "results/two"]
    try:
        done = subprocess.run(command, cwd=recipe, env=env, capture_output=True, text=True, timeout=400)
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"torchrun timed out:\n{error.stdout}\n{error.stderr}")
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    assert "2 process(es) x 1.5s dynamic batches x 1 accumulation" in done.stdout + done.stderr
    # The initial weights: the YAML built the same way (seeded before the model is made).
    cwd = os.getcwd()
    os.chdir(recipe)
    try:
        changes = {f"config.{name}": value for name, value in NO_DROPOUT.items()}
        objectives = load_script(recipe / "objectives.py", "wav2vec2_objectives_copy", search_path=recipe)
        hparams = speechkit.load_hparams("hparams/pretrain.yaml", changes)
        initial = objectives.build_model(hparams).state_dict()
    finally:
        os.chdir(cwd)
    one, two = final_weights(recipe / "results" / "one"), final_weights(recipe / "results" / "two")
    assert sorted(one) == sorted(two) == sorted(initial)
    moved = 0
    for name, tensor in one.items():
        step_one, step_two = tensor - initial[name], two[name] - initial[name]
        scale = float(step_one.abs().max())
        moved += scale > 1e-5
        torch.testing.assert_close(step_two, step_one, atol=1e-4 * scale + 1e-7, rtol=0,
                                   msg=lambda m, n=name: f"{n}: {m}")
    assert moved > len(one) // 2, "the update did not move the weights: nothing was compared"


@pytest.mark.parametrize("family", ["wav2vec2", "hubert", "wavlm", "data2vec-audio"])
def test_finetuning_starts_from_a_transformers_folder_with_the_recipe_masking(tmp_path, family):
    from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model, Wav2Vec2Pretraining
    from speechkit.pretrained import export_encoder

    finetune = load_script(RECIPE / "finetune.py", "wav2vec2_finetune_recipe", search_path=RECIPE)
    sizes = dict(conv_channels=(16,) * 7, d_model=16, num_layers=1, num_heads=2, ffn_dim=16,
                 pos_conv_kernel=4, pos_conv_groups=2, codebook_entries=4, codevector_dim=8, final_dim=8)
    layout = {"wavlm": dict(relative_position_buckets=16, relative_position_max_distance=40),
              "data2vec-audio": dict(pos_conv_layers=2, feature_norm="layer")}.get(family, {})
    published = Wav2Vec2Pretraining(Wav2Vec2Config(**sizes, **layout, mask_prob=0.05))
    if family != "wav2vec2":
        published = published.wav2vec2  # the encoder alone: transformers has no pretraining model for these
    export_encoder(published, tmp_path / "hf", family)
    published = getattr(published, "wav2vec2", published)
    recipe_config = Wav2Vec2Config(mask_prob=0.4, mask_length=5, mask_channel_prob=0.2, mask_channel_length=4)
    encoder = finetune.build_encoder({"encoder": None, "huggingface_encoder": str(tmp_path / "hf"),
                                      "save_folder": str(tmp_path / "save"), "config": recipe_config,
                                      "pretrained_encoder": None})
    assert isinstance(encoder, Wav2Vec2Model) and encoder.config.d_model == 16
    assert (encoder.config.mask_prob, encoder.config.mask_channel_length) == (0.4, 4)
    assert not any(p.requires_grad for p in encoder.feature_encoder.parameters())
    for name, tensor in published.state_dict().items():
        assert torch.equal(encoder.state_dict()[name], tensor), name


def speaker_corpus(folder: Path) -> Path:
    """The tiny corpus with three speakers in its training manifest (for the probe's speaker split)."""
    from tests.recipes.recipe_helpers import write_corpus

    write_corpus(folder)
    manifest = json.loads((folder / "train.json").read_text())
    for index, key in enumerate(sorted(manifest)):
        manifest[key]["spk"] = "abc"[index % 3]
    (folder / "train.json").write_text(json.dumps(manifest))
    return folder


@pytest.mark.slow
def test_hubert_and_bestrq_pretrain_end_to_end_with_resumable_kmeans_and_a_probe_table(tmp_path):
    data = speaker_corpus(tmp_path / "data")
    recipe = copy_recipe(tmp_path)
    common = ["hparams/pretrain.yaml", "--data_folder", str(data), *options(TINY_MODEL),
              "--hubert.num_clusters", "8", "--bestrq.codebook_size", "16", "--kmeans_batch", "8",
              "--kmeans_utterances", "20"]
    # k-means: one pass, then the same command with two passes resumes after the first; equal to a fresh
    # two-pass fit, bit for bit.
    run_script(recipe / "kmeans.py", [*common, "--kmeans_passes", "1", "--output_folder", "results/km"])
    resumed = run_script(recipe / "kmeans.py", [*common, "--kmeans_passes", "2", "--output_folder",
                                                "results/km"])
    assert "resuming the k-means fit at pass 1, batch 0" in resumed.stdout + resumed.stderr
    resumed_centroids = torch.load(recipe / "results/kmeans/1234/kmeans.ckpt", weights_only=True)["centroids"]
    run_script(recipe / "kmeans.py", [*common, "--kmeans_passes", "2", "--output_folder", "results/km2",
                                      "--hubert.kmeans_file", "results/fresh.ckpt"])
    fresh = torch.load(recipe / "results/fresh.ckpt", weights_only=True)["centroids"]
    assert torch.equal(resumed_centroids, fresh)
    short = ["--number_of_epochs", "1", "--max_tokens", "48000", "--global_batch_seconds", "6",
             "--log_interval_steps", "1"]
    figures = {"hubert": "target_perplexity", "bestrq": "target_perplexity"}
    for objective, figure in figures.items():
        run_script(recipe / "pretrain.py", [*common, *short, "--objective", objective, "--output_folder",
                                            f"results/{objective}"])
        log = (recipe / "results" / objective / "train_log.txt").read_text()
        assert "| prediction: " in log and f"| {figure}: " in log and "update: 1 | lr: " in log, log
    # The second HuBERT iteration clusters a layer of the first model.
    second = ["--hubert.teacher_encoder", "results/hubert/encoder.ckpt", "--hubert.teacher_layer", "1",
              "--hubert.kmeans_file", "results/iter2.ckpt", "--hubert.num_clusters", "6"]
    run_script(recipe / "kmeans.py", [*common, *second, "--output_folder", "results/km-iter2"])
    assert torch.load(recipe / "results/iter2.ckpt", weights_only=True)["centroids"].shape == (6, 32)
    run_script(recipe / "pretrain.py", [*common, *short, *second, "--objective", "hubert",
                                        "--output_folder", "results/hubert2"])
    # Every objective saves the same encoder layout: the probe (and finetune.py) read each.
    layouts = [sorted(torch.load(recipe / "results" / name / "encoder.ckpt", weights_only=True))
               for name in ("hubert", "bestrq", "hubert2")]
    assert layouts[0] == layouts[1] == layouts[2]
    done = run_script(recipe / "probe.py", [
        "hparams/probe.yaml", "--data_folder", str(data), *options(TINY_ENCODER)[3:], "--probe_steps", "5",
        "--sources.wav2vec2", "null", "--sources.hubert", "results/hubert2/encoder.ckpt",
        "--sources.bestrq", "results/bestrq/encoder.ckpt"])
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    names = [line.split("|")[1].strip() for line in table[2:]]
    assert names == ["filterbanks", "random_init", "random_init", "hubert", "hubert", "bestrq", "bestrq"]
    assert (recipe / "results" / "probe" / "1234" / "probe.md").read_text().strip() == "\n".join(table)


def test_objectives_refuse_what_they_cannot_build(tmp_path):
    from speechkit.errors import CheckpointError, HparamsError
    from speechkit.models.wav2vec2 import (
        BestRqPretraining,
        HubertPretraining,
        MiniBatchKMeans,
        Wav2Vec2Config,
        Wav2Vec2Model,
    )

    objectives = load_script(RECIPE / "objectives.py", "wav2vec2_objectives", search_path=RECIPE)
    config = Wav2Vec2Config(**TINY_MODEL)
    kmeans = MiniBatchKMeans(4, 39)
    kmeans.partial_fit(torch.randn(8, 39))
    torch.save(kmeans.state_dict(), tmp_path / "kmeans.ckpt")
    hparams = {"config": config, "objective": "hubert", "bestrq": {"codebook_size": 8, "n_mels": 20},
               "hubert": {"num_clusters": 4, "kmeans_file": str(tmp_path / "kmeans.ckpt"),
                          "teacher_encoder": None, "teacher_layer": None}}
    assert isinstance(objectives.build_model(hparams), HubertPretraining)
    assert isinstance(objectives.build_model({**hparams, "objective": "bestrq"}), BestRqPretraining)
    with pytest.raises(HparamsError, match="must be one of wav2vec2, hubert, bestrq, got 'data2vec'"):
        objectives.build_model({**hparams, "objective": "data2vec"})
    with pytest.raises(HparamsError, match="holds 4 clusters, hubert.num_clusters is 5"):
        objectives.build_model({**hparams, "hubert": {**hparams["hubert"], "num_clusters": 5}})
    with pytest.raises(HparamsError, match="does not exist: fit it first"):
        objectives.build_model({**hparams, "hubert": {**hparams["hubert"], "kmeans_file": "missing.ckpt"}})
    torch.save(Wav2Vec2Model(config).state_dict(), tmp_path / "teacher.ckpt")
    with pytest.raises(HparamsError, match="teacher_layer must say which layer"):
        objectives.build_model({**hparams, "hubert": {**hparams["hubert"],
                                                      "teacher_encoder": str(tmp_path / "teacher.ckpt")}})
    # A first model of other sizes than `config`: refused by field name, not only by tensor.
    other = Wav2Vec2Model(Wav2Vec2Config(**{**TINY_MODEL, "ffn_dim": 48}))
    torch.save(other.state_dict(), tmp_path / "other.ckpt")
    with pytest.raises(CheckpointError, match=r"other\.ckpt: .*config\.ffn_dim is 64 here, 48 in the file"):
        objectives.build_model({**hparams, "hubert": {**hparams["hubert"], "teacher_layer": 1,
                                                      "teacher_encoder": str(tmp_path / "other.ckpt")}})
