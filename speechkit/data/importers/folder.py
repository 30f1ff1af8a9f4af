"""A folder of audio files, each with a transcript of the same name: ``a/b/x.wav`` and ``a/b/x.txt``.

The id is the path below the folder without extension, ``/`` turned into ``-`` (``a-b-x``); the speaker is
the file's parent folder name (the id itself for files directly in the folder). Folders named ``train``,
``valid`` (or ``dev``) and ``test`` at the top give the split; otherwise it is made by speaker. An audio file
without its ``.txt`` is an error (``--allow-missing-text`` imports it with an empty transcript).

Example::

    speechkit data import folder ~/recordings --dest data/mine
"""
from __future__ import annotations

import os
from typing import Any

from speechkit.data.importers.base import AUDIO_EXTENSIONS, DOCS, Utterance, walk_files
from speechkit.errors import ManifestError

SPLIT_FOLDERS = {"train": "train", "valid": "valid", "dev": "valid", "test": "test"}


def read_transcript(path: str) -> str:
    try:
        with open(path, encoding="utf-8-sig") as handle:
            return " ".join(handle.read().split())
    except UnicodeDecodeError as error:
        raise ManifestError(f"{path}: not UTF-8 text ({error})") from None


def read(source: str, *, allow_missing_text: bool = False, **_: Any) -> list:
    """Every audio file under ``source`` with its transcript."""
    tops = {name for name in os.listdir(source) if os.path.isdir(os.path.join(source, name))}
    split_of = {name: SPLIT_FOLDERS[name.lower()] for name in tops if name.lower() in SPLIT_FOLDERS}
    utterances = []
    for path in walk_files(source, AUDIO_EXTENSIONS):
        relative = os.path.relpath(path, source)
        parts = relative.split(os.sep)
        split = split_of.get(parts[0]) if len(parts) > 1 else None
        stem = os.path.splitext(relative)[0]
        data_id = stem.replace(os.sep, "-")
        transcript = os.path.splitext(path)[0] + ".txt"
        if os.path.isfile(transcript):
            text = read_transcript(transcript)
        elif allow_missing_text:
            text = ""
        else:
            raise ManifestError(f"{path}: no transcript {os.path.basename(transcript)} next to it (id "
                                f"{data_id!r}; pass --allow-missing-text to import it without one; {DOCS})")
        speaker = parts[-2] if len(parts) > (2 if split else 1) else data_id
        utterances.append(Utterance(data_id, path, text=text, speaker=speaker, split=split, where=path))
    if split_of and any(u.split is None for u in utterances):
        stray = next(u for u in utterances if u.split is None)
        raise ManifestError(f"{stray.where}: outside the split folders ({', '.join(sorted(split_of))}) of "
                            f"{source}")
    return utterances
