"""Merge a finished job: check every planned item is done exactly once, then write the final results.

The merge reads only the job folder (``job.json``, ``plan.json``, the ledgers and the outputs). It refuses,
with a :class:`~speechkit.errors.JobError` naming the items and shards, a job where an item is missing, was
recorded by two shards (or twice by one), was recorded by a shard it was not planned in, is not in the plan,
or has a missing or damaged output file. Otherwise the task writes its results sorted by id (see
:mod:`speechkit.jobs.tasks`) and ``summary.json`` is written. Merging twice gives the same files.

Example::

    speechkit infer --merge out/archive
"""
from __future__ import annotations

import fcntl
import json
import logging
from pathlib import Path
from typing import Union

from speechkit.errors import JobError
from speechkit.jobs.ledger import finished_marker, ledger_path, read_ledger
from speechkit.jobs.outputs import output_is_intact, record_files, write_atomic
from speechkit.jobs.plan import load_job
from speechkit.jobs.registry import make_task

logger = logging.getLogger(__name__)
SHOWN = 5  # ids named in an error message


def all_shards_finished(folder: Union[str, Path], num_shards: int) -> bool:
    """Whether every shard has written its finished marker."""
    return all(finished_marker(ledger_path(folder, k, num_shards)).exists() for k in range(num_shards))


def checked_records(folder: Union[str, Path], verify: bool = False) -> tuple:
    """``(job, plan, records)``: every item's ledger record, ordered by id, once the checks above pass."""
    folder = Path(folder)
    job, plan = load_job(folder)
    task = make_task(job["task"], job["task_options"])
    num_shards = job["num_shards"]
    planned = {item_id: shard for shard, ids in enumerate(plan["shards"]) for item_id in ids}
    records: dict = {}
    owner: dict = {}
    duplicated, misplaced = [], []
    for shard in range(num_shards):
        path = ledger_path(folder, shard, num_shards)
        contents = read_ledger(path)
        duplicated += [f"'{i}' (twice in shard {shard})" for i in contents.duplicates]
        for item_id, record in contents.records.items():
            if item_id in owner:
                duplicated.append(f"'{item_id}' (shards {owner[item_id]} and {shard})")
            elif item_id in planned and planned[item_id] != shard:
                misplaced.append(f"'{item_id}' (planned in shard {planned[item_id]}, recorded by {shard})")
            owner[item_id] = shard
            records[item_id] = record
    unknown = sorted(set(records) - set(planned))
    if unknown:
        raise JobError(f"{folder}: {len(unknown)} recorded item(s) are not in the job's plan: "
                       f"{_some(unknown)}; the ledgers do not belong to this job")
    if duplicated or misplaced:
        raise JobError(f"{folder}: {len(duplicated) + len(misplaced)} item(s) were done more than once or by "
                       f"the wrong shard: {_some(duplicated + misplaced)}; two processes ran the same shard "
                       "(check --shard / the array indices): the results are not one run's")
    missing = sorted(set(planned) - set(records))
    if missing:
        shards = sorted({planned[i] for i in missing})
        raise JobError(f"{folder}: {len(missing)} of {len(planned)} items are not done: {_some(missing)}; "
                       f"rerun shard(s) {_some([str(s) for s in shards], quote=False)} with the same command")
    if task.suffix:
        damaged = [i for i in sorted(records) if not output_is_intact(folder, records[i], verify)]
        if damaged:
            shards = sorted({planned[i] for i in damaged})
            named = [f"'{i}' ({', '.join(e['output'] for e in record_files(records[i]))})" for i in damaged]
            raise JobError(f"{folder}: the output of {len(damaged)} item(s) is missing or damaged: "
                           f"{_some(named)}; rerun shard(s) "
                           f"{_some([str(s) for s in shards], quote=False)} to redo them")
    return job, plan, {item_id: records[item_id] for item_id in sorted(records)}


def merge_job(folder: Union[str, Path], verify: bool = False) -> dict:
    """Check the job (see :func:`checked_records`) and write its final results; returns the summary.

    Raises:
        JobError: an item missing, done twice or by the wrong shard, unknown, or with a damaged output.
    """
    folder = Path(folder)
    with open(folder / ".merge.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two shards finishing together merge one after the other
        job, plan, records = checked_records(folder, verify)
        task = make_task(job["task"], job["task_options"])
        summary = {"task": job["task"], "shards": job["num_shards"], "source": job["source"],
                   **task.merge(folder, records, plan.get("fields", {}))}
        text = json.dumps(summary, indent=1, sort_keys=True) + "\n"
        write_atomic(folder / "summary.json", lambda path: path.write_text(text, encoding="utf-8"))
    logger.info("merged %d items of %s", len(records), folder)
    return summary


def _some(names: list, quote: bool = True) -> str:
    shown = [f"'{n}'" if quote and not n.startswith("'") else n for n in names[:SHOWN]]
    return ", ".join(shown) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
