"""LibriSpeech: ``SPLIT/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac`` and one ``*.trans.txt`` per
chapter (``<id> WORDS...`` per line).

The split folders map to the templates' names: every ``train-*`` folder is ``train``, ``dev-clean`` (else
every ``dev-*``) is ``valid``, ``test-clean`` (else every ``test-*``) is ``test``; ``--train``, ``--valid``
and ``--test`` choose other folders. A source that is itself one split (speaker folders directly inside) is
split by speaker.

Example::

    speechkit data import librispeech /corpora/LibriSpeech --dest data/libri --train train-clean-100
"""
from __future__ import annotations

import os
from typing import Any, Optional

from speechkit.data.importers.base import DOCS, SPLITS, Utterance, is_regular_file
from speechkit.data.librispeech import _transcripts, find_splits, read_split, template_groups
from speechkit.errors import ManifestError


def read(source: str, *, train: Optional[list] = None, valid: Optional[list] = None,
         test: Optional[list] = None, ext: str = "flac", **_: Any) -> list:
    """Every utterance of the chosen split folders (or of ``source`` as one split, without a split)."""
    if _transcripts(source):  # speaker folders directly inside: one split, none given
        return [Utterance(i, row["wav"], text=row["text"], speaker=row["spk"], where=source)
                for i, row in read_split(source, ext=ext).items() if is_regular_file(row["wav"], i, source)]
    available = find_splits(source)
    if not available:
        raise ManifestError(f"{source}: no <speaker>/<chapter>/*.trans.txt files, nor split folders holding "
                            f"them ({DOCS})")
    groups = template_groups(available)
    for split, chosen in (("train", train), ("valid", valid), ("test", test)):
        if chosen:
            groups[split] = list(chosen)
    utterances = []
    for split in SPLITS:
        if not groups[split]:
            raise ManifestError(f"{source}: no folder for the {split} split (found: {', '.join(available)}); "
                                f"name one with --{split}")
        for folder in groups[split]:
            if folder not in available:
                raise ManifestError(f"{source}: split folder {folder!r} not found (found: "
                                    f"{', '.join(available)})")
            path = os.path.join(source, folder)
            utterances.extend(Utterance(i, row["wav"], text=row["text"], speaker=row["spk"], split=split,
                                        where=path)
                              for i, row in read_split(path, ext=ext).items()
                              if is_regular_file(row["wav"], i, path))
    return utterances
