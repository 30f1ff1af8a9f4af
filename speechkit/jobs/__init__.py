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

from speechkit.lazy_exports import lazy_exports

# name -> module, imported on first use: `speechkit infer --status` must not wait for torch to load.
_LAZY = {
    "JobConfig": "speechkit.jobs.runner",
    "ShardResult": "speechkit.jobs.runner",
    "run_job": "speechkit.jobs.runner",
    "batches_by_duration": "speechkit.jobs.runner",
    "ShardIdentity": "speechkit.jobs.identity",
    "resolve_shard": "speechkit.jobs.identity",
    "Ledger": "speechkit.jobs.ledger",
    "read_ledger": "speechkit.jobs.ledger",
    "merge_job": "speechkit.jobs.merge",
    "plan_shards": "speechkit.jobs.plan",
    "job_status": "speechkit.jobs.status",
    "format_status": "speechkit.jobs.status",
    "TASKS": "speechkit.jobs.registry",
    "Task": "speechkit.jobs.tasks",
    "make_task": "speechkit.jobs.registry",
    "register_task": "speechkit.jobs.registry",
    "task_classes": "speechkit.jobs.registry",
}

__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = sorted(_LAZY)
