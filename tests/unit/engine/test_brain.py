"""Brain's training loop: accumulation, precision, non-finite guard, limits, logs, best-checkpoint eval."""

from __future__ import annotations

import itertools

import pytest
import torch

from speechkit.brain import Brain
from speechkit.checkpoints import Checkpointer, EpochCounter
from speechkit.errors import NonFiniteLossError, RunOptionsError
from speechkit.stage import Stage

COLLATE = torch.utils.data.default_collate


def dataset(items=10, dtype=torch.float64):
    generator = torch.Generator().manual_seed(1)
    return torch.utils.data.TensorDataset(
        torch.randn(items, 3, generator=generator, dtype=dtype),
        torch.randn(items, 1, generator=generator, dtype=dtype),
    )


class Regression(Brain):
    """Mean squared error; ``poison(brain, loss)`` may tamper with the training loss."""

    poison = None

    def compute_forward(self, batch, stage):
        self.seen_dtype = self.modules.model(batch[0]).dtype
        return self.modules.model(batch[0])

    def compute_objectives(self, predictions, batch, stage):
        loss = torch.nn.functional.mse_loss(predictions.to(batch[1].dtype), batch[1])
        if stage is Stage.TRAIN and self.poison is not None:
            loss = self.poison(loss)
        return loss


def make_brain(run_opts=None, hparams=None, dtype=torch.float64, checkpointer=None, cls=Regression):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1).to(dtype)
    opts = {"noprogressbar": True, "max_grad_norm": 0.0, **(run_opts or {})}
    return cls({"model": model}, lambda p: torch.optim.SGD(p, lr=0.1), hparams, opts, checkpointer)


def loader_kwargs(batch_size):
    return {"batch_size": batch_size, "shuffle": False, "collate_fn": COLLATE}


@pytest.mark.parametrize("items", [8, 10])  # 10: the epoch ends in the middle of a cycle
def test_accumulating_k_batches_of_b_equals_one_batch_of_k_times_b(items):
    whole = make_brain()
    whole.fit(EpochCounter(2), dataset(items), train_loader_kwargs=loader_kwargs(8))
    accumulated = make_brain({"grad_accumulation_factor": 4})
    accumulated.fit(EpochCounter(2), dataset(items), train_loader_kwargs=loader_kwargs(2))
    assert whole.optimizer_steps == accumulated.optimizer_steps == 2 * -(-items // 8)
    for a, b in zip(whole.modules.parameters(), accumulated.modules.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_bf16_autocast_trains_on_cpu():
    brain = make_brain({"precision": "bf16"}, dtype=torch.float32)
    data = dataset(32, torch.float32)
    before = brain.evaluate(data, test_loader_kwargs=loader_kwargs(8))
    brain.fit(EpochCounter(5), data, train_loader_kwargs=loader_kwargs(8))
    assert brain.seen_dtype == torch.bfloat16  # the forward really ran in bf16
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in brain.modules.parameters())
    assert brain.evaluate(data, test_loader_kwargs=loader_kwargs(8)) < before


def test_fp16_without_cuda_is_refused_clearly():
    with pytest.raises(RunOptionsError, match="fp16 needs a CUDA device"):
        make_brain({"precision": "fp16", "device": "cpu"})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="fp16 with a gradient scaler needs CUDA")
def test_fp16_with_gradient_scaler_trains_on_cuda():
    brain = make_brain({"precision": "fp16", "device": "cuda"}, dtype=torch.float32)
    data = dataset(32, torch.float32)
    before = brain.evaluate(data, test_loader_kwargs=loader_kwargs(8))
    brain.fit(EpochCounter(5), data, train_loader_kwargs=loader_kwargs(8))
    assert brain.seen_dtype == torch.float16 and brain.precision.scaler is not None
    assert brain.evaluate(data, test_loader_kwargs=loader_kwargs(8)) < before


def _scale_batch(number, factor):
    """A poison multiplying the loss of training batch ``number`` (counted from 1) by ``factor``."""
    batches = itertools.count(1)
    return staticmethod(lambda loss: loss * factor if next(batches) == number else loss)


def test_planted_nan_loss_never_reaches_the_weights():
    class Zeroed(Regression):  # the reference run: batch 2 contributes nothing (plain SGD: no update)
        poison = _scale_batch(2, 0.0)

    class Planted(Regression):
        poison = _scale_batch(2, float("nan"))

    reference, planted = make_brain(cls=Zeroed), make_brain({"nonfinite_patience": 1}, cls=Planted)
    reference.fit(EpochCounter(1), dataset(8), train_loader_kwargs=loader_kwargs(2))
    planted.fit(EpochCounter(1), dataset(8), train_loader_kwargs=loader_kwargs(2))
    assert planted.optimization.skipped_total == 1
    for a, b in zip(reference.modules.parameters(), planted.modules.parameters()):
        assert torch.isfinite(b).all()
        torch.testing.assert_close(a, b)


def test_nonfinite_losses_beyond_patience_raise_with_weights_untouched():
    class AlwaysNaN(Regression):
        poison = staticmethod(lambda loss: loss * float("inf"))

    brain = make_brain({"nonfinite_patience": 2}, cls=AlwaysNaN)
    initial = [p.detach().clone() for p in brain.modules.parameters()]
    with pytest.raises(NonFiniteLossError, match="3 optimizer steps in a row.*nonfinite_patience 2"):
        brain.fit(EpochCounter(1), dataset(10), train_loader_kwargs=loader_kwargs(2))
    assert all(torch.equal(a, b) for a, b in zip(initial, brain.modules.parameters()))


def test_skip_nonfinite_grads_skips_a_finite_loss_with_infinite_gradient():
    class InfiniteGradient(Regression):  # sqrt at 0: value 0, gradient inf
        poison = staticmethod(lambda loss: loss + torch.sqrt(loss - loss.detach()))

    brain = make_brain({"skip_nonfinite_grads": True, "nonfinite_patience": 10}, cls=InfiniteGradient)
    initial = [p.detach().clone() for p in brain.modules.parameters()]
    brain.fit(EpochCounter(1), dataset(4), train_loader_kwargs=loader_kwargs(2))
    assert brain.optimization.skipped_total == 2
    assert all(torch.equal(a, b) for a, b in zip(initial, brain.modules.parameters()))


def test_optimizer_step_limit_and_debug_limits():
    brain = make_brain({"optimizer_step_limit": 3})
    brain.fit(EpochCounter(4), dataset(10), train_loader_kwargs=loader_kwargs(2))
    assert brain.optimizer_steps == 3
    debug = make_brain({"debug": True, "debug_batches": 2, "debug_epochs": 2})
    counter = EpochCounter(10)
    debug.fit(counter, dataset(10), train_loader_kwargs=loader_kwargs(2))
    assert debug.optimizer_steps == 4 and counter.current == 2


def test_test_only_skips_training():
    brain = make_brain({"test_only": True})
    initial = [p.detach().clone() for p in brain.modules.parameters()]
    brain.fit(EpochCounter(2), dataset(8), train_loader_kwargs=loader_kwargs(2))
    assert brain.optimizer_steps == 0
    assert all(torch.equal(a, b) for a, b in zip(initial, brain.modules.parameters()))


def test_auto_accumulation_from_global_batch_size():
    brain = make_brain({"grad_accumulation_factor": "auto", "global_batch_size": 8})
    brain.fit(EpochCounter(1), dataset(8), train_loader_kwargs=loader_kwargs(2))
    assert brain.optimization.accumulation == 4 and brain.optimizer_steps == 1
    bad = make_brain({"grad_accumulation_factor": "auto", "global_batch_size": 7})
    with pytest.raises(
        RunOptionsError, match="global_batch_size 7 is not a multiple of world size 1 x batch_size 2"
    ):
        bad.fit(EpochCounter(1), dataset(8), train_loader_kwargs=loader_kwargs(2))


def test_a_global_batch_alone_derives_the_accumulation_and_a_fixed_factor_with_it_is_refused():
    brain = make_brain({"global_batch_size": 8})  # no --grad_accumulation_factor: auto is implied
    brain.fit(EpochCounter(1), dataset(8), train_loader_kwargs=loader_kwargs(2))
    assert brain.optimization.accumulation == 4 and brain.optimizer_steps == 1
    assert brain.run_opts.accumulation_is_auto
    conflicting = make_brain({"grad_accumulation_factor": 2, "global_batch_size": 8})
    with pytest.raises(RunOptionsError, match="grad_accumulation_factor 2 and global_batch_size 8 both set"):
        conflicting.fit(EpochCounter(1), dataset(8), train_loader_kwargs=loader_kwargs(2))
    assert conflicting.optimizer_steps == 0
    plain = make_brain()  # neither: one micro-batch per step
    plain.fit(EpochCounter(1), dataset(8), train_loader_kwargs=loader_kwargs(2))
    assert plain.optimization.accumulation == 1 and plain.optimizer_steps == 4


def test_stage_summaries_in_train_log_and_item_weighted_loss(tmp_path):
    brain = make_brain(hparams={"output_folder": str(tmp_path)})
    brain.fit(
        EpochCounter(2),
        dataset(10),
        dataset(5),
        train_loader_kwargs=loader_kwargs(4),
        valid_loader_kwargs=loader_kwargs(4),
    )
    lines = (tmp_path / "train_log.txt").read_text().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("epoch: 1 | stage: train | lr: 0.1 | loss: ") and "duration: " in lines[0]
    assert lines[3].startswith("epoch: 2 | stage: valid | loss: ")
    # batches of 4 and 1 items: the stage loss is the mean over items, not over batches
    data = dataset(5)
    model = brain.modules.model
    with torch.no_grad():
        expected = torch.nn.functional.mse_loss(model(data.tensors[0]), data.tensors[1]).item()
    assert brain.evaluate(data, test_loader_kwargs=loader_kwargs(4)) == pytest.approx(expected, rel=1e-9)


def test_evaluate_loads_the_best_checkpoint_and_intra_epoch_checkpoints_are_written(tmp_path):
    snapshots = {}

    class Scored(Regression):
        def on_stage_end(self, stage, stage_loss, epoch=None):
            if stage is Stage.TRAIN:
                intra = [c for c in self.checkpointer.list_checkpoints() if not c.end_of_epoch]
                assert len(intra) == 1  # saved every 2 steps, the older ones replaced
            if stage is Stage.VALID:  # a recipe's own save replaces the automatic one
                snapshots[epoch] = self.modules.model.weight.detach().clone()
                score = [0.5, 0.1, 0.9][epoch - 1]
                self.checkpointer.save_and_keep_only(meta={"score": score}, min_keys=["score"])

    brain = make_brain({"ckpt_interval_steps": 2}, cls=Scored)
    brain.checkpointer = Checkpointer(tmp_path, {"model": brain.modules.model})
    brain.fit(
        EpochCounter(3),
        dataset(10),
        dataset(4),
        train_loader_kwargs=loader_kwargs(2),
        valid_loader_kwargs=loader_kwargs(4),
    )
    kept = brain.checkpointer.list_checkpoints()
    assert [c.meta["score"] for c in kept] == [0.1, 0.9]  # the best and the newest; intra-epoch ones gone
    brain.evaluate(dataset(4), min_key="score", test_loader_kwargs=loader_kwargs(4))
    assert torch.equal(brain.modules.model.weight, snapshots[2])
    brain.evaluate(dataset(4), max_key="score", test_loader_kwargs=loader_kwargs(4))
    assert torch.equal(brain.modules.model.weight, snapshots[3])


def test_sigterm_during_validation_saves_the_epoch_and_exits_with_the_preemption_code(tmp_path):
    import os
    import signal

    from speechkit.errors import EXIT_PREEMPTED

    class Preempted(Regression):
        def compute_forward(self, batch, stage):
            if stage is Stage.VALID and not getattr(self, "signalled", False):
                self.signalled = True
                os.kill(os.getpid(), signal.SIGTERM)
            return super().compute_forward(batch, stage)

    brain = make_brain(cls=Preempted)
    brain.checkpointer = Checkpointer(tmp_path, {"model": brain.modules.model})
    counter = EpochCounter(3)
    with pytest.raises(SystemExit) as stopped:
        brain.fit(counter, dataset(8), dataset(4), loader_kwargs(2), loader_kwargs(4))
    assert stopped.value.code == EXIT_PREEMPTED
    assert signal.getsignal(signal.SIGTERM) != brain.preemption._on_signal  # handlers given back
    saved = brain.checkpointer.find_checkpoint()
    assert saved.end_of_epoch and saved.info["epoch"] == 1

    resumed = make_brain()
    resumed.checkpointer = Checkpointer(tmp_path, {"model": resumed.modules.model})
    resumed_counter = EpochCounter(3)
    resumed.fit(resumed_counter, dataset(8), dataset(4), loader_kwargs(2), loader_kwargs(4))
    assert resumed.optimizer_steps == 3 * 4  # epochs 2 and 3 continue the 4 steps of epoch 1


@pytest.mark.slow  # torch.compile takes seconds to build its kernels
def test_compiled_training_matches_eager_training():
    eager, compiled = make_brain(dtype=torch.float32), make_brain({"compile": True}, dtype=torch.float32)
    for brain in (eager, compiled):
        brain.fit(EpochCounter(1), dataset(8, torch.float32), train_loader_kwargs=loader_kwargs(4))
    assert type(compiled._wrapped["model"]).__name__ == "OptimizedModule"
    for a, b in zip(eager.modules.parameters(), compiled.modules.parameters()):
        torch.testing.assert_close(a, b)
