"""Run one shard of a job: skip what is done, batch the rest by duration, write outputs, keep the ledger.

Every process of a job runs :func:`run_job` with the same configuration; each finds its own shard (see
:mod:`speechkit.jobs.identity`), computes the same plan, and works alone. The next batch's audio is read in a
thread while the model runs the current one. On SIGTERM or SIGUSR1 (SLURM's
warning before a time limit or a preemption; torchrun forwards SIGTERM) the shard finishes the batch in hand,
flushes its ledger and returns ``EXIT_PREEMPTED``: rerunning the same command continues where it stopped. The
last shard to finish merges the job (see :mod:`speechkit.jobs.merge`).

Example:
    >>> from speechkit.jobs import JobConfig, run_job
    >>> result = run_job(JobConfig("models/asr", "test.json", "out/test", task="transcribe",
    ...                            shard=0, num_shards=4))                          # doctest: +SKIP
    >>> result.exit_code                                                          # doctest: +SKIP
    0
"""
from __future__ import annotations

import dataclasses
import logging
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple, Optional

from speechkit.distributed.signals import PreemptionHandler
from speechkit.errors import EXIT_PREEMPTED, JobError, ManifestError
from speechkit.jobs import plan as job_plan
from speechkit.jobs.identity import ShardIdentity, resolve_shard
from speechkit.jobs.ledger import Ledger, finished_marker, ledger_path
from speechkit.jobs.outputs import output_is_intact, output_name, write_atomic
from speechkit.jobs.registry import make_task

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class JobConfig:
    """Everything a job's processes share (the shard itself comes from the environment or ``shard``).

    Attributes:
        source: the model folder (local path, Hub repo id or URL, or a ``FetchSource``).
        manifest: JSON, JSON Lines or CSV manifest with ``duration`` and the task's input field.
        output: the job folder (plan, ledgers, outputs, merged results).
        task: a registered task name (``transcribe``, ``encode``, ...); ``task_options`` its options.
        shard, num_shards: this process's shard, when not taken from torchrun or SLURM.
        max_batch_seconds: padded audio seconds per batch (batch size x longest item); a longer item runs
            alone.
        max_batch_size: at most this many items per batch (None: no cap).
        flush_every, flush_seconds: append the ledger after this many items or seconds.
        verify: check finished outputs' checksums, not only their sizes, before skipping them.
        merge: the last shard to finish merges the job.
        from_hparams_options: keyword arguments of :meth:`speechkit.pretrained.Pretrained.from_hparams`
            besides the source and the device (``savedir``, ``revision``, ``allow_network``,
            ``trust_remote_code``, ``allow``, ``force_download``, ``backend``, ...).
    """

    source: str
    manifest: str
    output: str
    task: str = "transcribe"
    task_options: dict = dataclasses.field(default_factory=dict)
    shard: Optional[int] = None
    num_shards: Optional[int] = None
    max_batch_seconds: float = 60.0
    max_batch_size: Optional[int] = None
    flush_every: int = 100
    flush_seconds: float = 30.0
    device: Optional[str] = None
    replacements: dict = dataclasses.field(default_factory=dict)
    verify: bool = False
    progress: bool = True
    merge: bool = True
    from_hparams_options: dict = dataclasses.field(default_factory=dict)


class ShardResult(NamedTuple):
    """What one call of :func:`run_job` did: its shard, items done now, already done, redone, whether it was
    preempted, and the merge summary if it merged the job."""

    identity: ShardIdentity
    done_now: int
    already_done: int
    redone: int
    preempted: bool
    merged: Optional[dict]

    @property
    def exit_code(self) -> int:
        return EXIT_PREEMPTED if self.preempted else 0


def run_job(config: JobConfig, environ=None) -> ShardResult:
    """Run this process's shard of the job (see the module docstring)."""
    folder = Path(config.output)
    task = make_task(config.task, config.task_options)
    identity = resolve_shard(config.shard, config.num_shards, environ,
                             job_plan.recorded_num_shards(folder))
    durations, data, kept, inputs = _read_manifest(config, task)
    shards = job_plan.plan_shards(durations, identity.num_shards)
    job_plan.start_or_join(folder, _job_spec(config, task, durations, inputs, identity.num_shards), shards,
                           durations, kept)
    mine = shards[identity.shard]
    where = f"shard {identity.shard}/{identity.num_shards}"
    ledger = Ledger(ledger_path(folder, identity.shard, identity.num_shards), config.flush_every,
                    config.flush_seconds)
    preempted = False
    done_now = 0
    with _JobPreemption() as preemption:
        try:
            run = ledger.open_run(source=identity.source)
            broken = [i for i in mine if task.suffix and i in ledger.done
                      and not output_is_intact(folder, ledger.done[i], config.verify)]
            _check_ledger_ids(ledger, mine)
            ledger.redo(broken)
            changed = _inputs_changed(ledger, mine, data, task)
            ledger.redo(changed)
            broken += changed
            already = sum(1 for i in mine if i in ledger.done)
            todo = [i for i in mine if i not in ledger.done]
            logger.info("%s (run %d, %s): %d items, %d done, %d to redo (output missing or damaged, or input "
                        "changed), %d to do",
                        where, run, identity.source, len(mine), already, len(broken), len(todo))
            batches = batches_by_duration(todo, durations, config.max_batch_seconds, config.max_batch_size)
            model = _load_model(config, task, identity) if todo else None
            progress = _progress_bar(config.progress, len(mine), already, where)
            def load(ids: list) -> list:
                return [task.load(model, item_id, data[item_id]) for item_id in ids]

            try:
                for batch, inputs in _prefetched(batches, load):
                    if preemption.local_request():
                        preempted = True
                        break
                    for item_id, result in zip(batch, task.run(model, inputs.result())):
                        record = _write_output(task, folder, item_id, result)
                        row = data[item_id]
                        source = row[task.input_field(row)]
                        record["input_bytes"] = job_plan.input_size(source)
                        record["input_blake2b"] = job_plan.input_digest(source)
                        ledger.record(item_id, record)
                    done_now += len(batch)
                    progress.update(len(batch))
            finally:  # a signal after the last batch changes nothing: the shard is done
                progress.close()  # and on an error: the log lines go back to the console
        finally:
            ledger.close()  # flushes: what was written is never lost, even on an error
    if preempted:
        logger.warning("%s: preempted after %d items this run; rerun the same command to continue", where,
                       done_now)
        return ShardResult(identity, done_now, already, len(broken), True, None)
    finished_marker(ledger.path).write_text(f"{len(mine)}\n")
    merged = _merge_if_last(folder, identity) if config.merge else None
    return ShardResult(identity, done_now, already, len(broken), False, merged)


def _prefetched(batches: list, load):
    """Yield ``(batch, future of load(batch))``, the next batch's load already running in a thread while the
    caller works on this one (reading and decoding audio overlaps the model). A load's error is raised by
    ``future.result()``, once every batch before it is done."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="speechkit-load") as loader:
        upcoming = loader.submit(load, batches[0]) if batches else None
        for index, batch in enumerate(batches):
            current = upcoming
            upcoming = loader.submit(load, batches[index + 1]) if index + 1 < len(batches) else None
            try:
                yield batch, current
            except GeneratorExit:
                if upcoming is not None:
                    upcoming.cancel()
                raise


def _check_ledger_ids(ledger, mine: list) -> None:
    """Refuse a ledger that records items this shard does not hold (an id renamed or added by hand, a path):
    its records cannot be this job's results, and the shard must not go on as if they were."""
    planned = set(mine)
    strangers = [item_id for item_id in ledger.done if item_id not in planned]
    if strangers:
        named = ", ".join(job_plan.describe_id(i) for i in strangers[:3])
        raise JobError(f"{ledger.path}: records {len(strangers)} item(s) that are not in this shard's plan "
                       f"({named}{', ...' if len(strangers) > 3 else ''}); the ledger was edited or belongs "
                       "to another job: restore it, or move it away to redo this shard")


def _inputs_changed(ledger, ids: list, data: dict, task) -> list:
    """The items done whose input file changed since (other size, or other bytes: a file overwritten by
    other audio): their results are of other audio than the manifest now names, so they are done again
    (the fingerprint holds the paths, not the content). Each is logged with what changed."""
    changed = []
    for item_id in ids:
        record = ledger.done.get(item_id, {})
        if record.get("input_bytes") is None:
            continue
        source = data[item_id][task.input_field(data[item_id])]
        size = job_plan.input_size(source)
        if size != record["input_bytes"]:
            why = f"{record['input_bytes']} bytes when done, now {size}"
        elif "input_blake2b" in record and job_plan.input_digest(source) != record["input_blake2b"]:
            why = f"same size ({size} bytes), other content"
        else:
            continue
        changed.append(item_id)
        logger.warning("item '%s': its input %s changed since it was done (%s); doing it again", item_id,
                       source.get("file") if isinstance(source, dict) else source, why)
    return changed


def _write_output(task, folder: Path, item_id: str, result) -> dict:
    """Write the item's output files, if the task makes any; returns the item's ledger record."""
    record = task.record(result)
    if task.suffix:
        files = []
        for suffix, part in task.parts(result):
            name = output_name(item_id, suffix)
            info = write_atomic(folder / name, lambda path, part=part: task.write(path, part))
            files.append({"output": name, **info})
        # One file: its entry is the record itself (the ledger format of single-file tasks).
        record = {**record, **files[0]} if len(files) == 1 else {**record, "files": files}
    return record


class _JobPreemption(PreemptionHandler):
    """The engine's preemption signals (SIGTERM, SIGUSR1), with a message that says what a job does."""

    def _on_signal(self, signum: int, frame) -> None:
        self.received = signum
        logger.warning("Received %s: finishing the batch in hand, flushing the ledger, then stopping",
                       signal.Signals(signum).name)


def batches_by_duration(ids: list, durations: dict, max_seconds: float,
                        max_size: Optional[int] = None) -> list:
    """Longest items first (ties by id), cut greedily so that ``len(batch) * longest <= max_seconds`` and
    ``len(batch) <= max_size``; an item longer than ``max_seconds`` forms a batch alone. The last batch holds
    whatever is left, however few items.

    Example:
        >>> batches_by_duration(["a", "b", "c", "d"], {"a": 4, "b": 1, "c": 1, "d": 9}, max_seconds=8)
        [['d'], ['a', 'b'], ['c']]
    """
    batches: list = []
    for item_id in sorted(ids, key=lambda i: (-durations[i], i)):
        if batches and (len(batches[-1]) + 1) * durations[batches[-1][0]] <= max_seconds \
                and (max_size is None or len(batches[-1]) < max_size):
            batches[-1].append(item_id)
        else:
            batches.append([item_id])
    return batches


def _read_manifest(config: JobConfig, task) -> tuple:
    """``(durations, rows, kept, inputs)``: every item's duration, the manifest's rows, the fields of each row
    that the task's merge needs, and what identifies each item's input file (for the fingerprint)."""
    from speechkit.data.manifest import load_manifest

    data = load_manifest(config.manifest, replacements=config.replacements)
    if not data:
        raise ManifestError(f"{config.manifest}: the manifest holds no item")
    durations_raw, kept, inputs = {}, {}, {}
    for item_id, row in data.items():
        task.check_row(item_id, row, config.manifest)
        inputs[item_id] = job_plan.input_identity(row[task.input_field(row)])
        if "duration" not in row:
            raise ManifestError(f"{config.manifest}: item '{item_id}' has no 'duration' (needed to balance "
                                "the shards and to batch by duration)")
        durations_raw[item_id] = row["duration"]
        fields = {name: row[name] for name in task.keep_fields if name in row}
        if fields:
            kept[item_id] = fields
    return job_plan.check_durations(durations_raw, config.manifest), data, kept, inputs


def _job_spec(config: JobConfig, task, durations: dict, inputs: dict, num_shards: int) -> dict:
    source = str(getattr(config.source, "path", config.source))  # a FetchSource (--kind) is its path
    if os.path.isdir(os.path.expanduser(source)):
        source = str(Path(source).expanduser().resolve())
    return {"task": task.name, "source": source, "fingerprint": job_plan.fingerprint(durations, inputs),
            "num_shards": num_shards, "task_options": task.options, "items": len(durations),
            "seconds": round(sum(durations.values()), 3), "manifest": str(Path(config.manifest).resolve())}


def _load_model(config: JobConfig, task, identity: ShardIdentity):
    import torch

    from speechkit.pretrained.interfaces import Pretrained

    device = config.device
    if device is None:
        count = torch.cuda.device_count()
        device = f"cuda:{identity.local_rank % count}" if count else "cpu"
    model = Pretrained.from_hparams(config.source, run_opts={"device": device}, **config.from_hparams_options)
    task.check_model(model, str(getattr(config.source, "path", config.source)))
    return model


def _progress_bar(enabled: bool, total: int, initial: int, where: str):
    from speechkit.terminal import Progress, is_terminal

    if is_terminal():  # the bar of every command, with the log lines printed above it
        return Progress(where, total, unit="item", enabled=enabled, initial=initial)
    from tqdm import tqdm

    # In a log file (a SLURM job) a bar redrawn 10 times a second buries everything else: one line a minute.
    return tqdm(total=total, initial=initial, desc=where, unit="item", disable=not enabled, mininterval=60.0)


def _merge_if_last(folder: Path, identity: ShardIdentity) -> Optional[dict]:
    """Merge the job when every shard has finished (any shard may be the last; the merge is idempotent).

    A merge that finds a problem in another shard (e.g. an output damaged since it finished) is reported,
    not raised: this shard's own work is done and its exit code says so; ``--merge`` names the problem again.
    """
    from speechkit.jobs.merge import all_shards_finished, merge_job

    if not all_shards_finished(folder, identity.num_shards):
        return None
    logger.info("every shard has finished: merging %s", folder)
    try:
        return merge_job(folder)
    except JobError as error:
        logger.warning("not merged: %s", error)
        return None
