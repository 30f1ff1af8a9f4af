#!/usr/bin/env python3
"""The smallest speechkit recipe: a tone classifier trained on signals it generates itself (seconds on CPU).

Run:
    python recipes/minimal/train.py recipes/minimal/hparams/train.yaml [--precision bf16] [--lr 0.01]
"""

import sys

import torch

import speechkit
from speechkit.recipe import fit_and_evaluate, start
from speechkit.stage import Stage


def make_tones(count: int, hparams: dict, seed: int) -> torch.utils.data.TensorDataset:
    """``count`` noisy sine waves, each one of ``num_classes`` frequencies; items are (signal, label)."""
    generator = torch.Generator().manual_seed(seed)
    samples = hparams["samples"]
    labels = torch.randint(hparams["num_classes"], (count,), generator=generator)
    frequencies = 50.0 * (labels + 1).float()  # 50, 100, 150, 200 Hz
    phases = torch.rand(count, generator=generator) * 2 * torch.pi
    time = torch.arange(samples) / hparams["sample_rate"]
    signals = torch.sin(2 * torch.pi * frequencies[:, None] * time + phases[:, None])
    signals += hparams["noise"] * torch.randn(count, samples, generator=generator)
    return torch.utils.data.TensorDataset(signals, labels)


class ToneBrain(speechkit.Brain):
    def compute_forward(self, batch, stage):
        signals, _ = batch
        return self.modules.model(signals)

    def compute_objectives(self, logits, batch, stage):
        _, labels = batch
        loss = torch.nn.functional.cross_entropy(logits.float(), labels)
        if stage != Stage.TRAIN:
            self.errors += (logits.argmax(dim=-1) != labels).sum().item()
            self.items += len(labels)
        return loss

    def on_stage_start(self, stage, epoch=None):
        self.errors, self.items = 0, 0

    def on_stage_end(self, stage, stage_loss, epoch=None):
        if stage != Stage.TRAIN:
            counts = self.dist.all_gather_object((self.errors, self.items))
            return {"error_rate": 100.0 * sum(e for e, _ in counts) / max(1, sum(n for _, n in counts))}
        return None


def main(argv):
    run = start(argv)  # run options, YAML, processes, experiment folder
    hparams = run.hparams
    data = {
        stage: make_tones(hparams[f"{stage}_items"], hparams, seed=index)
        for index, stage in enumerate(("train", "valid", "test"))
    }
    brain = ToneBrain(
        {"model": hparams["model"]}, hparams["opt_class"], hparams, run.run_opts, hparams["checkpointer"]
    )
    fit_and_evaluate(brain, hparams, data, min_key="loss")
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
