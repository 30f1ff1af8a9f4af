#!/usr/bin/env python3
"""Train a small mel-to-waveform vocoder with a multi-resolution STFT loss on the built-in corpus.

Run (from this folder):
    python train.py hparams/train.yaml                          # builds the demo corpus on first use
    python train.py hparams/train.yaml --optimizer_step_limit 2000
    torchrun --nproc_per_node=2 train.py hparams/train.yaml

Training sees random ``segment_seconds`` crops of each utterance; valid and test score whole utterances. The
test report (``vocoder_test.txt``) lists each utterance's STFT distance to the original audio, for the
vocoder and for Griffin-Lim from the same mel spectrogram.
"""
from __future__ import annotations

import random
import sys

import speechkit
from speechkit import distributed as dist
from speechkit.data import AudioPolicy, DynamicItemDataset
from speechkit.models.vocoder import griffin_lim
from speechkit.nn import multi_resolution_stft_loss, stft_distances
from speechkit.recipe import sibling_module, start
from speechkit.stage import Stage


class Vocoder(speechkit.Brain):
    """Waveform -> log mel -> generator -> waveform, scored against the original waveform."""

    def compute_forward(self, batch, stage):
        wavs, lengths = batch.sig
        mels, frames = self.modules.mel(wavs, lengths)
        return self.modules.generator(mels, frames)

    def compute_objectives(self, predictions, batch, stage):
        wavs, lengths = batch.sig
        generated = predictions[0][:, :wavs.shape[1]]
        loss, _ = multi_resolution_stft_loss(generated, wavs, lengths)
        if stage != Stage.TRAIN:
            self.distances.append(stft_distances(generated, wavs, lengths))
        if stage == Stage.TEST:
            self.report += score_griffin_lim(self.modules.mel, wavs, lengths, generated, batch.id)
        return loss

    def on_stage_start(self, stage, epoch=None):
        self.distances, self.report = [], []

    def on_stage_end(self, stage, stage_loss, epoch=None):
        if stage == Stage.TRAIN:
            return None
        summary = {name: float(sum(float(d[name].sum()) for d in self.distances)
                               / sum(len(d[name]) for d in self.distances))
                   for name in ("spectral_convergence", "log_magnitude")}
        if stage == Stage.TEST and dist.is_main():
            with open(self.hparams.report_file, "w", encoding="utf-8") as report:
                report.write("id\tvocoder_sc\tvocoder_logmag\tgriffin_lim_sc\tgriffin_lim_logmag\n")
                report.writelines(sorted(self.report))
        return summary


def score_griffin_lim(mel, wavs, lengths, generated, ids) -> list:
    """One report line per utterance: the vocoder's and Griffin-Lim's STFT distances to the original."""
    mels, frames = mel(wavs, lengths)
    baseline = griffin_lim(mels, frames, mel)[0][:, :wavs.shape[1]]
    ours, theirs = stft_distances(generated, wavs, lengths), stft_distances(baseline, wavs, lengths)
    return [f"{item}\t{ours['spectral_convergence'][i]:.4f}\t{ours['log_magnitude'][i]:.4f}\t"
            f"{theirs['spectral_convergence'][i]:.4f}\t{theirs['log_magnitude'][i]:.4f}\n"
            for i, item in enumerate(ids)]


def datasets(hparams: dict, manifests: dict) -> dict:
    """Random crops for training (a new crop every epoch), whole utterances for valid and test."""
    segment = int(hparams["segment_seconds"] * hparams["sample_rate"])
    crops = random.Random(hparams["seed"] + dist.rank())
    read_audio = AudioPolicy(hparams["sample_rate"])  # mono at the model's rate, as inference reads files

    def cropped(wav):
        signal = read_audio(wav)
        start_at = crops.randint(0, max(0, signal.shape[0] - segment))
        return signal[start_at:start_at + segment]

    out, root = {}, {"data_root": hparams["data_folder"]}
    for split in ("train", "valid", "test"):
        data = DynamicItemDataset.from_manifest(manifests[split], replacements=root)
        if split != "train":
            data = data.filtered_sorted(select_n=hparams[f"{split}_utterances"])
        data.add_dynamic_item(cropped if split == "train" else read_audio, takes=["wav"], provides="sig")
        data.set_output_keys(["id", "sig"])
        out[split] = data
    return out


def main(argv):
    run = start(argv, prepare=sibling_module(__file__, "prepare").prepare_manifests)
    hparams = run.hparams
    data = datasets(hparams, run.manifests)
    modules = {"mel": hparams["mel"], "generator": hparams["generator"]}
    saved = {"generator": hparams["generator"], "counter": hparams["epoch_counter"]}
    checkpointer = speechkit.Checkpointer(hparams["save_folder"], saved)
    brain = Vocoder(modules, hparams["opt_class"], hparams, run.run_opts, checkpointer)
    brain.fit(hparams["epoch_counter"], data["train"], data["valid"],
              train_loader_kwargs=hparams["train_loader_kwargs"],
              valid_loader_kwargs=hparams["eval_loader_kwargs"])
    brain.evaluate(data["test"], min_key="loss", test_loader_kwargs=hparams["eval_loader_kwargs"])
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
