"""Manifests: the list of utterances of a data set, one row per id.

Two formats load into the same ``{id: {field: value}}`` dict:

- JSON ``{"utt1": {"wav": "$data_root/a.flac", "duration": 2.5, "words": "HELLO"}, ...}`` (and JSON Lines,
  ``.jsonl``, one ``{"id": ..., ...}`` object per line);
- CSV with a header row and an ``id`` (or ``ID``) column; ``duration``, ``start`` and ``stop`` are read as
  numbers (``sample_rate`` as an int), other columns stay strings unless ``types`` says otherwise.

``$name`` / ``${name}`` placeholders in string values are replaced from ``replacements`` at load, so a
manifest written once works wherever the corpus lives. Every row is checked; a bad one raises
:class:`~speechkit.errors.ManifestError` naming the file and the id or line.

Building: :func:`build_manifest` walks a tree of audio files and reads each file's duration from its header
(several processes for large trees); :func:`split_manifest` draws a seeded train/valid split.

Example:
    >>> data = load_manifest("data/train.json", replacements={"data_root": "data"})
    >>> data["utt1"]
    {'wav': 'data/utt1.wav', 'duration': 1.5, 'text': 'HELLO WORLD', 'speaker': 'alice'}
    >>> train, valid = split_manifest(build_manifest("data", ext="wav"), valid_percent=0.34, seed=1)
    >>> sorted(train), sorted(valid)
    (['utt1', 'utt3'], ['utt2'])
"""
from __future__ import annotations

import csv
import io
import json
import logging
import math
import os
import random
import re
import stat
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional, Union

from speechkit.atomic_files import atomic_write
from speechkit.data.fields import FILE_FIELDS, INTEGER_FIELDS, NUMBER_FIELDS
from speechkit.errors import AudioError, ManifestError

logger = logging.getLogger(__name__)

_PLACEHOLDER = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
#: Below this many files, headers are read in this process: reading a header takes well under a millisecond
#: on a local disk, less than starting worker processes (which pay off on slow or network file systems).
PARALLEL_MIN_FILES = 2000


# -- loading ----------------------------------------------------------------------------------------------


def load_manifest(path: Union[str, os.PathLike], replacements: Optional[Mapping[str, str]] = None,
                  **options: Any) -> dict:
    """Load a ``.json``, ``.jsonl`` or ``.csv``/``.tsv`` manifest (by extension); options as in
    :func:`load_json_manifest`.

    A ``.tsv`` whose first line is a folder (fairseq's layout: root, then ``path<TAB>num_samples`` rows) is
    read by :func:`speechkit.data.fairseq_manifest.load_fairseq_manifest`, with its ``.wrd``/``.ltr``
    labels; ``sample_rate``, ``labels`` and ``check_files`` are its options.
    """
    path = os.fspath(path)
    if path.endswith(".tsv"):
        from speechkit.data.fairseq_manifest import is_fairseq_manifest, load_fairseq_manifest

        if is_fairseq_manifest(path):
            return load_fairseq_manifest(path, **options)
    if path.endswith((".csv", ".tsv")):
        return load_csv_manifest(path, replacements, **options)
    return load_json_manifest(path, replacements, **options)


def load_json_manifest(path: Union[str, os.PathLike], replacements: Optional[Mapping[str, str]] = None, *,
                       check_files: bool = True, fields: Optional[Iterable[str]] = None,
                       types: Optional[Mapping[str, Any]] = None, require_duration: Optional[bool] = None,
                       file_fields: Iterable[str] = FILE_FIELDS) -> dict:
    """Load and check a JSON manifest ``{id: {field: value}}`` (or JSON Lines when the name ends ``.jsonl``).

    Arguments:
        replacements: ``{name: value}`` for ``$name`` / ``${name}`` placeholders in string values.
        check_files: every file field (``wav``, ``flac``, ...) must name an existing file.
        fields: the allowed fields; without it, every row must have exactly the fields of the first row.
        types: ``{field: type or tuple of types}`` to check (``float`` accepts ints too).
        require_duration: rows must have ``duration``; default: when rows have a file field.

    Returns:
        ``{id: {field: value}}`` in file order.

    Raises:
        ManifestError: malformed JSON (with line and column), a duplicate id, a row that is not an object,
            an unknown or missing field, a value of the wrong type, a missing file; the message names the
            file and the id or line.
    """
    path = os.fspath(path)
    text = _read_text(path)
    if path.endswith(".jsonl"):
        rows, lines = _parse_json_lines(path, text)
    else:
        rows, lines = _parse_json_object(path, text)
    return _checked(path, rows, lines, replacements, check_files, fields, types, require_duration,
                    file_fields, from_text=False)


def load_csv_manifest(path: Union[str, os.PathLike], replacements: Optional[Mapping[str, str]] = None, *,
                      check_files: bool = True, fields: Optional[Iterable[str]] = None,
                      types: Optional[Mapping[str, Any]] = None, require_duration: Optional[bool] = None,
                      file_fields: Iterable[str] = FILE_FIELDS) -> dict:
    """Load and check a CSV manifest (tab-separated when the name ends ``.tsv``); options as in
    :func:`load_json_manifest`. Values are strings, converted for ``duration``/``start``/``stop`` and for the
    fields named in ``types``."""
    path = os.fspath(path)
    text = _read_text(path)
    delimiter = "\t" if path.endswith(".tsv") else ","
    # strict: a quote that is never closed is an error instead of a value that takes in the following rows
    records = _csv_records(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True), path)
    try:
        _, header = next(records)
    except StopIteration:
        raise ManifestError(f"{path}: empty CSV manifest (no header line)") from None
    header = [name.strip() for name in header]
    id_column = next((name for name in ("id", "ID") if name in header), None)
    if id_column is None:
        raise ManifestError(f"{path}, line 1: the header needs an 'id' (or 'ID') column, got {header}")
    if len(set(header)) != len(header):
        raise ManifestError(f"{path}, line 1: the header names a column twice: {header}")
    rows: dict = {}
    lines: dict = {}
    for line, values in records:
        if not values or all(not value.strip() for value in values):
            continue
        if len(values) != len(header):
            raise ManifestError(f"{path}, line {line}: expected {len(header)} fields ({', '.join(header)}), "
                                f"got {len(values)}")
        row = dict(zip(header, values))
        data_id = row.pop(id_column).strip()
        if not data_id:
            raise ManifestError(f"{path}, line {line}: empty id")
        if data_id in rows:
            raise ManifestError(f"{path}, line {line}: duplicate id {data_id!r} "
                                f"(first on line {lines[data_id]})")
        rows[data_id] = row
        lines[data_id] = line
    return _checked(path, rows, lines, replacements, check_files, fields, types, require_duration,
                    file_fields, from_text=True)


def _csv_records(reader, path: str):
    """Yield ``(first line, values)`` per CSV record (a quoted value may span lines)."""
    while True:
        start = reader.line_num + 1
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise ManifestError(f"{path}, line {start}: malformed CSV record ({error}, found on line "
                                f"{reader.line_num}): is a quote opened on line {start} never "
                                "closed?") from None
        yield start, values


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8-sig") as handle:  # -sig: tolerate a byte-order mark
            return handle.read()
    except FileNotFoundError:
        raise ManifestError(f"manifest not found: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ManifestError(f"cannot read manifest {path}: {error}") from None


def _parse_json_object(path: str, text: str) -> tuple:
    def no_duplicates(pairs: list) -> dict:
        result: dict = {}
        for key, value in pairs:
            if key in result:
                raise _Duplicate(key)
            result[key] = value
        return result

    try:
        rows = json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as error:
        raise ManifestError(f"{path}, line {error.lineno}, column {error.colno}: malformed JSON: {error.msg}"
                            ) from None
    except _Duplicate as duplicate:
        line = _line_of_second(text, duplicate.key)
        raise ManifestError(f"{path}, line {line}: duplicate key {duplicate.key!r} (an id or a field given "
                            "twice)") from None
    if not isinstance(rows, dict):
        raise ManifestError(f"{path}: a JSON manifest is an object {{id: {{field: value}}}}, got "
                            f"{type(rows).__name__}")
    return rows, {}


class _Duplicate(Exception):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _line_of_second(text: str, key: str) -> int:
    matches = list(re.finditer(re.escape(json.dumps(key)) + r"\s*:", text))
    position = matches[1].start() if len(matches) > 1 else 0
    return text.count("\n", 0, position) + 1


def _parse_json_lines(path: str, text: str) -> tuple:
    rows: dict = {}
    lines: dict = {}
    for line, content in enumerate(text.splitlines(), start=1):
        if not content.strip():
            continue
        try:
            record = json.loads(content)
        except json.JSONDecodeError as error:
            raise ManifestError(f"{path}, line {line}: malformed JSON: {error.msg}") from None
        if not isinstance(record, dict) or "id" not in record:
            raise ManifestError(f"{path}, line {line}: each line must be an object with an 'id' key")
        data_id = str(record.pop("id"))
        if data_id in rows:
            raise ManifestError(f"{path}, line {line}: duplicate id {data_id!r} "
                                f"(first on line {lines[data_id]})")
        rows[data_id] = record
        lines[data_id] = line
    return rows, lines


# -- checking ---------------------------------------------------------------------------------------------


def _checked(path: str, rows: dict, lines: dict, replacements: Optional[Mapping[str, str]], check_files: bool,
             fields: Optional[Iterable[str]], types: Optional[Mapping[str, Any]],
             require_duration: Optional[bool], file_fields: Iterable[str], from_text: bool) -> dict:
    file_fields = tuple(file_fields)
    types = dict(types or {})
    allowed = set(fields) if fields is not None else None
    reference: Optional[set] = None
    for data_id, row in rows.items():
        where = f"{path}: id {data_id!r}"
        if data_id in lines:
            where = f"{path}, line {lines[data_id]} (id {data_id!r})"
        if not isinstance(row, dict):
            raise ManifestError(f"{where}: a row must be an object of fields, got {type(row).__name__}")
        if allowed is not None:
            unknown = sorted(set(row) - allowed)
            if unknown:
                raise ManifestError(f"{where}: unknown field {unknown[0]!r} (allowed: {sorted(allowed)})")
        elif reference is None:
            reference = set(row)
        else:
            unknown = sorted(set(row) - reference)
            if unknown:
                raise ManifestError(f"{where}: unknown field {unknown[0]!r}, not in the first row "
                                    f"({sorted(reference)}); pass fields=[...] to allow optional fields")
            missing = sorted(reference - set(row))
            if missing:
                raise ManifestError(f"{where}: missing field {missing[0]!r} (the first row has it)")
        needs_duration = require_duration
        if needs_duration is None:
            needs_duration = any(name in row for name in file_fields)
        if needs_duration and "duration" not in row:
            raise ManifestError(f"{where}: missing field 'duration' (needed to sort and batch audio)")
        if replacements:
            for name, value in row.items():
                row[name] = substitute(value, replacements)
        for name, value in row.items():
            row[name] = _typed(where, name, value, types.get(name), from_text)
        for name in file_fields:
            if name in row:
                _check_file_field(where, name, row[name], check_files)
    return rows


def substitute(value: Any, replacements: Mapping[str, str]) -> Any:
    """Replace ``$name`` and ``${name}`` in strings (also inside dicts and lists) with ``replacements[name]``.

    Placeholders without a replacement are left as they are.

    Example:
        >>> substitute("$data_root/a.flac", {"data_root": "/corpora"})
        '/corpora/a.flac'
    """
    if isinstance(value, str):
        if "$" not in value:
            return value

        def replace(match: re.Match) -> str:
            name = match.group(1) or match.group(2)
            return str(replacements[name]) if name in replacements else match.group(0)

        return _PLACEHOLDER.sub(replace, value)
    if isinstance(value, dict):
        return {key: substitute(item, replacements) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item, replacements) for item in value]
    return value


def _typed(where: str, name: str, value: Any, wanted: Any, from_text: bool) -> Any:
    if wanted is None and name in NUMBER_FIELDS:
        wanted = float
    elif wanted is None and name in INTEGER_FIELDS:
        wanted = int
    if wanted is None:
        return value
    wanted_types = wanted if isinstance(wanted, tuple) else (wanted,)
    if from_text and isinstance(value, str) and str not in wanted_types:
        converted = _from_text(value, wanted_types)
        if converted is None:
            raise ManifestError(f"{where}: field {name!r} must be {_type_names(wanted_types)}, got {value!r}")
        value = converted
    accepted = wanted_types + ((int,) if float in wanted_types else ())
    if isinstance(value, bool) and bool not in wanted_types or not isinstance(value, accepted):
        raise ManifestError(f"{where}: field {name!r} must be {_type_names(wanted_types)}, got "
                            f"{type(value).__name__} {value!r}")
    if name in NUMBER_FIELDS and (not math.isfinite(value) or value < 0):
        raise ManifestError(f"{where}: field {name!r} must be a finite number >= 0, got {value!r}")
    return value


def _from_text(text: str, wanted_types: tuple) -> Any:
    for kind in wanted_types:
        try:
            if kind is float:
                number = float(text)
                return int(number) if number.is_integer() and text.strip().lstrip("-").isdigit() else number
            if kind is bool:
                lowered = text.strip().lower()
                if lowered in ("true", "false", "1", "0"):
                    return lowered in ("true", "1")
                continue
            return kind(text)
        except (TypeError, ValueError):
            continue
    return None


def _type_names(kinds: tuple) -> str:
    return " or ".join("a number" if kind is float else kind.__name__ for kind in kinds)


def _check_file_field(where: str, name: str, value: Any, check_files: bool) -> None:
    target = value.get("file") if isinstance(value, dict) else value
    if not isinstance(target, str):
        raise ManifestError(f"{where}: field {name!r} must be a path (or {{'file': path, ...}}), "
                            f"got {value!r}")
    leftover = _PLACEHOLDER.search(target)
    if leftover:
        placeholder = leftover.group(1) or leftover.group(2)
        raise ManifestError(f"{where}: field {name!r} = {target!r} has placeholder ${placeholder} with no "
                            f"value; pass replacements={{{placeholder!r}: ...}}")
    if check_files and not os.path.isfile(target):
        raise ManifestError(f"{where}: missing file {target} (field {name!r})")


# -- writing ----------------------------------------------------------------------------------------------


def write_json_manifest(data: Mapping[str, Mapping[str, Any]], path: Union[str, os.PathLike]) -> None:
    """Write ``{id: {field: value}}`` as JSON, atomically (a temporary file renamed into place)."""
    path = os.fspath(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with atomic_write(path) as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False)
        handle.write("\n")


def write_csv_manifest(data: Mapping[str, Mapping[str, Any]], path: Union[str, os.PathLike]) -> None:
    """Write ``{id: {field: value}}`` as CSV with an ``id`` column first (all rows need the same fields)."""
    path = os.fspath(path)
    columns: list = []
    for row in data.values():
        columns.extend(name for name in row if name not in columns)
    with atomic_write(path, newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id"] + columns)
        for data_id, row in data.items():
            writer.writerow([data_id] + [row.get(name, "") for name in columns])


# -- building ---------------------------------------------------------------------------------------------


def find_audio_files(root: Union[str, os.PathLike], ext: str = "flac") -> list:
    """Every regular file under ``root`` whose name ends with ``.ext``, as sorted paths relative to ``root``.

    A FIFO, socket or device (or a link to one, or a broken link) with that name is skipped with a warning
    (:func:`is_regular_file`): opening a FIFO would wait for a writer for ever.
    """
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise ManifestError(f"not a directory: {root}")
    suffix = "." + ext.lstrip(".").lower()
    found = []
    for folder, subfolders, names in os.walk(root, followlinks=True):
        subfolders.sort()
        for name in names:
            path = os.path.join(folder, name)
            if name.lower().endswith(suffix) and is_regular_file(path):
                found.append(os.path.relpath(path, root))
    return sorted(found)


def is_regular_file(path: Union[str, os.PathLike], warn: bool = True) -> bool:
    """Whether ``path`` is a regular file (links followed); a FIFO, socket, device or broken link is not,
    and is logged as skipped when ``warn``. What every walker of a tree asks before opening a file.

    Example:
        >>> is_regular_file("/dev/null", warn=False)
        False
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        kind = f"unreadable ({error.strerror})"
    else:
        if stat.S_ISREG(mode):
            return True
        kind = next((name for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                                              (stat.S_ISCHR, "a character device"),
                                              (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))
                     if test(mode)), "not a regular file")
    if warn:
        logger.warning("skipping %s: %s, not a regular file", os.fspath(path), kind)
    return False


def _duration_of(path: str) -> tuple:
    # soundfile directly (not speechkit.data.audio) so that worker processes never import torch.
    import soundfile

    try:
        found = soundfile.info(path)
    except Exception as error:  # libsndfile raises its own error types
        return path, None, f"cannot read audio file {path}: {error}"
    return path, (found.frames / found.samplerate, found.samplerate), None


def _read_headers(paths: list, num_workers: int, progress: Optional[Callable[[int, int], None]]) -> list:
    if num_workers > 1 and len(paths) >= PARALLEL_MIN_FILES:
        import multiprocessing

        with multiprocessing.Pool(num_workers) as pool:
            results = []
            for result in pool.imap(_duration_of, paths, chunksize=64):
                results.append(result)
                if progress:
                    progress(len(results), len(paths))
        return results
    results = []
    for path in paths:
        results.append(_duration_of(path))
        if progress:
            progress(len(results), len(paths))
    return results


def read_durations(paths: Iterable[str], num_workers: int = 1, skip_unreadable: bool = False,
                   progress: Optional[Callable[[int, int], None]] = None) -> dict:
    """``{path: (duration in seconds, sample rate)}`` from file headers, in ``num_workers`` processes;
    ``progress(done, total)`` is called after each file.

    Raises:
        AudioError: naming the first file that cannot be read (unless ``skip_unreadable``).
    """
    found: dict = {}
    for path, header, error in _read_headers(list(paths), num_workers, progress):
        if header is None:
            if skip_unreadable:
                continue
            raise AudioError(error)
        found[path] = header
    return found


def build_manifest(root: Union[str, os.PathLike], ext: str = "flac", *, num_workers: int = 1,
                   placeholder: Optional[str] = None, skip_unreadable: bool = False,
                   progress: Optional[Callable[[int, int], None]] = None) -> dict:
    """Manifest rows ``{id: {"wav": path, "duration": seconds, "sample_rate": hz}}`` for an audio tree.

    The id is the file name without extension (a clash between two files raises :class:`ManifestError`).
    Durations come from file headers, in ``num_workers`` processes when above 1.

    Arguments:
        placeholder: write paths as ``$placeholder/relative/path`` (e.g. ``"data_root"``) instead of absolute.
        skip_unreadable: leave out files that cannot be read (else raise, naming the file).
        progress: called as ``progress(done, total)``.
    """
    root = os.path.abspath(os.fspath(root))
    relative_paths = find_audio_files(root, ext)
    absolute_paths = [os.path.join(root, relative) for relative in relative_paths]
    results = _read_headers(absolute_paths, num_workers, progress)
    data: dict = {}
    source: dict = {}
    for relative, (path, found, error) in zip(relative_paths, results):
        if found is None:
            if skip_unreadable:
                continue
            raise AudioError(error)
        data_id = os.path.splitext(os.path.basename(relative))[0]
        if data_id in data:
            raise ManifestError(f"two files give the id {data_id!r}: {source[data_id]} and {relative}")
        source[data_id] = relative
        wav = f"${placeholder}/{relative}" if placeholder else path
        data[data_id] = {"wav": wav, "duration": round(found[0], 6), "sample_rate": found[1]}
    return data


def split_manifest(data: Mapping[str, Any], valid_percent: float, seed: int = 0,
                   group_of: Optional[Callable[[str], str]] = None) -> tuple:
    """Split rows into ``(train, valid)`` dicts; ``valid_percent`` is a fraction in [0, 1] (0.05 = 5%).

    The draw depends only on the ids and ``seed``. With ``group_of(id) -> group`` (e.g. the speaker), whole
    groups go to one side, so no speaker is in both.
    """
    if not 0.0 <= valid_percent <= 1.0:
        raise ManifestError(f"valid_percent must be a fraction between 0 and 1, got {valid_percent}")
    ids = sorted(data)
    groups: dict = {}
    for data_id in ids:
        groups.setdefault(group_of(data_id) if group_of else data_id, []).append(data_id)
    names = sorted(groups)
    random.Random(seed).shuffle(names)
    target = round(len(ids) * valid_percent)
    valid_ids: set = set()
    for name in names:
        if len(valid_ids) >= target:
            break
        valid_ids.update(groups[name])
    train = {data_id: data[data_id] for data_id in data if data_id not in valid_ids}
    valid = {data_id: data[data_id] for data_id in data if data_id in valid_ids}
    return train, valid
