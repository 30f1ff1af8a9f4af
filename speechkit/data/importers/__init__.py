"""Importers: a corpus layout in, ``train.json``, ``valid.json`` and ``test.json`` out (docs/data.md, "Bring
your own data").

One module per layout, each with ``read(source, **options) -> list[Utterance]``; :data:`IMPORTERS` names
them and :func:`import_corpus` runs one and writes the manifests (:mod:`speechkit.data.importers.base`).

Example:
    >>> from pathlib import Path
    >>> for n in (1, 2, 3):   # a transcript next to each recording
    ...     _ = Path(f"data/utt{n}.txt").write_text("HELLO")
    >>> import_corpus("folder", "data", "data/mine")
    folder: no split in the source; split by speaker with seed 1234: train 1 utterances / 1 speakers, valid 1
    utterances / 1 speakers, test 1 utterances / 1 speakers (written to data/mine/split.json)
    train: 1 utterances -> data/mine/train.json
    valid: 1 utterances -> data/mine/valid.json
    test: 1 utterances -> data/mine/test.json
    {'train': 'data/mine/train.json', 'valid': 'data/mine/valid.json', 'test': 'data/mine/test.json'}
"""
from __future__ import annotations

import importlib
import os
from typing import Any, Callable, Optional

from speechkit.errors import ManifestError

#: layout -> (module, has transcripts, one-line description)
IMPORTERS = {
    "commonvoice": ("speechkit.data.importers.commonvoice", True,
                    "clips/*.mp3 with train.tsv, dev.tsv, test.tsv (path, sentence, client_id)"),
    "librispeech": ("speechkit.data.importers.librispeech", True,
                    "SPLIT/<speaker>/<chapter>/*.flac with *.trans.txt"),
    "csv": ("speechkit.data.importers.table", True,
            "a CSV, TSV or JSON Lines table (or train/valid/test tables) with path, text, speaker columns"),
    "kaldi": ("speechkit.data.importers.kaldi", True,
              "Kaldi data directories: wav.scp, text, utt2spk, segments"),
    "folder": ("speechkit.data.importers.folder", True, "audio files with same-name .txt transcripts"),
    "voxceleb": ("speechkit.data.importers.voxceleb", False, "id*/<video>/*.wav, speakers without text"),
    "librimix": ("speechkit.data.importers.librimix", False,
                 "separation folders: SPLIT/mix_clean/, s1/, s2/ (noise/)"),
}


def import_corpus(layout: str, source: str, dest: str, *, valid_fraction: float = 0.1,
                  test_fraction: float = 0.1, seed: int = 1234, log: Callable[[str], None] = print,
                  progress: Optional[Callable[[int, int], None]] = None, **options: Any) -> dict:
    """Read ``source`` in ``layout`` and write ``dest/{train,valid,test}.json``; ``options`` go to the
    layout's reader. Returns ``{split: manifest path}``.

    Raises:
        ManifestError: an unknown layout, a missing source, or a bad row (naming the file and line).
    """
    from speechkit.data.importers.base import write_import

    if layout not in IMPORTERS:
        raise ManifestError(f"unknown layout {layout!r}; choose one of {', '.join(IMPORTERS)}")
    if not os.path.exists(source):
        raise ManifestError(f"{layout} source not found: {source}")
    if os.path.abspath(dest) == os.path.abspath(source):
        raise ManifestError(f"--dest {dest} is the source folder; write the manifests elsewhere")
    module_name, has_text, _ = IMPORTERS[layout]
    utterances = importlib.import_module(module_name).read(os.path.abspath(source), **options)
    return write_import(utterances, dest, source=source, layout=layout, valid_fraction=valid_fraction,
                        test_fraction=test_fraction, seed=seed, has_text=has_text, log=log, progress=progress)
