"""The shard plan and the shard identity: deterministic, balanced, every item once, clear errors."""
from __future__ import annotations

import json
import random

import pytest

from speechkit.errors import JobError
from speechkit.jobs.identity import resolve_shard
from speechkit.jobs.plan import check_durations, fingerprint, plan_shards, start_or_join


def _durations(count: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    return {f"utt{i:04d}": round(rng.uniform(0.5, 20.0), 2) for i in range(count)}


@pytest.mark.parametrize("num_shards", [1, 2, 7])
def test_plan_holds_every_item_once_balanced_by_duration(num_shards):
    durations = _durations(200)
    shards = plan_shards(durations, num_shards)
    assert len(shards) == num_shards
    assert sorted(i for shard in shards for i in shard) == sorted(durations)
    assert all(shard == sorted(shard) for shard in shards)
    seconds = [sum(durations[i] for i in shard) for shard in shards]
    # Longest-first greedy: no shard exceeds another by more than the longest item.
    assert max(seconds) - min(seconds) <= max(durations.values())
    # Balanced by audio, not by count: shards of short items hold more items.
    assert max(seconds) - min(seconds) < 0.02 * sum(seconds) / num_shards + max(durations.values()) / 10


def test_plan_is_a_function_of_ids_and_durations_only():
    durations = _durations(50, seed=3)
    shuffled = dict(random.Random(1).sample(sorted(durations.items()), len(durations)))
    assert plan_shards(durations, 4) == plan_shards(shuffled, 4)
    assert fingerprint(durations) == fingerprint(shuffled)
    changed = {**durations, "utt0007": durations["utt0007"] + 1}
    assert fingerprint(changed) != fingerprint(durations)


def test_more_shards_than_items_leaves_some_shards_empty():
    assert plan_shards({"a": 1.0, "b": 2.0}, 3) == [["b"], ["a"], []]


@pytest.mark.parametrize("bad", [float("nan"), -1.0, True, "2.0", None])
def test_bad_durations_are_named(bad):
    with pytest.raises(JobError, match=r"m\.json: item 'u2' has duration"):
        check_durations({"u1": 1.0, "u2": bad}, "m.json")
    with pytest.raises(JobError, match="positive integer"):
        plan_shards({"u1": 1.0}, 0)


def test_a_folder_refuses_another_job(tmp_path):
    durations = {"a": 1.0, "b": 2.0}
    spec = {"task": "transcribe", "source": "/m", "fingerprint": fingerprint(durations), "num_shards": 2,
            "task_options": {"audio_field": "wav"}}
    start_or_join(tmp_path, spec, plan_shards(durations, 2), durations, {})
    start_or_join(tmp_path, dict(spec), plan_shards(durations, 2), durations, {})  # the same job joins
    assert json.loads((tmp_path / "plan.json").read_text())["shards"] == [["b"], ["a"]]
    for key, value in (("num_shards", 3), ("task", "encode"), ("task_options", {"audio_field": "flac"}),
                       ("fingerprint", "0" * 32), ("source", "/other")):
        expected = "the manifest's items" if key == "fingerprint" else f"{key}: recorded"
        with pytest.raises(JobError, match=rf"another job \({expected}"):
            start_or_join(tmp_path, {**spec, key: value}, [], durations, {})


TORCHRUN = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "2950", "TORCHELASTIC_RUN_ID": "x"}
SRUN = {"SLURM_PROCID": "1", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "1",
        "SLURM_JOB_NODELIST": "node1", "SLURM_JOB_ID": "7"}


@pytest.mark.parametrize("environ, flags, expected", [
    ({}, {}, (0, 1, 0, "single process")),
    ({}, {"shard": 2, "num_shards": 5}, (2, 5, 0, "flags")),
    (TORCHRUN, {}, (1, 2, 1, "torchrun")),
    (SRUN, {}, (1, 2, 1, "srun")),
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MAX": "9"}, {}, (3, 10, 0, "slurm-array")),
    ({**SRUN, "SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MAX": "9"}, {}, (7, 20, 1, "slurm-array")),
    # A resubmission of some array indices: the count comes from the job folder, not the array's size.
    ({"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MAX": "7"}, {"recorded_num_shards": 10},
     (7, 10, 0, "slurm-array")),
    (TORCHRUN, {"shard": 4, "num_shards": 6}, (4, 6, 1, "flags")),
])
def test_shard_identity_sources(environ, flags, expected):
    assert tuple(resolve_shard(environ=environ, **flags)) == expected


@pytest.mark.parametrize("environ, flags, message", [
    ({}, {"shard": 1}, "--shard 1 needs --num-shards"),
    ({}, {"shard": 5, "num_shards": 5}, r"gives shard 5, outside the job's 5 shards"),
    ({}, {"num_shards": 4, "recorded_num_shards": 3}, "started with 3 shards"),
    ({"SLURM_ARRAY_TASK_ID": "12", "SLURM_ARRAY_TASK_MAX": "12"}, {"recorded_num_shards": 10},
     r"SLURM_ARRAY_TASK_ID=12 gives shard 12, outside"),
    ({"SLURM_ARRAY_TASK_ID": "x"}, {}, "SLURM_ARRAY_TASK_ID='x' is not an integer"),
    (TORCHRUN, {"recorded_num_shards": 3}, "2 processes were started"),
    ({}, {"recorded_num_shards": 3}, "the job has 3 shards and this is one process: pass --shard K"),
    ({"RANK": "0", "WORLD_SIZE": "2"}, {}, "cannot tell which shard"),
])
def test_shard_identity_errors_name_the_source(environ, flags, message):
    with pytest.raises(JobError, match=message):
        resolve_shard(environ=environ, **flags)
