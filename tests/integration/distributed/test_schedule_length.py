"""The LR schedule's length comes from the engine: the same optimizer steps on 1, 2 and 4 processes when
``--grad_accumulation_factor auto`` keeps the global batch fixed; a frozen module stays out of DDP and
unchanged, and the trained head ends the same on every world size."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "scripts" / "schedule_length.py"


def fit(tmp_path: Path, world_size: int, schedule: str, processes, make_env, torchrun_exe) -> list:
    """The records of every rank after a 2-epoch fit on ``world_size`` processes (global batch 8, auto)."""
    out = tmp_path / f"{schedule}-world{world_size}"
    out.mkdir()
    group = processes(timeout=240)
    group.start([torchrun_exe, "--standalone", f"--nproc_per_node={world_size}", str(SCRIPT), str(out),
                 schedule, "--grad_accumulation_factor", "auto", "--global_batch_size", "8"], make_env())
    [(code, output, _)] = group.wait()
    assert code == 0, output
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world_size)]


def test_total_steps_with_auto_accumulation_on_1_2_and_4_processes(tmp_path, processes, make_env,
                                                                    torchrun_exe):
    for world_size in (1, 2, 4):
        records = fit(tmp_path, world_size, "cosine", processes, make_env, torchrun_exe)
        # 24 items, 8 per optimizer step over all processes: 3 steps an epoch, 2 epochs, whatever the world
        # size (counting one step per batch would give 12 / world_size per epoch).
        for record in records:
            assert record["accumulation"] == 4 // world_size
            assert record["counted"] == record["made"] == 6
            assert record["schedule_total"] == 7  # the cosine ends one step after the last update
            assert record["frozen_unchanged"]
            assert record["head"] == records[0]["head"]  # the ranks agree


def test_tri_stage_schedule_spans_the_run_on_2_processes(tmp_path, processes, make_env, torchrun_exe):
    for record in fit(tmp_path, 2, "tristage", processes, make_env, torchrun_exe):
        assert record["accumulation"] == 2
        assert record["counted"] == record["made"] == record["schedule_total"] == 6
        assert record["last_lr"] == pytest.approx(0.1 * 0.05)  # decayed to final_lr_scale x lr_peak
