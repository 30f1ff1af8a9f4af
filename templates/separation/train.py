#!/usr/bin/env python3
"""Train a speech separator (Conv-TasNet, PIT with negative SI-SNR) on mixtures of synthetic voices.

Run (from this folder):
    python train.py hparams/train.yaml                         # builds the corpus and mixtures on first use
    torchrun --nproc_per_node=2 train.py hparams/train.yaml    # several processes
    python train.py --worker-id 0 --num-workers 2 --sync-protocol file:///shared/sync -- hparams/train.yaml

With ``--pretrained_checkpoints OTHER_RUN/save`` training starts from another run's best separator
(fine-tuning, e.g. on your own speakers); a checkpoint of this run, when resuming, still wins.

Training mixes the training voices anew every epoch; valid and test are written mixtures of held-out voices.
The test report (``separation_test.txt``) lists SI-SNRi and SDRi per mixture, worst first.
"""
from __future__ import annotations

import sys

import torch

import speechkit
from speechkit.data import DynamicItemDataset
from speechkit.data.audio_policy import AudioPolicy
from speechkit.data.mixtures import DynamicMixtures, load_sources, mixture_crop
from speechkit.metrics import SeparationStats
from speechkit.nn import apply_permutation, pit_si_snr_loss
from speechkit.pretrained.loading import load_best_checkpoint
from speechkit.recipe import fit_and_evaluate, sibling_module, start
from speechkit.stage import Stage

prepare = sibling_module(__file__, "prepare")  # the recipe's own data preparation, next to this file


class Separation(speechkit.Brain):
    """Mixture -> separator -> one waveform per speaker, scored against the references under the best
    permutation."""

    def compute_forward(self, batch, stage):
        mixture, lengths = batch.mix_sig
        return self.modules.separator(mixture, lengths)

    def compute_objectives(self, estimates, batch, stage):
        mixture, lengths = batch.mix_sig
        targets = torch.stack([batch[f"s{k + 1}_sig"].data for k in range(self.hparams.num_speakers)], 1)
        loss, permutation = pit_si_snr_loss(estimates, targets, lengths)
        if stage != Stage.TRAIN:
            self.stats.append(batch.id, apply_permutation(estimates, permutation), mixture, targets, lengths)
        return loss

    def on_stage_start(self, stage, epoch=None):
        if stage != Stage.TRAIN:
            self.stats = SeparationStats(sdr=stage == Stage.TEST or self.hparams.valid_sdr)

    def on_stage_end(self, stage, stage_loss, epoch=None):
        if stage == Stage.TRAIN:
            return None
        summary = self.stats.summarize()
        if stage == Stage.TEST and self.context.is_main:
            self.stats.write_stats(self.hparams.report_file)
        return {key: summary[key] for key in ("si_snri", "sdri") if key in summary}


def datasets(hparams: dict, paths: dict) -> dict:
    """Dynamic training mixtures, and the written valid/test mixtures read at the model's rate."""
    rate, speakers = hparams["sample_rate"], hparams["num_speakers"]
    keys = ["mix"] + [f"s{k + 1}" for k in range(speakers)]
    read = AudioPolicy(rate)  # as the interface reads files: mono at the model's rate (docs/data.md)
    out, written = {}, prepare.written_mixtures(hparams["data_folder"])
    if not written:  # sources by speaker: new mixtures every epoch
        sources = load_sources(paths["train"], rate, {"data_root": hparams["data_folder"]})
        out["train"] = DynamicMixtures(sources, hparams["train_mixtures_per_epoch"], speakers,
                                       int(hparams["segment_seconds"] * rate), hparams["level_range_db"],
                                       seed=hparams["seed"],
                                       source_augmentation=hparams.get("source_augmentation"))
    for split in [split for split in paths if split != "train" or written]:  # valid, test (and test_engine)
        data = DynamicItemDataset.from_json(paths[split],
                                            replacements={"data_root": hparams["mixtures_folder"]})
        if split == "train":  # your own written mixtures: the same crop of every file
            crop = int(hparams["segment_seconds"] * rate)
            data.add_dynamic_item(mixture_crop(keys, crop, hparams["seed"], policy=read))
        else:
            for key in keys:
                data.add_dynamic_item(read, takes=[f"{key}_wav"], provides=f"{key}_sig")
        data.set_output_keys(["id"] + [f"{key}_sig" for key in keys])
        out[split] = data
    return out


def main(argv):
    run = start(argv, prepare=prepare.prepare_manifests)  # builds corpus and mixtures once; the others wait
    hparams = run.hparams
    modules = {"separator": hparams["separator"]}
    if hparams.get("pretrained_checkpoints"):  # fine-tuning: another run's weights (this run's own resume)
        load_best_checkpoint(modules, hparams["pretrained_checkpoints"], hparams.get("pretrained_min_key"))
    checkpointer = speechkit.Checkpointer(hparams["save_folder"],
                                          {**modules, "counter": hparams["epoch_counter"]})
    # The LR schedule is the YAML's lr_scheduler (Brain reads it from hparams).
    brain = Separation(modules, hparams["opt_class"], hparams, run.run_opts, checkpointer)
    fit_and_evaluate(brain, hparams, datasets(hparams, run.manifests), min_key=hparams["test_min_key"])
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
