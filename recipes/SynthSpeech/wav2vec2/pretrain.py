#!/usr/bin/env python3
"""Pretrain wav2vec 2.0 on the corpus's audio alone (no transcripts): masked frames pick their quantized
target among distractors from the same utterance.

Run (from this folder):
    python pretrain.py hparams/pretrain.yaml                      # builds the corpus on first use
    python pretrain.py hparams/pretrain.yaml --precision bf16
    torchrun --nproc_per_node=2 pretrain.py hparams/pretrain.yaml  # same global batch (accumulation: auto)

Each stage logs the contrastive loss and accuracy, the diversity loss, the feature penalty, the code
perplexities and the Gumbel temperature; checkpoints are also saved within epochs (ckpt_interval_minutes).
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

import speechkit
from speechkit import distributed as dist
from speechkit.data import DynamicItemDataset, provides, read_audio, takes
from speechkit.models.wav2vec2 import PretrainingMonitor, batch_generator

sys.path.insert(0, str(Path(__file__).absolute().parent))  # not resolved: prepare.py links to ../ASR
from prepare import prepare_manifests  # noqa: E402


class Wav2Vec2Pretrainer(speechkit.Brain):
    def compute_forward(self, batch, stage):
        wavs, lengths = batch.sig
        if self.hparams.normalize_audio:
            wavs, lengths = self.hparams.normalize(wavs, lengths)
        # Draws depend on the batch and the update only: the same on 1 process or many (see batch_generator).
        generator = batch_generator(self.hparams.seed, self.optimizer_steps, batch.id)
        return self.modules.wav2vec2(wavs, lengths, generator=generator)

    def compute_objectives(self, out, batch, stage):
        self.monitor.update(out)
        return out.loss

    def optimizer_step(self):
        super().optimizer_step()
        self._raw_modules.wav2vec2.set_num_updates(self.optimizer_steps)  # anneal the Gumbel temperature

    def on_fit_start(self):
        super().on_fit_start()
        self._raw_modules.wav2vec2.set_num_updates(self.optimizer_steps)  # also after a recovery

    def on_stage_start(self, stage, epoch=None):
        config = self._raw_modules.wav2vec2.config
        self.monitor = PretrainingMonitor(config.codebook_groups, config.codebook_entries,
                                          self.hparams.collapse_fraction)

    def on_stage_end(self, stage, stage_loss, epoch=None):
        return self.monitor.summarize(stage=stage.name.lower())


def dataio_prepare(hparams: dict, manifests: dict) -> dict:
    """The audio only (normalized per utterance in compute_forward, as the fine-tuned model will be)."""

    @takes("wav")
    @provides("sig")
    def audio_pipeline(wav):
        return read_audio(wav)

    datasets = {}
    for split in ("train", "valid"):
        dataset = DynamicItemDataset.from_manifest(manifests[split],
                                                   replacements={"data_root": hparams["data_folder"]})
        dataset = dataset.filtered_sorted(key_max_value={"duration": hparams["max_duration"]},
                                          key_min_value={"duration": hparams["min_duration"]})
        dataset.add_dynamic_item(audio_pipeline)
        dataset.set_output_keys(["id", "sig"])
        datasets[split] = dataset
    return datasets


def main(argv):
    hparams_file, run_opts, overrides = speechkit.parse_arguments(argv)
    hparams = speechkit.load_hparams(hparams_file, overrides, run_opts=run_opts)
    dist.init(run_opts)
    speechkit.create_experiment_directory(hparams["output_folder"], hparams_file, overrides,
                                          run_opts=run_opts)
    dist.run_on_main(prepare_manifests, args=(hparams,))  # builds the corpus once; the others wait
    datasets = dataio_prepare(hparams, prepare_manifests(hparams, build=False))
    modules = {"wav2vec2": hparams["wav2vec2"]}
    checkpointer = speechkit.Checkpointer(hparams["save_folder"],
                                          {**modules, "counter": hparams["epoch_counter"]})
    brain = Wav2Vec2Pretrainer(modules, hparams["opt_class"], hparams, run_opts, checkpointer)
    brain.lr_scheduler = hparams["lr_scheduler"]
    brain.fit(hparams["epoch_counter"], datasets["train"], datasets["valid"],
              train_loader_kwargs=hparams["train_loader_kwargs"],
              valid_loader_kwargs=hparams["eval_loader_kwargs"])
    if dist.is_main():  # the encoder alone, for fine-tuning (finetune.yaml's pretrained_encoder)
        torch.save(brain._raw_modules.wav2vec2.wav2vec2.state_dict(), hparams["encoder_file"])
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
