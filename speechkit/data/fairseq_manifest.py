"""fairseq audio manifests: a ``.tsv`` with the root folder on line 1, then ``relative/path<TAB>samples``.

This is the layout fairseq's wav2vec 2.0 tools write and read::

    /corpora/LibriSpeech/train-clean-100
    103/1240/103-1240-0000.flac	225360
    103/1240/103-1240-0001.flac	255120

Fine-tuning adds label files next to the manifest with the same stem, one line per manifest row in the same
order: ``train.wrd`` (the words, ``HELLO WORLD``) and ``train.ltr`` (letters separated by spaces with ``|``
ending each word, ``H E L L O | W O R L D |``).

:func:`load_fairseq_manifest` turns such a file into speechkit's ``{id: {field: value}}`` rows, so that
``DynamicItemDataset.from_manifest("train.tsv")`` and :func:`speechkit.data.manifest.load_manifest` read a
fairseq manifest unchanged; :func:`write_fairseq_manifest` writes one (``speechkit manifest --format tsv``).

Example:
    >>> rows = load_fairseq_manifest("manifests/train.tsv")  # doctest: +SKIP
    >>> rows["103-1240-0000"]  # doctest: +SKIP
    {'wav': '/corpora/.../103-1240-0000.flac', 'num_samples': 225360, 'duration': 14.085, 'wrd': 'CHAPTER'}
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Optional, Union

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
            that is not a positive integer, a duplicate path, a missing audio file, or a label file whose
            line count differs from the manifest's; the message names the file and line.
    """
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
        if relative in seen:
            raise ManifestError(f"{path}, line {number}: {relative!r} is listed twice (first on line "
                                f"{seen[relative]})")
        seen[relative] = number
        wav = os.path.join(root, relative)
        if check_files and not os.path.isfile(wav):
            raise ManifestError(f"{path}, line {number}: missing audio file {wav}")
        entries.append((number, relative, wav, int(count)))
    ids = _ids_for([relative for _, relative, _, _ in entries])
    rows = {data_id: {"wav": wav, "num_samples": count, "duration": count / sample_rate}
            for data_id, (_, _, wav, count) in zip(ids, entries)}
    for extension, texts in _read_labels(path, len(entries), labels).items():
        for data_id, text in zip(ids, texts):
            rows[data_id][extension] = text
    return rows


def _ids_for(relative_paths: list) -> list:
    stems = [os.path.splitext(os.path.basename(relative))[0] for relative in relative_paths]
    if len(set(stems)) == len(stems):
        return stems
    # Two files share a name (e.g. per-speaker folders of 001.flac): the relative path keeps them apart.
    return [os.path.splitext(relative)[0].replace(os.sep, "/") for relative in relative_paths]


def _read_labels(manifest: str, count: int, labels: Optional[Iterable[str]]) -> dict:
    stem = os.path.splitext(manifest)[0]
    wanted = list(labels) if labels is not None else [ext for ext in LABEL_EXTENSIONS
                                                       if os.path.isfile(f"{stem}.{ext}")]
    found = {}
    for extension in wanted:
        label_path = f"{stem}.{extension}"
        try:
            with open(label_path, encoding="utf-8-sig") as handle:
                texts = handle.read().splitlines()
        except FileNotFoundError:
            raise ManifestError(f"label file not found: {label_path} (asked for {extension!r} labels of "
                                f"{manifest})") from None
        except (OSError, UnicodeDecodeError) as error:
            raise ManifestError(f"cannot read label file {label_path}: {error}") from None
        if len(texts) != count:
            raise ManifestError(f"{label_path}: {len(texts)} lines for the {count} rows of {manifest}; a "
                                "label file has one line per manifest row, in the same order")
        found[extension] = [text.strip() for text in texts]
    return found


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
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(f"{os.fspath(root)}\n")
        handle.writelines(f"{relative}\t{int(count)}\n" for relative, count in entries)
    os.replace(temporary, path)


def write_labels(rows: Mapping[str, Mapping], manifest: Union[str, os.PathLike],
                 field: str = "text") -> list:
    """Write ``<stem>.wrd`` and ``<stem>.ltr`` next to ``manifest`` from each row's ``field`` (in row order).

    Returns the paths written. ``.ltr`` spells each word as space-separated characters with ``|`` after it.
    """
    stem = os.path.splitext(os.fspath(manifest))[0]
    words = []
    for data_id, row in rows.items():
        if field not in row:
            raise ManifestError(f"id {data_id!r} has no {field!r} field to write as labels")
        words.append(" ".join(str(row[field]).split()))
    letters = [" ".join(" ".join(word) + " |" for word in text.split()) for text in words]
    written = []
    for extension, lines in (("wrd", words), ("ltr", letters)):
        target = f"{stem}.{extension}"
        temporary = f"{target}.tmp{os.getpid()}"
        with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
            handle.writelines(line + "\n" for line in lines)
        os.replace(temporary, target)
        written.append(target)
    return written
