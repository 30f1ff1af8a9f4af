"""Sharded batch jobs over a manifest: run a model folder's interface on every item, survive preemption.

A job is a folder: the shard plan (``job.json``, ``plan.json``), one ledger of finished items per shard, one
output file per item (for tasks that make files), and the merged results. See docs/jobs.md.

Example:
    >>> from speechkit.jobs import JobConfig, run_job, job_status, merge_job
    >>> config = JobConfig("models/asr", "archive.json", "out/archive", shard=0, num_shards=8)
    >>> run_job(config).exit_code                                                 # doctest: +SKIP
    0
    >>> job_status("out/archive")["done"]                                         # doctest: +SKIP
    12000
"""
from __future__ import annotations

from speechkit.jobs.identity import ShardIdentity, resolve_shard
from speechkit.jobs.ledger import Ledger, read_ledger
from speechkit.jobs.merge import merge_job
from speechkit.jobs.plan import plan_shards
from speechkit.jobs.runner import JobConfig, ShardResult, batches_by_duration, run_job
from speechkit.jobs.status import format_status, job_status
from speechkit.jobs.tasks import TASKS, Task, make_task, register_task

__all__ = ["JobConfig", "Ledger", "ShardIdentity", "ShardResult", "TASKS", "Task", "batches_by_duration",
           "format_status", "job_status", "make_task", "merge_job", "plan_shards", "read_ledger",
           "register_task", "resolve_shard", "run_job"]
