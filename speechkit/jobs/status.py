"""The progress of a whole job, read from its folder while it runs (``speechkit infer --status OUT``).

Every shard's ledger says which items it finished and when. A shard counts as *running* while a process
holds its lock (where the file system cannot tell, when it wrote in the last ``stale_after`` seconds and has
not finished); its rate is the audio seconds (and items) it recorded
in its current run divided by the time since that run started. The job's rate is the sum over running
shards, and the ETA is the audio left divided by that rate (audio, not items, because items differ in
length). Only what is flushed is seen: the picture lags the workers by at most their flush interval.

Example:
    >>> print(format_status(job_status("out/archive")))                       # doctest: +SKIP
    job out/archive: transcribe, 8 shards, 3 finished, 5 running
    items 61234/100000 (61.2%), audio 1021.3/1666.7 h, 412.0 items/s, 25.7 audio-s/s, ETA 6 h 58 min
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional, Union

from speechkit.jobs.ledger import finished_marker, ledger_path, read_ledger, shard_is_running
from speechkit.jobs.plan import load_job


def job_status(folder: Union[str, Path], now: Optional[float] = None, stale_after: float = 600.0) -> dict:
    """The job's progress as a dict (see :func:`format_status` for a text form).

    Keys: ``task``, ``num_shards``, ``items``, ``done``, ``seconds``, ``seconds_done``, ``items_per_s``,
    ``audio_s_per_s``, ``eta_s`` (0 when every item is done, None when items are left and no shard is
    running), ``finished`` and ``running`` (shard
    counts), and ``shards``: per shard ``shard``, ``items``, ``done``, ``runs``, ``finished``, ``running``,
    ``last_write`` (unix time or None).
    """
    folder = Path(folder)
    now = time.time() if now is None else now
    job, plan = load_job(folder)
    durations = plan["durations"]
    num_shards = job["num_shards"]
    shards, items_rate, audio_rate = [], 0.0, 0.0
    for shard, ids in enumerate(plan["shards"]):
        path = ledger_path(folder, shard, num_shards)
        contents = read_ledger(path)
        planned = set(ids)
        done_ids = [i for i in contents.records if i in planned]
        finished = finished_marker(path).exists()
        last_run = contents.runs[-1] if contents.runs else None
        stamps = [contents.records[i]["t"] for i in done_ids]
        last_write = max(stamps + ([last_run["started"]] if last_run else []), default=None)
        running = shard_is_running(path)
        if running is None:
            running = not finished and last_write is not None and now - last_write <= stale_after
        if running and last_run is not None:
            current = [i for i in done_ids if contents.records[i].get("run") == last_run["run"]]
            elapsed = max(now - last_run["started"], 1e-6)
            items_rate += len(current) / elapsed
            audio_rate += sum(durations[i] for i in current) / elapsed
        shards.append({"shard": shard, "items": len(ids), "done": len(done_ids), "runs": len(contents.runs),
                       "finished": finished, "running": running, "last_write": last_write,
                       "seconds": sum(durations[i] for i in ids),
                       "seconds_done": sum(durations[i] for i in done_ids)})
    seconds = sum(s["seconds"] for s in shards)
    seconds_done = sum(s["seconds_done"] for s in shards)
    items, done = sum(s["items"] for s in shards), sum(s["done"] for s in shards)
    # Whether the job is done is a count: the two sums add the same durations in other orders (plan order,
    # ledger order) and may differ in the last bit.
    if done >= items:
        eta = 0.0
    else:
        eta = max(seconds - seconds_done, 0.0) / audio_rate if audio_rate > 0 else None
    return {"folder": str(folder), "task": job["task"], "num_shards": num_shards,
            "items": items, "done": done,
            "seconds": seconds, "seconds_done": seconds_done, "items_per_s": items_rate,
            "audio_s_per_s": audio_rate, "eta_s": eta, "finished": sum(s["finished"] for s in shards),
            "running": sum(s["running"] for s in shards), "merged": (folder / "summary.json").exists(),
            "shards": shards}


def format_status(status: dict, per_shard: bool = True) -> str:
    """Text for a terminal: the job's totals, then one line per shard."""
    percent = 100.0 * status["done"] / status["items"] if status["items"] else 100.0
    if status["done"] >= status["items"]:
        eta = "done"
    else:
        eta = _duration(status["eta_s"]) if status["eta_s"] is not None else "unknown (no shard is running)"
    lines = [
        f"job {status['folder']}: {status['task']}, {status['num_shards']} shards, {status['finished']} "
        f"finished, {status['running']} running" + (", merged" if status["merged"] else ""),
        f"items {status['done']}/{status['items']} ({percent:.1f}%), audio {_hours(status['seconds_done'])}/"
        f"{_hours(status['seconds'])}, {status['items_per_s']:.1f} items/s, "
        f"{status['audio_s_per_s']:.1f} audio-s/s, ETA {eta}",
    ]
    if per_shard:
        for shard in status["shards"]:
            state = "finished" if shard["finished"] else "running" if shard["running"] else \
                "not started" if shard["runs"] == 0 else "stopped"
            lines.append(f"  shard {shard['shard']:>4}: {shard['done']:>7}/{shard['items']:<7} {state}"
                         f" ({shard['runs']} run{'s' if shard['runs'] != 1 else ''})")
    return "\n".join(lines)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def _duration(seconds: float) -> str:
    minutes = int(round(seconds / 60))
    if minutes < 1:
        return f"{seconds:.0f} s"
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"
