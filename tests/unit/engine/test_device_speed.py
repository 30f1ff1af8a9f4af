"""The GPU speed choices, checked on CPU: fused optimizers only where they exist, the compile mode, padding
to few shapes, and the deferred (synchronisation-free) loss sums and checks giving the same results."""

from __future__ import annotations

import functools
import math

import pytest
import torch

from speechkit.data.loader import make_dataloader
from speechkit.engine.device_speed import compile_options, fused_optimizer_options, loader_options_for
from speechkit.engine.optimization import OptimizationStep
from speechkit.engine.precision import Precision
from speechkit.engine.progress import StageStats
from speechkit.errors import DataError, NonFiniteLossError, RunOptionsError


class HomeMadeOptimizer(torch.optim.SGD):
    def __init__(self, params, lr=0.1):
        super().__init__(params, lr=lr)


@pytest.mark.parametrize(
    "opt_class, device, expected",
    [
        (functools.partial(torch.optim.AdamW, lr=1e-3), "cuda:0", {"fused": True}),
        (functools.partial(torch.optim.Adam, lr=1e-3), "cuda", {"fused": True}),
        (functools.partial(torch.optim.AdamW, lr=1e-3), "cpu", {}),
        (functools.partial(torch.optim.AdamW, lr=1e-3, fused=False), "cuda:0", {}),  # the recipe chose
        (functools.partial(torch.optim.AdamW, lr=1e-3, foreach=True), "cuda:0", {}),
        (functools.partial(HomeMadeOptimizer, lr=0.1), "cuda:0", {}),  # no fused argument
        (lambda params: torch.optim.AdamW(params), "cuda:0", {}),  # cannot tell: leave it alone
    ],
)
def test_fused_optimizer_only_where_a_fused_kernel_exists(opt_class, device, expected):
    assert fused_optimizer_options(opt_class, device) == expected


def test_pinned_memory_only_on_cuda_and_the_recipe_choice_wins():
    assert loader_options_for("cpu", {"batch_size": 2}) == {"batch_size": 2}
    assert loader_options_for("cuda:1", {"batch_size": 2}) == {"batch_size": 2, "pin_memory": True}
    assert loader_options_for("cuda", {"pin_memory": False}) == {"pin_memory": False}


def test_compile_mode_options():
    assert compile_options(None) == compile_options("default") == {}
    assert compile_options("reduce-overhead") == {"mode": "reduce-overhead"}
    with pytest.raises(RunOptionsError, match="--compile_mode 'fast'"):
        compile_options("fast")


def test_pad_to_multiple_gives_few_shapes_and_exact_lengths():
    items = [{"id": str(n), "sig": torch.ones(n)} for n in (3, 9, 17, 30, 31, 33)]
    loader = make_dataloader(items, "test", batch_size=2, pad_to_multiple=16)
    batches = list(loader)
    assert [tuple(b.sig.data.shape) for b in batches] == [(2, 16), (2, 32), (2, 48)]
    assert [b.sig.lengths.tolist() for b in batches] == [[3, 9], [17, 30], [31, 33]]
    for batch in batches:  # the padding is zeros, the valid part untouched
        assert batch.sig.data.sum().item() == batch.sig.lengths.sum().item()


@pytest.mark.parametrize("value", [0, -4, 2.5, True, "8"])
def test_pad_to_multiple_refuses_bad_values(value):
    with pytest.raises(DataError, match="pad_to_multiple must be an int >= 1"):
        make_dataloader([{"sig": torch.ones(2)}], "test", pad_to_multiple=value)


def test_pad_to_multiple_with_a_custom_collate_is_refused():
    with pytest.raises(DataError, match="pad_to_multiple applies to the default collate"):
        make_dataloader([{"sig": torch.ones(2)}], "test", pad_to_multiple=8, collate_fn=list)


def test_deferred_stage_sums_equal_the_eager_ones():
    losses = [0.5, float("nan"), 2.0, float("inf"), 1.25]
    items = [3, 2, 1, 4, 5]
    eager, deferred = StageStats(), StageStats(defer_reads=True)
    for loss, count in zip(losses, items):
        eager.update(loss, count)
        deferred.update(torch.tensor(loss), count)
    assert deferred._device_sums is not None  # nothing read back yet
    assert math.isclose(deferred.average, eager.average, rel_tol=1e-12)
    assert deferred.items == eager.items == 9 and deferred.processed == 15
    restored = StageStats()
    restored.load_state_dict(deferred.state_dict())
    assert math.isclose(restored.average, eager.average, rel_tol=1e-12) and restored.processed == 15


def _train(poisoned_steps, defer, steps=4, accumulation=2, patience=3, max_grad_norm=0.0):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    step = OptimizationStep({"opt": torch.optim.SGD(model.parameters(), lr=0.1)}, Precision("fp32", "cpu"),
                            accumulation=accumulation, max_grad_norm=max_grad_norm,
                            nonfinite_patience=patience, defer_checks=defer)
    generator = torch.Generator().manual_seed(1)
    for number in range(steps * accumulation):
        loss = model(torch.randn(4, 3, generator=generator)).pow(2).mean()
        if number // accumulation in poisoned_steps and number % accumulation == 1:
            loss = loss * float("nan")
        final = step.is_final_micro_batch()
        step.backward(loss)
        if final:
            step.step()
    return model, step


@pytest.mark.parametrize("max_grad_norm", [0.0, 0.5])
def test_deferred_loss_check_skips_the_same_steps_as_the_immediate_one(max_grad_norm):
    immediate, immediate_step = _train({1, 2}, defer=False, max_grad_norm=max_grad_norm)
    deferred, deferred_step = _train({1, 2}, defer=True, max_grad_norm=max_grad_norm)
    assert immediate_step.skipped_total == deferred_step.skipped_total == 2
    for a, b in zip(immediate.parameters(), deferred.parameters()):
        assert torch.isfinite(b).all()
        torch.testing.assert_close(a, b)


def test_deferred_loss_check_still_stops_after_the_patience():
    with pytest.raises(NonFiniteLossError, match="3 optimizer steps in a row"):
        _train({0, 1, 2}, defer=True, patience=2)
