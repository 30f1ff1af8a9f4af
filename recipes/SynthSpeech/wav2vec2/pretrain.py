#!/usr/bin/env python3
"""Pretrain a wav2vec 2.0-style encoder on the corpus's audio alone (no transcripts), with one of three
objectives (``objective`` in the YAML, see objectives.py):

- ``wav2vec2``: masked frames pick their quantized target among distractors from the same utterance;
- ``hubert``: masked frames predict the k-means cluster of their MFCCs (fit the k-means first with
  kmeans.py), or of a layer of a first HuBERT model (the second iteration);
- ``bestrq``: masked frames predict the code a frozen random projection gives their filterbanks.

Run (from this folder):
    python pretrain.py hparams/pretrain.yaml                      # builds the corpus on first use
    python kmeans.py hparams/pretrain.yaml --objective hubert      # HuBERT's targets, then:
    python pretrain.py hparams/pretrain.yaml --objective hubert --output_folder results/pretrain/hubert
    python pretrain.py hparams/pretrain.yaml --objective bestrq --output_folder results/pretrain/bestrq
    torchrun --nproc_per_node=2 pretrain.py hparams/pretrain.yaml  # same global batch (accumulation: auto)

Each stage logs the objective's figures (wav2vec 2.0: contrastive loss and accuracy, diversity loss, feature
penalty, code perplexities, Gumbel temperature; HuBERT and BEST-RQ: cross-entropy and accuracy on masked
frames, feature penalty, target perplexity), and so does every log_interval_steps updates of training (for
the curves of a run of one epoch or less); checkpoints are also saved within epochs (ckpt_interval_minutes).
The encoder alone is saved at the end (encoder_file), the same layout for the three: finetune.py and
probe.py read any of them.
"""
from __future__ import annotations

import sys

import torch

import speechkit
from speechkit.data import AudioPolicy, DynamicItemDataset, provides, takes
from speechkit.engine.progress import format_value
from speechkit.experiment import seed_everything
from speechkit.models.wav2vec2 import batch_generator
from speechkit.recipe import sibling_module, start

prepare = sibling_module(__file__, "prepare")  # links to ../ASR/prepare.py: the same corpus
objectives = sibling_module(__file__, "objectives")


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
        if hasattr(self.raw_modules.wav2vec2, "set_num_updates"):  # wav2vec 2.0: anneal the temperature
            self.raw_modules.wav2vec2.set_num_updates(self.optimizer_steps)
        interval = self.hparams.log_interval_steps
        if interval and self.optimizer_steps % interval == 0:  # every process: summarize is a collective
            update = self.optimizer_steps
            figures = self.monitor.summarize(stage=f"update {update}", since=self.interval_start)
            self.interval_start = self.monitor.snapshot()
            lr = self.optimizer.param_groups[0]["lr"]
            self.train_log.write(" | ".join([f"update: {update}", f"lr: {lr:.4g}"] + [
                f"{name}: {format_value(value)}" for name, value in figures.items()]))

    def on_fit_start(self):
        super().on_fit_start()
        if hasattr(self.raw_modules.wav2vec2, "set_num_updates"):
            self.raw_modules.wav2vec2.set_num_updates(self.optimizer_steps)  # also after a recovery

    def on_stage_start(self, stage, epoch=None):
        self.monitor = objectives.build_monitor(self.raw_modules.wav2vec2, self.hparams.collapse_fraction)
        self.interval_start = self.monitor.snapshot()  # the sums when the current log interval began

    def on_stage_end(self, stage, stage_loss, epoch=None):
        return self.monitor.summarize(stage=stage.name.lower())


def dataio_prepare(hparams: dict, manifests: dict) -> dict:
    """The audio only (normalized per utterance in compute_forward, as the fine-tuned model will be)."""

    read_audio = AudioPolicy(hparams["sample_rate"])  # mono at the model's rate (docs/data.md)

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
    run = start(argv, prepare=prepare.prepare_manifests)  # builds the corpus once; the others wait
    hparams = run.hparams
    # Seeded again as the YAML was, so the weights are those of load_hparams + build_model anywhere.
    seed_everything(hparams["seed"])
    modules = {"wav2vec2": objectives.build_model(hparams)}
    datasets = dataio_prepare(hparams, run.manifests)
    checkpointer = speechkit.Checkpointer(hparams["save_folder"],
                                          {**modules, "counter": hparams["epoch_counter"]})
    # The LR schedule is the YAML's lr_scheduler (Brain reads it from hparams).
    brain = Wav2Vec2Pretrainer(modules, hparams["opt_class"], hparams, run.run_opts, checkpointer)
    brain.fit(hparams["epoch_counter"], datasets["train"], datasets["valid"],
              train_loader_kwargs=hparams["train_loader_kwargs"],
              valid_loader_kwargs=hparams["eval_loader_kwargs"])
    if brain.context.is_main:  # the encoder alone, for fine-tuning (finetune.yaml's pretrained_encoder)
        torch.save(brain.raw_modules.wav2vec2.wav2vec2.state_dict(), hparams["encoder_file"])
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
