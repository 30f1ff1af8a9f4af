"""The manifest fields speechkit gives a meaning to, shared by every manifest format's reader and writer.

A module of its own so that the formats (:mod:`speechkit.data.fairseq_manifest`) and the loader that
dispatches to them (:mod:`speechkit.data.manifest`) both use them without importing each other.

Example:
    >>> "wav" in FILE_FIELDS and "duration" in NUMBER_FIELDS
    True
"""
from __future__ import annotations

#: Fields that hold a path to a file: checked to exist, and making ``duration`` required.
FILE_FIELDS = ("wav", "audio", "flac", "file", "path")
#: Fields that must hold numbers >= 0 wherever they appear.
NUMBER_FIELDS = ("duration", "start", "stop")
#: Fields that must hold whole numbers wherever they appear.
INTEGER_FIELDS = ("sample_rate",)
