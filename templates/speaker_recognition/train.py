#!/usr/bin/env python3
"""Train a speaker verifier (ECAPA-TDNN, AAM-softmax) on the built-in corpus' voices; test on unseen speakers.

Run (from this folder):
    python train.py hparams/train.yaml                         # builds the corpus on first use
    torchrun --nproc_per_node=2 train.py hparams/train.yaml    # several processes

Training sees random crops of speaker-balanced batches, augmented; validation scores trials of held-out
speakers by cosine (EER picks the checkpoint); the test scores unseen speakers with AS-norm against a cohort
of training utterances and writes EER and minDCF overall, same-engine and cross-engine
(``verification_test.txt``) and every trial's score (``scores_test.txt``).
"""
from __future__ import annotations

import sys

import speechkit
from speechkit.augment import random_crops
from speechkit.data import DynamicItemDataset
from speechkit.data.trials import read_trials
from speechkit.metrics.speaker_scoring import VerificationStats, format_summary
from speechkit.recipe import fit_and_evaluate, sibling_module, start
from speechkit.stage import Stage

prepare = sibling_module(__file__, "prepare")  # the recipe's own data preparation, next to this file


class SpeakerVerifier(speechkit.Brain):
    """Waveform -> filterbanks -> embedding; AAM-softmax over training identities; EER on held-out ones."""

    def compute_forward(self, batch, stage):
        """``(embeddings, identities)``: (batch, dim) and, in training, the (batch,) classes to learn."""
        wavs, lengths = batch.sig
        identities = None
        if stage == Stage.TRAIN:
            seeds = self.item_seeds(batch.id)
            crop = int(self.hparams.crop_seconds * self.hparams.sample_rate)
            wavs, lengths = random_crops(wavs, lengths, crop, (seeds + 1).tolist())
            identities = batch.spk_id
            if self.hparams.speed_identities is not None:  # each speed a speaker of its own
                wavs, lengths, identities = self.hparams.speed_identities(
                    wavs, lengths, identities, self.num_speakers, seeds)
            if self.hparams.waveform_augmentation is not None:
                wavs, lengths = self.hparams.waveform_augmentation(wavs, lengths, seeds)
        feats, frames = self.modules.compute_features(wavs, lengths)
        feats, frames = self.modules.mean_var_norm(feats, frames)
        return self.modules.embedding_model(feats, frames), identities

    def compute_objectives(self, predictions, batch, stage):
        embeddings, identities = predictions
        if stage == Stage.TRAIN:
            return self.modules.classifier(embeddings, identities)
        self.stats.append(batch.id, embeddings)
        return embeddings.new_zeros(())  # held-out speakers have no class: EER is the validation measure

    def on_stage_start(self, stage, epoch=None):
        if stage != Stage.TRAIN:
            self.stats = VerificationStats(top_k=self.hparams.as_norm_top_k)

    def on_stage_end(self, stage, stage_loss, epoch=None):
        if stage == Stage.TRAIN:
            return None
        if stage == Stage.VALID:
            summary = self.stats.summarize(self.trials["valid"])  # cosine: its threshold suits the interface
            return {key: summary[key] for key in ("eer", "min_dcf@0.01", "threshold")}
        summary = self.stats.summarize(self.trials["test"], cohort_ids=self.cohort)
        if self.context.is_main:
            report = format_summary(summary, f"{len(self.trials['test'])} trials, AS-norm cohort "
                                             f"{len(self.cohort)}")
            with open(self.hparams.report_file, "w", encoding="utf-8") as handle:
                handle.write(report)
            self.stats.write_scores(self.hparams.scores_file)
            print(report, end="", flush=True)
        return {key: summary[key] for key in ("eer", "min_dcf@0.01", "min_dcf@0.05")}


def datasets(hparams: dict, paths: dict) -> tuple:
    """Train/valid/test datasets (test holds the cohort too), the identities' class ids and the cohort ids."""
    root = {"data_root": hparams["data_folder"]}
    out = {split: DynamicItemDataset.from_json(paths[split], replacements=root)
           for split in ("train", "valid", "test")}
    speakers = sorted({row["spk"] for row in out["train"].data.values()})
    index = {name: i for i, name in enumerate(speakers)}
    for split, data in out.items():
        data.add_dynamic_item(hparams["audio_policy"], takes=["wav"], provides="sig")
        keys = ["id", "sig"]
        if split == "train":
            data.add_dynamic_item(lambda spk: index[spk], takes=["spk"], provides="spk_id")
            keys.append("spk_id")
        data.set_output_keys(keys)
    cohort = [utt_id for utt_id, row in out["test"].data.items() if row.get("cohort")]
    return out, len(speakers), cohort


def main(argv):
    run = start(argv, prepare=prepare.prepare_manifests)  # builds the corpus once; the others wait
    hparams, paths = run.hparams, run.manifests
    data, num_speakers, cohort = datasets(hparams, paths)
    model = hparams["embedding_model"]
    identities = hparams["speed_identities"]
    classes = identities.num_classes(num_speakers) if identities is not None else num_speakers
    classifier = hparams["classifier"](embedding_size=model.embedding_size, num_classes=classes)
    modules = {"compute_features": hparams["compute_features"], "mean_var_norm": hparams["mean_var_norm"],
               "embedding_model": model, "classifier": classifier}
    checkpointer = speechkit.Checkpointer(hparams["save_folder"],
                                          {**modules, "counter": hparams["epoch_counter"]})
    brain = SpeakerVerifier(modules, hparams["opt_class"], hparams, run.run_opts, checkpointer)
    brain.trials = {split: read_trials(paths[f"{split}_trials"], set(data[split].data))
                    for split in ("valid", "test")}
    brain.cohort, brain.num_speakers = cohort, num_speakers
    fit_and_evaluate(brain, hparams, data, min_key=hparams["test_min_key"])
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
