"""fairseq audio manifests: a ``.tsv`` with the root folder on line 1, then ``relative/path<TAB>samples``.

This is the layout fairseq's wav2vec 2.0 tools write and read::

    /corpora/LibriSpeech/train-clean-100
    103/1240/103-1240-0000.flac	225360
    103/1240/103-1240-0001.flac	255120

Fine-tuning adds label files next to the manifest with the same stem, one line per manifest row in the same
order: ``train.wrd`` (the words, ``HELLO WORLD``) and ``train.ltr`` (letters separated by spaces with ``|``
ending each word, ``H E L L O | W O R L D |``). A label line holds no id, so nothing in the files themselves
says which row it belongs to: :func:`write_labels` matches every manifest row to its transcript by audio path
or id, and records the manifest's rows it wrote for in ``train.labels.json``; a load refuses label files
whose record names other rows or another order than the manifest's (a manifest rewritten or sorted after its
labels).

:func:`load_fairseq_manifest` turns such a file into speechkit's ``{id: {field: value}}`` rows, so that
``DynamicItemDataset.from_manifest("train.tsv")`` and :func:`speechkit.data.manifest.load_manifest` read a
fairseq manifest unchanged; :func:`write_fairseq_manifest` writes one (``speechkit manifest --format tsv``).

Example:
    >>> write_fairseq_manifest("data", [("utt1.wav", 24000), ("utt2.wav", 16000)], "train.tsv")
    >>> rows = load_fairseq_manifest("train.tsv")
    >>> rows["utt1"]
    {'wav': 'data/utt1.wav', 'num_samples': 24000, 'duration': 1.5}
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from typing import NamedTuple, Optional, Union

from speechkit.atomic_files import atomic_write
from speechkit.data.fields import FILE_FIELDS
from speechkit.errors import ManifestError

#: Label files read next to a manifest when present: ``<stem>.<ext>`` with one line per row.
LABEL_EXTENSIONS = ("wrd", "ltr")


def is_fairseq_manifest(path: Union[str, os.PathLike]) -> bool:
    """Whether a ``.tsv`` file has the fairseq layout: a first line without a tab (the root folder).

    A speechkit TSV manifest starts with a header of tab-separated column names instead.
    """
    try:
        with open(path, encoding="utf-8-sig") as handle:
            first = handle.readline()
    except OSError:
        return False
    return bool(first.strip()) and "\t" not in first


def load_fairseq_manifest(path: Union[str, os.PathLike], *, sample_rate: int = 16000,
                          labels: Optional[Iterable[str]] = None, check_files: bool = True) -> dict:
    """Read a fairseq ``.tsv`` manifest (and its ``.wrd``/``.ltr`` label files) into ``{id: row}``.

    Each row is ``{"wav": absolute path, "num_samples": int, "duration": seconds, <label ext>: text}``. The id
    is the file name without its extension, or the relative path without extension when two files of the
    manifest share a name. ``duration`` is ``num_samples / sample_rate`` (fairseq manifests store no rate;
    16 kHz is what wav2vec 2.0 models read).

    Arguments:
        sample_rate: the rate used to turn sample counts into durations (for sorting and batching).
        labels: label extensions to read; default: every one of ``wrd``/``ltr`` found next to the manifest.
            A name given here must exist.
        check_files: every audio file must exist.

    Raises:
        ManifestError: a missing root line, a row without exactly two tab-separated fields, a sample count
            that is not a positive integer, a path listed twice (``a.wav`` and ``./a.wav`` too), two files
            giving one id (``x.flac`` and ``x.wav``), a missing audio file, a label file whose line count
            differs from the manifest's, or one written for other rows or another order (see
            :func:`write_labels`); the message names the file and line(s).
    """
    path = os.fspath(path)
    _, entries = read_entries(path, check_files=check_files)
    ids = _ids_for(path, entries)
    rows = {data_id: {"wav": entry.wav, "num_samples": entry.count, "duration": entry.count / sample_rate}
            for data_id, entry in zip(ids, entries)}
    for extension, texts in _read_labels(path, entries, labels).items():
        for data_id, text in zip(ids, texts):
            rows[data_id][extension] = text
    return rows


class Entry(NamedTuple):
    """One row of a fairseq manifest: its line number, path relative to the root, absolute path, samples."""

    line: int
    relative: str
    wav: str
    count: int


def read_entries(path: Union[str, os.PathLike], check_files: bool = True) -> tuple:
    """``(root, [Entry, ...])`` of a fairseq manifest, in file order; every row checked (see
    :func:`load_fairseq_manifest` for what raises)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8-sig") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        raise ManifestError(f"manifest not found: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ManifestError(f"cannot read manifest {path}: {error}") from None
    if not lines or not lines[0].strip() or "\t" in lines[0]:
        raise ManifestError(f"{path}, line 1: a fairseq manifest starts with the root folder (no tab), "
                            f"got {lines[0] if lines else ''!r}")
    root = lines[0].strip()
    entries = []
    seen: dict = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise ManifestError(f"{path}, line {number}: expected 'relative/path<TAB>num_samples', got "
                                f"{len(fields)} field(s): {line!r:.120}")
        relative, count = fields[0], fields[1].strip()
        if not count.isdigit() or int(count) <= 0:
            raise ManifestError(f"{path}, line {number}: the sample count must be a positive integer, "
                                f"got {count!r}")
        # normpath: 'a.wav' and './a.wav' are one file, listed twice
        key = os.path.normpath(relative)
        if key in seen:
            raise ManifestError(f"{path}, line {number}: {relative!r} is listed twice (first on line "
                                f"{seen[key]})")
        seen[key] = number
        wav = os.path.join(root, relative)
        if check_files and not os.path.isfile(wav):
            raise ManifestError(f"{path}, line {number}: missing audio file {wav}")
        entries.append(Entry(number, relative, wav, int(count)))
    return root, entries


def _ids_for(path: str, entries: list) -> list:
    stems = [os.path.splitext(os.path.basename(entry.relative))[0] for entry in entries]
    if len(set(stems)) == len(stems):
        return stems
    # Two files share a name (e.g. per-speaker folders of 001.flac): the relative path keeps them apart.
    ids = [os.path.splitext(os.path.normpath(entry.relative))[0].replace(os.sep, "/") for entry in entries]
    first: dict = {}
    for data_id, entry in zip(ids, entries):
        if data_id in first:  # x.flac and x.wav in one folder: no id tells them apart
            raise ManifestError(f"{path}, lines {first[data_id].line} and {entry.line}: "
                                f"{first[data_id].relative!r} and {entry.relative!r} both give the id "
                                f"{data_id!r}; ids must be unique (rename or drop one file)")
        first[data_id] = entry
    return ids


def _read_labels(manifest: str, entries: list, labels: Optional[Iterable[str]]) -> dict:
    stem = os.path.splitext(manifest)[0]
    wanted = list(labels) if labels is not None else [ext for ext in LABEL_EXTENSIONS
                                                       if os.path.isfile(f"{stem}.{ext}")]
    found = {}
    for extension in wanted:
        label_path = f"{stem}.{extension}"
        try:
            with open(label_path, "rb") as handle:
                data = handle.read()
            texts = data.decode("utf-8-sig").splitlines()
        except FileNotFoundError:
            raise ManifestError(f"label file not found: {label_path} (asked for {extension!r} labels of "
                                f"{manifest})") from None
        except (OSError, UnicodeDecodeError) as error:
            raise ManifestError(f"cannot read label file {label_path}: {error}") from None
        if len(texts) != len(entries):
            raise ManifestError(f"{label_path}: {len(texts)} lines for the {len(entries)} rows of "
                                f"{manifest}; a label file has one line per manifest row, in the same order")
        _check_label_order(manifest, entries, extension, label_path, data)
        found[extension] = [text.strip() for text in texts]
    return found


def _record_path(manifest: str) -> str:
    return f"{os.path.splitext(manifest)[0]}.labels.json"


def _check_label_order(manifest: str, entries: list, extension: str, label_path: str, data: bytes) -> None:
    """Refuse label lines recorded (by :func:`write_labels`) for other rows than the manifest's, in order.

    A label file without a record, or changed since its record was written, cannot be checked: nothing in
    its lines names a row.
    """
    try:
        with open(_record_path(manifest), encoding="utf-8") as handle:
            record = json.load(handle)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as error:
        raise ManifestError(f"cannot read the label record {_record_path(manifest)}: {error}") from None
    if not isinstance(record, dict) or record.get("labels", {}).get(extension) != _digest(data):
        return
    written = record.get("rows", [])
    current = [os.path.normpath(entry.relative) for entry in entries]
    for index, (old, new) in enumerate(zip(written, current)):
        if old != new:
            raise ManifestError(f"{label_path}, line {index + 1}: written for {old!r}, but line "
                                f"{entries[index].line} of {manifest} lists {new!r}: the manifest was "
                                "rewritten or reordered after its labels; write the labels again "
                                "(write_labels, or speechkit manifest --labels)")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_fairseq_manifest(root: Union[str, os.PathLike], entries: Iterable[tuple],
                           path: Union[str, os.PathLike]) -> None:
    """Write ``root`` then one ``relative/path<TAB>num_samples`` line per entry, atomically.

    Arguments:
        root: the folder the relative paths start from (written as given, normally absolute).
        entries: ``(relative path, num_samples)`` pairs, in the order to write.
    """
    path = os.fspath(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    entries = list(entries)
    for relative, _ in entries:  # checked before anything is written, so a bad name loses no old manifest
        if "\t" in relative or "\n" in relative:
            raise ManifestError(f"cannot write {relative!r} to the fairseq manifest {path}: a tab or a line "
                                "break in a file name breaks the format")
    with atomic_write(path, newline="\n") as handle:
        handle.write(f"{os.fspath(root)}\n")
        handle.writelines(f"{relative}\t{int(count)}\n" for relative, count in entries)


def write_labels(rows: Mapping[str, Mapping], manifest: Union[str, os.PathLike],
                 field: str = "text") -> list:
    """Write ``<stem>.wrd`` and ``<stem>.ltr`` next to the fairseq manifest ``manifest``, in its row order.

    Each manifest row gets the ``field`` of the row of ``rows`` with the same audio file (its ``wav``,
    ``flac``, ... field, compared as absolute paths), else of the row whose id is the manifest row's id (as
    :func:`load_fairseq_manifest` gives it). Rows of ``rows`` that the manifest does not list are left out, so
    the labels of a train/valid split come from one manifest of the whole corpus. ``<stem>.labels.json``
    records the manifest rows the labels were written for, so that a load refuses them once the manifest is
    rewritten or reordered. ``.ltr`` spells each word as space-separated characters with ``|`` after it.

    Returns:
        The paths written: ``[<stem>.wrd, <stem>.ltr]``.

    Raises:
        ManifestError: the manifest is missing or malformed, a manifest row matches no row of ``rows`` (or
            two by path), or the matched row has no ``field``; nothing is written then.

    Example:
        >>> write_fairseq_manifest("data", [("utt1.wav", 24000)], "train.tsv")
        >>> write_labels({"utt1": {"wav": "data/utt1.wav", "text": "HELLO WORLD"}}, "train.tsv")
        ['train.wrd', 'train.ltr']
        >>> open("train.ltr").read().splitlines()
        ['H E L L O | W O R L D |']
    """
    manifest = os.fspath(manifest)
    _, entries = read_entries(manifest, check_files=False)
    ids = _ids_for(manifest, entries)
    by_path: dict = {}
    for data_id, row in rows.items():
        for name in FILE_FIELDS:
            target = row.get(name) if isinstance(row, Mapping) else None
            target = target.get("file") if isinstance(target, Mapping) else target
            if isinstance(target, str):
                by_path.setdefault(_path_key(target), []).append(data_id)
    words = []
    for entry, data_id in zip(entries, ids):
        matches = by_path.get(_path_key(entry.wav), [])
        if len(matches) > 1:
            raise ManifestError(f"{manifest}, line {entry.line}: {entry.wav} is the audio of several rows "
                                f"({', '.join(repr(m) for m in matches[:3])}); which transcript is meant?")
        label_id = matches[0] if matches else data_id if data_id in rows else None
        if label_id is None:
            raise ManifestError(f"{manifest}, line {entry.line}: no row has the audio {entry.wav} or the id "
                                f"{data_id!r}; every manifest row needs its transcript")
        row = rows[label_id]
        if field not in row:
            raise ManifestError(f"id {label_id!r} has no {field!r} field to write as labels")
        words.append(" ".join(str(row[field]).split()))
    letters = [" ".join(" ".join(word) + " |" for word in text.split()) for text in words]
    stem = os.path.splitext(manifest)[0]
    written, digests = [], {}
    for extension, lines in (("wrd", words), ("ltr", letters)):
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        with atomic_write(f"{stem}.{extension}", "wb") as handle:
            handle.write(data)
        written.append(f"{stem}.{extension}")
        digests[extension] = _digest(data)
    record = {"manifest": os.path.basename(manifest), "labels": digests,
              "rows": [os.path.normpath(entry.relative) for entry in entries]}
    with atomic_write(_record_path(manifest), "wb") as handle:
        handle.write((json.dumps(record, indent=0) + "\n").encode("utf-8"))
    return written


def _path_key(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))

