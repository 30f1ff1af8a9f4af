"""VoxCeleb: ``id<speaker>/<video>/<n>.wav`` for speaker recognition (no transcripts).

``SRC`` is the folder holding the ``id*`` speaker folders (or its parent with a ``wav/`` folder, as the
release unpacks). The id is ``<speaker>-<video>-<n>``; the speaker is the ``id*`` folder name. The split is
made by speaker (seeded), so valid and test speakers are never heard in training, as in verification.

Example::

    speechkit data import voxceleb ~/voxceleb1 --dest data/vox --valid-fraction 0.05 --test-fraction 0.05
"""
from __future__ import annotations

import os
from typing import Any

from speechkit.data.importers.base import DOCS, Utterance, walk_files
from speechkit.errors import ManifestError

SUFFIXES = (".wav", ".flac")


def read(source: str, **_: Any) -> list:
    """Every utterance under the ``id*`` speaker folders of ``source``."""
    if os.path.isdir(os.path.join(source, "wav")):
        source = os.path.join(source, "wav")
    speakers = sorted(name for name in os.listdir(source)
                      if name.startswith("id") and os.path.isdir(os.path.join(source, name)))
    if not speakers:
        raise ManifestError(f"{source}: no id*/ speaker folders (VoxCeleb holds id*/<video>/*.wav; {DOCS})")
    utterances = []
    for speaker in speakers:
        for path in walk_files(os.path.join(source, speaker), SUFFIXES):
            parts = os.path.relpath(path, source).split(os.sep)
            if len(parts) != 3:
                raise ManifestError(f"{path}: expected id*/<video>/<file> below {source}")
            data_id = "-".join([parts[0], parts[1], os.path.splitext(parts[2])[0]])
            utterances.append(Utterance(data_id, path, speaker=speaker, where=path))
    return utterances
