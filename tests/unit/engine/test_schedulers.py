"""Learning-rate schedules: their shapes, recovery, and use from YAML through Brain."""

from __future__ import annotations

import textwrap

import pytest
import torch

from speechkit.engine.schedulers import NewBobScheduler, NoamScheduler, WarmupCosineScheduler
from speechkit.experiment.hparams import load_hparams


def optimizer(lr=1.0):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def rates(scheduler, steps):
    opt = optimizer()
    scheduler.apply(opt)
    out = [opt.param_groups[0]["lr"]]
    for _ in range(steps):
        out.append(scheduler.step(opt)[1])
    return out


def test_noam_warms_up_linearly_peaks_then_decays_as_inverse_sqrt():
    lrs = rates(NoamScheduler(lr_initial=2.0, n_warmup_steps=4), 15)
    assert lrs[:4] == pytest.approx([0.5, 1.0, 1.5, 2.0])
    assert lrs[15] == pytest.approx(2.0 * (4 / 16) ** 0.5)
    assert max(lrs) == pytest.approx(2.0)


def test_warmup_cosine_reaches_peak_then_minimum():
    lrs = rates(WarmupCosineScheduler(lr_peak=1.0, warmup_steps=2, total_steps=6, lr_min=0.1), 8)
    assert lrs[:2] == pytest.approx([0.5, 1.0])
    assert lrs[3] == pytest.approx(0.1 + 0.9 * 0.5)
    assert lrs[5:] == pytest.approx([0.1] * 4)


def test_newbob_anneals_after_patience_without_improvement():
    opt = optimizer()
    sched = NewBobScheduler(initial_value=1.0, annealing_factor=0.5, patience=1)
    new = [sched.step(opt, metric)[1] for metric in (1.0, 0.5, 0.5, 0.5, 0.49999, 0.2)]
    assert new == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5]
    assert opt.param_groups[0]["lr"] == 0.5
    with pytest.raises(ValueError, match="metric"):
        sched.step(opt)


def test_state_dict_resumes_the_same_schedule():
    first = NoamScheduler(1.0, 5)
    opt = optimizer()
    for _ in range(7):
        first.step(opt)
    second = NoamScheduler(1.0, 5)
    second.load_state_dict(first.state_dict())
    assert rates(second, 3) == rates(first, 3)


def test_scheduler_from_yaml_is_stepped_per_batch_by_brain(tmp_path):
    from speechkit.brain import Brain
    from speechkit.checkpoints import EpochCounter

    path = tmp_path / "hp.yaml"
    path.write_text(
        textwrap.dedent("""\
        lr_scheduler: !new:speechkit.schedulers.NoamScheduler
            lr_initial: 1.0
            n_warmup_steps: 10
        """)
    )
    hparams = load_hparams(path)

    class Fit(Brain):
        def compute_forward(self, batch, stage):
            return self.modules.model(batch[0])

        def compute_objectives(self, predictions, batch, stage):
            return predictions.pow(2).mean()

    brain = Fit(
        {"model": torch.nn.Linear(2, 1)},
        lambda p: torch.optim.SGD(p, lr=123.0),
        hparams,
        {"noprogressbar": True},
    )
    data = torch.utils.data.TensorDataset(torch.randn(6, 2))
    brain.fit(
        EpochCounter(1),
        data,
        train_loader_kwargs={"batch_size": 2, "collate_fn": torch.utils.data.default_collate},
    )
    assert hparams["lr_scheduler"].steps == 3
    assert brain.optimizer.param_groups[0]["lr"] == pytest.approx(0.4)  # the rate for step 4


def test_tri_stage_warms_up_holds_and_decays_exponentially():
    from speechkit.engine.schedulers import TriStageScheduler

    sched = TriStageScheduler(lr_peak=1e-3, total_steps=100, phase_ratio=(0.1, 0.4, 0.5))
    rates = [sched.lr_for(step) for step in range(120)]
    assert rates[0] == pytest.approx(1e-5) and rates[10] == pytest.approx(1e-3)
    assert all(rate == pytest.approx(1e-3) for rate in rates[10:50])
    decay = rates[50:100]
    assert all(later < earlier for earlier, later in zip(decay, decay[1:]))
    ratios = [later / earlier for earlier, later in zip(decay, decay[1:])]
    assert max(ratios) == pytest.approx(min(ratios))  # a constant factor: exponential
    assert rates[99] == pytest.approx(5e-5) and rates[119] == pytest.approx(5e-5)
    with pytest.raises(ValueError, match="phase_ratio"):
        TriStageScheduler(1.0, 10, phase_ratio=(0.5, 0.5, 0.5))
