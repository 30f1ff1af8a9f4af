"""One digest of a whole folder, to check that two builds wrote byte-identical files."""
from __future__ import annotations

import hashlib
import os


def folder_digest(folder) -> str:
    """SHA-256 over every file's relative path and bytes, in sorted order."""
    digest = hashlib.sha256()
    for root, _, files in sorted(os.walk(folder)):
        for name in sorted(files):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, folder).encode())
            with open(path, "rb") as handle:
                digest.update(handle.read())
    return digest.hexdigest()
