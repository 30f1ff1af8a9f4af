"""The shard plan of a job, and the job folder's record of how the job was started.

The plan is a pure function of the manifest's ids and durations and of the number of shards: items are taken
longest first (ties by id) and each goes to the shard with the least audio so far (ties: the lowest shard), so
every shard gets about the same number of audio seconds and every process computes the same plan on its own,
without talking to the others. Each shard's ids are kept sorted by id.

The job folder holds ``job.json`` (task, model, manifest fingerprint, number of shards, task options) and
``plan.json`` (every shard's ids and every item's duration). The first process to start the job writes
them; every later process (another shard, a rerun, ``--status``, ``--merge``) checks that it is running the
same job.

Example:
    >>> plan_shards({"a": 3.0, "b": 1.0, "c": 1.0, "d": 1.0}, num_shards=2)
    [['a'], ['b', 'c', 'd']]
"""
from __future__ import annotations

import hashlib
import heapq
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Union

from speechkit.errors import JobError

JOB_FILE = "job.json"
PLAN_FILE = "plan.json"
FORMAT = 1
#: job.json keys that must agree between a running job and a process joining it.
IDENTITY_KEYS = ("task", "source", "fingerprint", "num_shards", "task_options")


def plan_shards(durations: Mapping[str, float], num_shards: int) -> list:
    """Deal items to ``num_shards`` shards balanced by total duration (see the module docstring).

    Args:
        durations: item id -> duration in seconds.
        num_shards: at least 1.

    Returns:
        ``num_shards`` lists of ids, each sorted by id; together they hold every id exactly once.
    """
    if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
        raise JobError(f"the number of shards must be a positive integer, got {num_shards!r}")
    shards: list = [[] for _ in range(num_shards)]
    loads = [(0.0, index) for index in range(num_shards)]  # (seconds so far, shard): a min-heap
    for item_id in sorted(durations, key=lambda i: (-float(durations[i]), i)):
        seconds, index = heapq.heappop(loads)
        shards[index].append(item_id)
        heapq.heappush(loads, (seconds + float(durations[item_id]), index))
    return [sorted(shard) for shard in shards]


def fingerprint(durations: Mapping[str, float], inputs: Optional[Mapping[str, Any]] = None) -> str:
    """A digest of the manifest's ids, durations and, when given, each item's input file (see
    :func:`input_identity`): a rerun on another manifest is refused, not mixed in, even one with the same ids
    and durations that names other audio."""
    digest = hashlib.sha256()
    for item_id in sorted(durations):
        entry = [item_id, round(float(durations[item_id]), 6)]
        if inputs is not None:
            entry.append(inputs.get(item_id))
        digest.update(json.dumps(entry, sort_keys=True).encode())
    return digest.hexdigest()[:32]


def input_identity(value: Any) -> Any:
    """What names an item's input in the fingerprint: its absolute path.

    ``value`` is the manifest's input field: a path, or a segment ``{"file": path, "start": ..., ...}`` (the
    file made absolute, the other keys kept). The file's content is not part of it, so that a file that
    failed can be repaired and the job rerun; the runner checks instead that the input of every item done
    keeps the size and bytes it had (:func:`input_size`, :func:`input_digest`), and redoes it otherwise.

    Example:
        >>> input_identity("/corpora/x/a.flac")
        '/corpora/x/a.flac'
    """
    if isinstance(value, Mapping) and isinstance(value.get("file"), str):
        return {**value, "file": input_identity(value["file"])}
    if not isinstance(value, (str, os.PathLike)):
        return value
    return os.path.abspath(os.fspath(value))


def input_size(value: Any) -> Optional[int]:
    """The size in bytes of an item's input file (``value`` as for :func:`input_identity`); None when it
    names no readable file."""
    if isinstance(value, Mapping):
        value = value.get("file")
    if not isinstance(value, (str, os.PathLike)):
        return None
    try:
        return os.stat(value).st_size
    except OSError:
        return None


def input_digest(value: Any) -> Optional[str]:
    """A BLAKE2b digest (128 bits, hex) of the bytes of an item's input file (``value`` as for
    :func:`input_identity`); None when it names no readable file.

    What the ledger keeps of each input done, so that a rerun redoes an item whose file was overwritten by
    other audio of the same size (a size or a modification time would not tell; rsync keeps both). BLAKE2b
    reads about 1 GB/s on one core, far faster than the file is decoded.
    """
    if isinstance(value, Mapping):
        value = value.get("file")
    if not isinstance(value, (str, os.PathLike)):
        return None
    digest = hashlib.blake2b(digest_size=16)
    try:
        with open(value, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def check_durations(durations: Mapping[str, Any], where: str) -> dict:
    """Every duration a finite number >= 0; returns ``{id: float}``."""
    checked = {}
    for item_id, value in durations.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < 0:
            raise JobError(f"{where}: item '{item_id}' has duration {value!r}; a number of seconds >= 0 is "
                           "needed to balance the shards")
        checked[str(item_id)] = float(value)
    return checked


def write_new_json(path: Path, content: dict) -> bool:
    """Write ``content`` to ``path`` only if no file is there yet (atomic: a temporary file linked into
    place); returns whether this call wrote it. Processes starting together race safely: one wins."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temporary.write_text(json.dumps(content, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    try:
        os.link(temporary, path)
        return True
    except FileExistsError:
        return False
    finally:
        temporary.unlink()


def read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise JobError(f"{path}: no {what} here; is this the --output folder of a job?") from None
    except (OSError, ValueError) as error:
        raise JobError(f"{path}: cannot read the {what}: {error}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise JobError(f"{path}: not a {what} of this speechkit version (format {FORMAT})")
    return data


def start_or_join(folder: Union[str, os.PathLike], spec: dict, shards: list, durations: Mapping,
                  fields: Mapping) -> None:
    """Record a new job in ``folder``, or check that the job recorded there is this one.

    ``plan.json`` keeps the shards, every item's duration and ``fields`` (id -> the manifest fields the
    task's merge needs, e.g. reference texts), so that status and merge never need the manifest.

    Raises:
        JobError: the folder holds a job started with another task, model, manifest, shard count or task
            options (each difference is named).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    spec = {"format": FORMAT, **spec}
    if not (folder / PLAN_FILE).exists():  # a thousand array tasks need not each write a large temporary
        write_new_json(folder / PLAN_FILE, {"format": FORMAT, "fingerprint": spec["fingerprint"],
                                            "shards": shards, "durations": dict(durations),
                                            "fields": dict(fields)})
    if not write_new_json(folder / JOB_FILE, spec):
        recorded = read_json(folder / JOB_FILE, "job record")
        differences = [_difference(key, recorded, spec) for key in IDENTITY_KEYS
                       if recorded.get(key) != spec.get(key)]
        if differences:
            raise JobError(f"{folder / JOB_FILE}: this folder holds another job ({'; '.join(differences)}); "
                           "rerun with the original settings, or choose a new --output folder")
    # The same job: its plan must be the one this manifest gives (not edited since, ids not renamed).
    check_plan(read_json(folder / PLAN_FILE, "shard plan"), folder / PLAN_FILE, shards)


def check_plan(plan: dict, path: Union[str, os.PathLike], shards: Optional[list] = None) -> None:
    """Refuse a ``plan.json`` whose shards name an id twice, an id that is no item of the plan (not among its
    durations: e.g. renamed by hand) or, given the ``shards`` the manifest makes, other ids than those.

    Raises:
        JobError: naming the file and the first ids at fault (a path-like id is called one).
    """
    planned = plan.get("shards")
    durations = plan.get("durations")
    if not isinstance(planned, list) or not all(isinstance(ids, list) for ids in planned) \
            or not isinstance(durations, dict):
        raise JobError(f"{path}: 'shards' must be lists of item ids and 'durations' a mapping; the plan is "
                       "damaged: start the job in a new --output folder")
    seen: set = set()
    for ids in planned:
        for item_id in ids:
            if not isinstance(item_id, str) or item_id not in durations or item_id in seen:
                why = ("is named twice" if item_id in seen else "is not an item of the job")
                raise JobError(f"{path}: the plan names {describe_id(item_id)}, which {why}; the plan was "
                               "edited or damaged: restore it, or start the job in a new --output folder")
            seen.add(item_id)
    if seen != set(durations):
        missing = sorted(set(durations) - seen)
        raise JobError(f"{path}: {len(missing)} item(s) of the job are in no shard "
                       f"({describe_id(missing[0])}, ...); the plan was edited or damaged")
    if shards is not None and planned != shards:
        extra = sorted(seen - {i for ids in shards for i in ids})
        named = describe_id(extra[0]) if extra else "the same items in other shards"
        raise JobError(f"{path}: the plan differs from the one the manifest gives ({named}); it was "
                       "edited, or belongs to another manifest: restore it, or start the job in a new "
                       "--output folder")


def describe_id(item_id: Any) -> str:
    """``'utt1'``, or ``'../../x' (a path, not an item id)`` for one that looks like a path."""
    if isinstance(item_id, str) and ("/" in item_id or "\\" in item_id or item_id in (".", "..")
                                     or "\0" in item_id):
        return f"{item_id!r} (a path, not an item id)"
    return f"id {item_id!r}"


def _difference(key: str, recorded: dict, spec: dict) -> str:
    if key == "fingerprint":
        text = "the manifest's items (ids, durations or input files) differ"
        if recorded.get("manifest") and spec.get("manifest"):
            text += f": recorded from {recorded['manifest']}, now {spec['manifest']}"
        return text
    return f"{key}: recorded {recorded.get(key)!r}, now {spec.get(key)!r}"


def recorded_num_shards(folder: Union[str, os.PathLike]):
    """The shard count recorded in ``folder`` (None when no job was started there)."""
    path = Path(folder) / JOB_FILE
    return int(read_json(path, "job record")["num_shards"]) if path.exists() else None


def load_job(folder: Union[str, os.PathLike]) -> tuple:
    """``(job record, plan)`` of the job in ``folder``, checked to belong together."""
    folder = Path(folder)
    job = read_json(folder / JOB_FILE, "job record")
    plan = read_json(folder / PLAN_FILE, "shard plan")
    if plan.get("fingerprint") != job.get("fingerprint") or len(plan.get("shards", ())) != job["num_shards"]:
        raise JobError(f"{folder}: {PLAN_FILE} does not belong to {JOB_FILE} (was one of them replaced?)")
    check_plan(plan, folder / PLAN_FILE)
    return job, plan
