"""The LR schedule's length comes from the engine: the same optimizer steps on 1, 2 and 4 processes when
``--grad_accumulation_factor auto`` keeps the global batch fixed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "scripts" / "schedule_length.py"


@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_total_steps_with_auto_accumulation(tmp_path, processes, make_env, torchrun_exe, world_size):
    group = processes(timeout=240)
    group.start([torchrun_exe, "--standalone", f"--nproc_per_node={world_size}", str(SCRIPT), str(tmp_path),
                 "--grad_accumulation_factor", "auto", "--global_batch_size", "8"], make_env())
    [(code, output, _)] = group.wait()
    assert code == 0, output
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world_size)]
    # 24 items, 8 per optimizer step over all processes: 3 steps an epoch, 2 epochs, whatever the world size
    # (counting one step per batch would give 12 / world_size per epoch).
    for record in records:
        assert record["accumulation"] == 4 // world_size
        assert record["counted"] == record["made"] == 6
        assert record["schedule_total"] == 7  # the cosine ends one step after the last update
