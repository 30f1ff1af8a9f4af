"""Two processes with dropout, preempted mid-epoch and resumed, end exactly where an unstopped run ends."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

SCRIPTS = Path(__file__).parent / "scripts"
pytestmark = pytest.mark.slow


def _losses(out) -> list:
    lines = (out / "train_log.txt").read_text().splitlines()
    return [part for line in lines for part in line.split(" | ") if part.startswith(("epoch", "loss"))]


def _torchrun(processes, make_env, torchrun_exe, out, stop_at: int) -> tuple:
    group = processes(timeout=240)
    group.start([torchrun_exe, "--standalone", "--nproc_per_node=2", str(SCRIPTS / "dropout_train.py"),
                 str(out), str(stop_at)], make_env())
    [(code, output, _)] = group.wait()
    return code, output


def test_sigterm_then_resume_on_two_ranks_matches_the_unstopped_run(tmp_path, processes, make_env,
                                                                    torchrun_exe):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    code, output = _torchrun(processes, make_env, torchrun_exe, straight, 0)
    assert code == 0, output

    # Batch 9 of 6-batch epochs: in the middle of epoch 2.
    code, output = _torchrun(processes, make_env, torchrun_exe, resumed, 9)
    assert code != 0 and "exitcode  : 75" in output, output
    assert not (resumed / "final.pt").exists() and list((resumed / "save").glob("CKPT+*")), output
    code, output = _torchrun(processes, make_env, torchrun_exe, resumed, 9)
    assert code == 0, output

    # The epoch's loss averages every rank's items, those before the stop included.
    assert _losses(resumed) == _losses(straight), (_losses(resumed), _losses(straight))
    expected = torch.load(straight / "final.pt", weights_only=True)
    actual = torch.load(resumed / "final.pt", weights_only=True)
    for name in expected:
        assert torch.equal(expected[name], actual[name]), (name, (expected[name] - actual[name]).abs().max())
