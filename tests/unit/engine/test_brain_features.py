"""Brain features recipes used to write by hand: trainable_modules, the schedule's length, the batch hooks,
run options instead of hidden hparams keys, TensorBoard event files."""
from __future__ import annotations

import pytest
import torch

from speechkit.brain import Brain
from speechkit.checkpoints import Checkpointer, EpochCounter
from speechkit.engine.schedulers import (
    NewBobScheduler,
    NoamScheduler,
    TriStageScheduler,
    WarmupCosineScheduler,
)
from speechkit.errors import HparamsError

COLLATE = torch.utils.data.default_collate
LOADER = {"batch_size": 2, "shuffle": False, "collate_fn": COLLATE}


def dataset(items=10):
    generator = torch.Generator().manual_seed(1)
    return torch.utils.data.TensorDataset(torch.randn(items, 3, generator=generator),
                                          torch.randn(items, 1, generator=generator))


class TwoStage(Brain):
    """frozen -> head; records the training mode of both modules and the hook calls."""

    def compute_forward(self, batch, stage):
        self.modes = (self.modules.frozen.training, self.modules.head.training)
        return self.modules.head(self.modules.frozen(batch[0]))

    def compute_objectives(self, predictions, batch, stage):
        return torch.nn.functional.mse_loss(predictions, batch[1])


def two_stage(trainable=None, hparams=None, run_opts=None, **kwargs):
    torch.manual_seed(0)
    modules = {"frozen": torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.5)),
               "head": torch.nn.Linear(4, 1)}
    opts = {"noprogressbar": True, **(run_opts or {})}
    optimizer = lambda params: torch.optim.AdamW(params, lr=0.1, weight_decay=0.5)  # noqa: E731
    return TwoStage(modules, optimizer, hparams, opts, trainable_modules=trainable, **kwargs)


def test_frozen_modules_stay_bit_identical_in_eval_mode_and_out_of_the_optimizer():
    brain = two_stage(trainable=["head"])
    before = {k: v.clone() for k, v in brain.modules.frozen.state_dict().items()}
    head_before = brain.modules.head.weight.clone()
    brain.fit(EpochCounter(2), dataset(), train_loader_kwargs=LOADER)
    for key, value in brain.modules.frozen.state_dict().items():
        assert torch.equal(value, before[key])  # weight decay never touched it either
    assert not torch.equal(brain.modules.head.weight, head_before)
    assert brain.modes == (False, True)  # frozen: dropout off while training
    optimized = {id(p) for group in brain.optimizer.param_groups for p in group["params"]}
    assert optimized == {id(p) for p in brain.modules.head.parameters()}
    assert brain.trainable_modules == frozenset({"head"})


def test_trainable_modules_from_hparams_and_unknown_names():
    brain = two_stage(hparams={"trainable_modules": ["frozen"]})
    assert brain.trainable_modules == frozenset({"frozen"})
    assert not any(p.requires_grad for p in brain.modules.head.parameters())
    with pytest.raises(HparamsError, match="unknown modules \\['decoder'\\]"):
        two_stage(trainable=["head", "decoder"])


def test_all_modules_learn_by_default():
    brain = two_stage()
    assert brain.trainable_modules == frozenset({"frozen", "head"})
    brain.fit(EpochCounter(1), dataset(), train_loader_kwargs=LOADER)
    assert brain.modes == (True, True)


class Hooked(TwoStage):
    def on_fit_batch_start(self, batch):
        self.calls.append(("start", len(batch[0])))

    def on_fit_batch_end(self, batch, outputs, loss, should_step):
        assert outputs.shape == (len(batch[0]), 1) and not loss.requires_grad
        self.calls.append(("end", should_step))


def test_fit_batch_hooks_see_every_batch_and_whether_the_optimizer_stepped():
    torch.manual_seed(0)
    brain = Hooked({"frozen": torch.nn.Linear(3, 4), "head": torch.nn.Linear(4, 1)},
                   lambda p: torch.optim.SGD(p, lr=0.1), None,
                   {"noprogressbar": True, "grad_accumulation_factor": 2})
    brain.calls = []
    brain.fit(EpochCounter(1), dataset(10), train_loader_kwargs=LOADER)  # 5 batches: steps after 2, 4, 5
    ends = [flag for kind, flag in brain.calls if kind == "end"]
    assert [kind for kind, _ in brain.calls] == ["start", "end"] * 5
    assert ends == [False, True, False, True, True]
    assert brain.optimizer_steps == 3


@pytest.mark.parametrize("accumulation, expected", [(1, 10), (2, 6), (4, 4)])  # 5 batches an epoch, 2 epochs
def test_the_schedule_gets_the_run_length_in_optimizer_steps(accumulation, expected):
    schedule = WarmupCosineScheduler(lr_peak=0.1, warmup_steps=100, lr_min=0.0)
    brain = two_stage(run_opts={"grad_accumulation_factor": accumulation}, lr_scheduler=schedule)
    brain.fit(EpochCounter(2), dataset(10), train_loader_kwargs=LOADER)
    assert brain.total_optimizer_steps == brain.optimizer_steps == expected
    assert schedule.total_steps == expected + 1
    assert schedule.warmup_steps == max(1, (expected + 1) // 4)  # a short run shortens the warmup
    assert schedule.steps == expected


@pytest.mark.parametrize("accumulation, expected", [
    (2, 6),  # 5 batches an epoch, 2 epochs: steps after batches 2, 4 and 5 of each
    ("auto", 4),  # global batch 8 of loader batches of 2: 4 micro-batches a step, the last one shorter
])
def test_tri_stage_gets_its_phases_from_the_run_length(accumulation, expected):
    schedule = TriStageScheduler(lr_peak=0.1, phase_ratio=(0.25, 0.25, 0.5))
    opts = {"grad_accumulation_factor": accumulation}
    if accumulation == "auto":
        opts["global_batch_size"] = 8
    brain = two_stage(run_opts=opts, lr_scheduler=schedule)
    brain.fit(EpochCounter(2), dataset(10), train_loader_kwargs=LOADER)
    assert brain.total_optimizer_steps == brain.optimizer_steps == schedule.total_steps == expected
    reference = TriStageScheduler(lr_peak=0.1, total_steps=expected, phase_ratio=(0.25, 0.25, 0.5))
    assert schedule.steps == expected and schedule.current_lr() == pytest.approx(0.1 * 0.05)
    steps = range(expected + 2)
    assert [schedule.lr_for(s) for s in steps] == [reference.lr_for(s) for s in steps]
    with pytest.raises(ValueError, match="no total_steps"):
        TriStageScheduler(lr_peak=0.1).current_lr()


def test_a_given_total_is_kept_and_the_step_limit_caps_the_count():
    schedule = WarmupCosineScheduler(lr_peak=0.1, warmup_steps=2, total_steps=50)
    brain = two_stage(run_opts={"optimizer_step_limit": 3}, lr_scheduler=schedule)
    brain.fit(EpochCounter(2), dataset(10), train_loader_kwargs=LOADER)
    assert brain.total_optimizer_steps == 3 and schedule.total_steps == 50


@pytest.mark.parametrize("make", [
    lambda: WarmupCosineScheduler(lr_peak=0.1, warmup_steps=2),
    lambda: NoamScheduler(lr_initial=0.1, n_warmup_steps=2),
    lambda: NewBobScheduler(initial_value=0.1),
    lambda: TriStageScheduler(lr_peak=0.1),
], ids=["cosine", "noam", "newbob", "tristage"])
def test_every_builtin_schedule_resumes_on_the_same_trajectory(tmp_path, make):
    class Interrupted(Exception):
        pass

    def run(folder, stop_at_batch=None):
        schedule = make()
        brain = two_stage(lr_scheduler=schedule)
        brain.checkpointer = Checkpointer(folder, dict(brain.modules))
        if stop_at_batch:  # the process dies at the start of epoch 2 (epoch 1's checkpoint is on disk)
            def crash(batch):
                if brain.optimizer_steps + 1 == stop_at_batch:
                    raise Interrupted
            brain.on_fit_batch_start = crash
        brain.fit(EpochCounter(3), dataset(10), dataset(4), train_loader_kwargs=LOADER,
                  valid_loader_kwargs=LOADER)
        return brain, schedule

    whole, whole_schedule = run(tmp_path / "whole")
    with pytest.raises(Interrupted):
        run(tmp_path / "resumed", stop_at_batch=7)
    resumed, resumed_schedule = run(tmp_path / "resumed")
    assert resumed_schedule.steps == whole_schedule.steps
    assert resumed.optimizer.param_groups[0]["lr"] == whole.optimizer.param_groups[0]["lr"]
    assert torch.equal(resumed.modules.head.weight, whole.modules.head.weight)


def test_former_hidden_hparams_keys_are_run_options(tmp_path):
    brain = two_stage(hparams={"ckpt_keep": 2, "train_log": str(tmp_path / "log.txt"), "seed": 7,
                               "compile_modules": ["head"]})
    assert (brain.run_opts.ckpt_keep, brain.run_opts.seed) == (2, 7)
    assert brain.run_opts.compile_modules == ["head"]
    brain.fit(EpochCounter(1), dataset(), train_loader_kwargs=LOADER)
    assert "stage: train" in (tmp_path / "log.txt").read_text()


def test_tensorboard_event_file_holds_step_and_stage_values(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    class WithExamples(TwoStage):
        def on_stage_end(self, stage, stage_loss, epoch=None):
            self.tensorboard.audio("valid/audio", torch.zeros(800), sample_rate=8000, step=epoch or 0)
            self.tensorboard.spectrogram("valid/spectrogram", torch.rand(20, 8), step=epoch or 0)
            return {"score": 0.25}

    torch.manual_seed(0)
    brain = WithExamples({"frozen": torch.nn.Linear(3, 4), "head": torch.nn.Linear(4, 1)},
                         lambda p: torch.optim.SGD(p, lr=0.1), {"tensorboard": str(tmp_path / "tb")},
                         {"noprogressbar": True})
    brain.fit(EpochCounter(2), dataset(10), dataset(4), train_loader_kwargs=LOADER,
              valid_loader_kwargs=LOADER)
    brain.tensorboard.close()
    events = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0, "images": 0, "audio": 0})
    events.Reload()
    steps = events.Scalars("train/step_loss")
    assert [e.step for e in steps] == list(range(1, 11))
    assert [e.value for e in events.Scalars("train/lr")] == pytest.approx([0.1] * 10)
    assert [e.step for e in events.Scalars("valid/loss")] == [1, 2]
    assert [e.value for e in events.Scalars("valid/score")] == [0.25, 0.25]
    assert events.Tags()["images"] == ["valid/spectrogram"] and events.Tags()["audio"] == ["valid/audio"]
