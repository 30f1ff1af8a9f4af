"""One output file per item: a safe name from the item's id, written whole or not at all.

An output is written to a temporary name in its final folder and renamed into place, so a process killed
mid-write leaves no half file under the final name. Its size and SHA-256 go into the ledger; a rerun redoes an
item whose output is missing or has another size (and, with ``verify``, another checksum), e.g. after a crash
of the machine lost a file the ledger had already recorded.

Ids come from the manifest and are not trusted as paths: ``../x`` or ``a/b`` never leave the output folder.
Files are spread over 256 folders (by a hash of the id) so that no folder holds millions of entries. A task
writing several files per item gives a suffix starting with ``/``: they go into a folder of their own named
after the item (``outputs/7e/spk1_utt_7-7ed9767aa2/source1.wav``), so no other id's name collides with them.

Example:
    >>> output_name("spk1/utt 7", ".npy")
    'outputs/7e/spk1_utt_7-7ed9767aa2.npy'
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Callable, Union

from speechkit.atomic_files import replacing

OUTPUT_DIR = "outputs"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
MAX_NAME = 120


def output_name(item_id: str, suffix: str) -> str:
    """The output's path relative to the job folder (``outputs/<2 hex>/<safe id>[-<hash>]<suffix>``)."""
    digest = hashlib.sha1(item_id.encode("utf-8")).hexdigest()
    safe = _UNSAFE.sub("_", item_id)[:MAX_NAME]
    if safe != item_id or safe.startswith("."):  # changed names get a hash, so two ids never share a file
        safe = f"{safe.lstrip('.') or 'item'}-{digest[:10]}"
    return f"{OUTPUT_DIR}/{digest[:2]}/{safe}{suffix}"


def write_atomic(path: Union[str, os.PathLike], write: Callable[[Path], None]) -> dict:
    """Call ``write(temporary_path)``, then rename the file to ``path``; returns ``{"bytes", "sha256"}``.

    The temporary file is removed if ``write`` fails.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as temporary:
        write(Path(temporary))
        info = file_digest(temporary)
    return info


def file_digest(path: Union[str, os.PathLike]) -> dict:
    """``{"bytes": size, "sha256": hex digest}`` of a file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return {"bytes": size, "sha256": digest.hexdigest()}


def record_files(record: dict) -> list:
    """The ``{"output", "bytes", "sha256"}`` entries of every output file a ledger record names: the record
    itself for a task writing one file per item, its ``files`` for a task writing several (e.g. one audio
    file per separated source)."""
    return record["files"] if "files" in record else [record]


def output_is_intact(folder: Union[str, os.PathLike], record: dict, verify: bool = False) -> bool:
    """Whether every output a ledger record names exists with its recorded size (and checksum if
    ``verify``)."""
    for entry in record_files(record):
        path = Path(folder) / entry["output"]
        try:
            if path.stat().st_size != entry["bytes"]:
                return False
        except OSError:
            return False
        if verify and file_digest(path)["sha256"] != entry["sha256"]:
            return False
    return True
