"""A run stopped in the middle of an epoch and resumed augments every item as an uninterrupted run does:
the draws come from the run's seed, the epoch and the item id (Brain.item_seeds), not from a global stream."""
from __future__ import annotations

import os
import signal

import pytest
import torch

from speechkit import augment
from speechkit.brain import Brain
from speechkit.checkpoints import Checkpointer, EpochCounter
from speechkit.errors import EXIT_PREEMPTED
from speechkit.stage import Stage

ITEMS = [{"id": f"utt{i}", "sig": torch.randn(800 + 97 * i, generator=torch.Generator().manual_seed(i))}
         for i in range(12)]
LOADER = {"batch_size": 3, "shuffle": True}


class Augmented(Brain):
    """Records, per epoch and id, the augmented waveform the training step saw; ``stop_at`` sends SIGTERM
    before that (epoch, step) of training."""

    stop_at = None

    def compute_forward(self, batch, stage):
        wavs, lengths = batch.sig
        if stage is Stage.TRAIN:
            epoch = self.epoch_counter.current
            if (epoch, self.step) == self.stop_at:
                os.kill(os.getpid(), signal.SIGTERM)
            wavs, lengths = self.hparams.augmenter(wavs, lengths, self.item_seeds(batch.id))
            for utt_id, wave, length in zip(batch.id, wavs, lengths):
                self.seen[(epoch, utt_id)] = wave[: int(length)].clone()
        return self.modules.model(wavs[:, :8]).mean()

    def compute_objectives(self, predictions, batch, stage):
        return predictions ** 2


def make_brain(folder, seen: dict, stop_at=None) -> Augmented:
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    augmenter = augment.Augmenter([augment.SpeedPerturb(), augment.Equalizer(), augment.AddNoise()],
                                  probabilities=[1.0, 0.5, 0.5])
    brain = Augmented({"model": model}, lambda p: torch.optim.SGD(p, lr=0.01), {"augmenter": augmenter},
                      {"noprogressbar": True, "seed": 7}, Checkpointer(folder, {"model": model}))
    brain.seen, brain.stop_at = seen, stop_at
    return brain


def test_resuming_mid_epoch_makes_the_draws_of_an_uninterrupted_run(tmp_path):
    whole: dict = {}
    make_brain(tmp_path / "whole", whole).fit(EpochCounter(2), ITEMS, train_loader_kwargs=LOADER)
    assert len(whole) == 24

    resumed: dict = {}
    with pytest.raises(SystemExit) as stopped:
        make_brain(tmp_path / "stopped", resumed, stop_at=(2, 2)).fit(EpochCounter(2), ITEMS,
                                                                       train_loader_kwargs=LOADER)
    assert stopped.value.code == EXIT_PREEMPTED
    before = len(resumed)
    assert 12 < before < 24  # stopped inside the second epoch
    make_brain(tmp_path / "stopped", resumed).fit(EpochCounter(2), ITEMS, train_loader_kwargs=LOADER)
    assert len(resumed) == 24 and len(resumed) > before
    for key, wave in whole.items():
        assert torch.equal(resumed[key], wave), key
    # The draws differ between epochs: each epoch hears new versions of every item.
    assert not torch.equal(whole[(1, "utt3")], whole[(2, "utt3")])
