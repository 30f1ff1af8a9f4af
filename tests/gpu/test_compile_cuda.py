"""``--compile`` and CUDA graphs (``--compile_mode reduce-overhead``) give the loss and weights of eager
training; batches padded to few shapes (``pad_to_multiple``) reuse the compiled graphs."""
from __future__ import annotations

import pytest
import torch

from speechkit.brain import Brain
from speechkit.checkpoints import EpochCounter
from speechkit.engine.device_speed import fused_optimizer_options


class Encoder(Brain):
    """A small convolutional encoder over padded sequences, masked so padding never counts."""

    def compute_forward(self, batch, stage):
        wavs, lengths = batch.sig
        return self.modules.model(wavs.unsqueeze(1)).squeeze(1), lengths

    def compute_objectives(self, predictions, batch, stage):
        out, lengths = predictions
        mask = torch.arange(out.shape[1], device=out.device)[None, :] < lengths[:, None]
        return (out.pow(2) * mask).sum() / mask.sum()


def sequences(count=24):
    generator = torch.Generator().manual_seed(3)
    return [{"id": str(n), "sig": torch.randn(int(torch.randint(40, 120, (1,), generator=generator)),
                                              generator=generator)} for n in range(count)]


def train(run_opts: dict):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv1d(1, 8, 5, padding=2), torch.nn.ReLU(),
                                torch.nn.Conv1d(8, 1, 5, padding=2))
    brain = Encoder({"model": model}, lambda p: torch.optim.AdamW(p, lr=1e-2), None,
                    {"noprogressbar": True, "device": "cuda:0", **run_opts})
    brain.fit(EpochCounter(2), sequences(),
              train_loader_kwargs={"batch_size": 4, "shuffle": False, "pad_to_multiple": 64})
    return brain


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_compiled_training_gives_the_eager_loss_and_weights(mode):
    eager = train({})
    compiled = train({"compile": True, "compile_mode": mode})
    assert type(compiled._wrapped["model"]).__name__ == "OptimizedModule"
    assert compiled.train_loss == pytest.approx(eager.train_loss, rel=1e-4)
    for a, b in zip(eager.modules.parameters(), compiled.modules.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_the_optimizer_is_fused_on_cuda():
    brain = train({})
    assert fused_optimizer_options(torch.optim.AdamW, "cuda:0") == {"fused": True}
    assert brain.optimizer.defaults.get("fused") is True


def test_batches_arrive_pinned_and_copy_without_blocking():
    brain = train({})
    assert brain.train_loader.pin_memory is True
    batch = next(iter(brain.train_loader))
    assert batch.sig.data.is_pinned() and batch.sig.lengths.is_pinned()
    moved = batch.to("cuda:0", non_blocking=True)
    torch.cuda.synchronize()
    assert torch.equal(moved.sig.data.cpu(), batch.sig.data)
