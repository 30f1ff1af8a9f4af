"""Mixed precision on a GPU: fp16 with the gradient scaler (a planted overflow skips the step and lowers the
scale; training then converges like fp32) and bf16 autocast."""
from __future__ import annotations

import pytest
import torch

from speechkit.brain import Brain
from speechkit.checkpoints import EpochCounter
from speechkit.engine.optimization import OptimizationStep
from speechkit.engine.precision import Precision
from speechkit.stage import Stage

COLLATE = torch.utils.data.default_collate


class Regression(Brain):
    def compute_forward(self, batch, stage):
        predictions = self.modules.model(batch[0])
        if stage is Stage.TRAIN:
            self.seen_dtype = predictions.dtype
        return predictions

    def compute_objectives(self, predictions, batch, stage):
        return torch.nn.functional.mse_loss(predictions.float(), batch[1])


def regression_data(items=64):
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(items, 8, generator=generator)
    weights = torch.randn(8, 1, generator=generator)
    targets = inputs @ weights + 0.01 * torch.randn(items, 1, generator=generator)
    return torch.utils.data.TensorDataset(inputs, targets)


def trained(precision: str, epochs: int = 30):
    torch.manual_seed(0)
    brain = Regression({"model": torch.nn.Linear(8, 1)}, lambda p: torch.optim.SGD(p, lr=0.05), None,
                       {"noprogressbar": True, "device": "cuda:0", "precision": precision})
    kwargs = {"batch_size": 16, "shuffle": False, "collate_fn": COLLATE}
    initial = brain.evaluate(regression_data(), test_loader_kwargs=kwargs)
    brain.fit(EpochCounter(epochs), regression_data(), train_loader_kwargs=kwargs)
    return brain, initial, brain.evaluate(regression_data(), test_loader_kwargs=kwargs)


def test_fp16_planted_overflow_skips_the_step_and_lowers_the_scale():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1).cuda()
    precision = Precision("fp16", "cuda:0")
    step = OptimizationStep({"opt": torch.optim.SGD(model.parameters(), lr=0.1)}, precision)
    inputs = torch.randn(16, 8, device="cuda")

    def one_step(overflow: bool) -> None:
        with precision.autocast():
            out = model(inputs)
            if overflow:  # what an fp16 overflow in the backward pass leaves in the gradients
                out.register_hook(lambda grad: torch.full_like(grad, float("inf")))
            loss = out.float().pow(2).mean()
        step.backward(loss)
        step.step()

    one_step(overflow=False)
    scale = precision.scaler.get_scale()
    before = [p.detach().clone() for p in model.parameters()]
    one_step(overflow=True)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters())), "an overflowed step updated"
    assert precision.scaler.get_scale() == pytest.approx(scale * 0.5)
    assert step.skipped_total == 0  # routine under fp16: the scaler handles it, nothing counted
    one_step(overflow=False)
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters())), "training did not resume"


def test_fp16_converges_like_fp32():
    fp32, initial, final32 = trained("fp32")
    fp16, _, final16 = trained("fp16")
    assert fp16.seen_dtype == torch.float16 and fp16.precision.scaler is not None
    assert final32 < initial / 20
    assert final16 == pytest.approx(final32, rel=0.05, abs=1e-3)


def test_bf16_autocast_converges_like_fp32():
    _, initial, final32 = trained("fp32")
    bf16, _, final16 = trained("bf16")
    assert bf16.seen_dtype == torch.bfloat16 and bf16.precision.scaler is None
    assert all(p.dtype == torch.float32 for p in bf16.modules.parameters())
    assert final16 < initial / 20
    assert final16 == pytest.approx(final32, rel=0.1, abs=5e-3)
