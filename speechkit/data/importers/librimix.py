"""LibriMix and WHAM!-style separation folders: ``SPLIT/mix_clean/<id>.wav`` with ``s1/``, ``s2/`` (``s3/``)
and optionally ``noise/`` holding the same file names.

Rows are written as the separation template reads its mixtures (``speechkit.data.mixtures``)::

    {"<id>": {"mix_wav": ..., "s1_wav": ..., "s2_wav": ..., ["noise_wav": ...,] "duration": ...,
              "sample_rate": ..., "channels": ..., "speaker": "<s1 speaker>+<s2 speaker>"}}

Split folders map to the templates' names: ``train-*``/``tr`` -> train, ``dev``/``cv`` -> valid,
``test``/``tt`` -> test (``SRC`` is e.g. ``Libri2Mix/wav8k/min``); a source that is itself one split folder is
split by speaker. ``--mixture`` picks the mixture folder (``mix_clean``, ``mix_both``, ``mix_single``). The
speakers come from LibriMix ids (``<spk>-<chapter>-<utt>_<spk>-<chapter>-<utt>``), else the id.

Example::

    speechkit data import librimix ~/Libri2Mix/wav8k/min --dest data/libri2mix
"""
from __future__ import annotations

import os
import re
from typing import Any, Optional

from speechkit.data.importers.base import DOCS, Utterance, audio_fields, walk_files
from speechkit.errors import ManifestError

SPLIT_NAMES = {"tr": "train", "cv": "valid", "dev": "valid", "valid": "valid", "tt": "test", "test": "test"}
_LIBRI_UTTERANCE = re.compile(r"^(\d+)-\d+-\d+$")


def split_of(name: str) -> Optional[str]:
    lowered = name.lower()
    return "train" if lowered.startswith("train") else SPLIT_NAMES.get(lowered)


def speakers_of(data_id: str, count: int) -> str:
    parts = data_id.split("_")
    if len(parts) >= count:
        found = [_LIBRI_UTTERANCE.match(part) for part in parts[:count]]
        if all(found):
            return "+".join(match.group(1) for match in found)
    return data_id


def read_split(folder: str, split: Optional[str], mixture: str) -> list:
    mixtures = os.path.join(folder, mixture)
    sources = sorted(name for name in os.listdir(folder) if re.fullmatch(r"s\d", name))
    if len(sources) < 2:
        raise ManifestError(f"{folder}: needs s1/ and s2/ source folders next to {mixture}/ ({DOCS})")
    noise = os.path.isdir(os.path.join(folder, "noise"))
    utterances = []
    for path in walk_files(mixtures, (".wav", ".flac")):
        name = os.path.relpath(path, mixtures)
        data_id = os.path.splitext(name)[0].replace(os.sep, "-")
        extra = {"mix_wav": path}
        for source in sources + (["noise"] if noise else []):
            other = os.path.join(folder, source, name)
            if not os.path.isfile(other):
                raise ManifestError(f"{path}: mixture {data_id!r} has no {source}/ file {other}")
            extra[f"{source}_wav"] = other
        lengths = {key: audio_fields(value, data_id)["duration"] for key, value in extra.items()}
        if max(lengths.values()) - min(lengths.values()) > 1e-3:
            raise ManifestError(f"{path}: mixture {data_id!r} and its sources differ in length ({lengths})")
        utterances.append(Utterance(data_id, None, speaker=speakers_of(data_id, len(sources)), split=split,
                                    where=path, extra=extra))
    return utterances


def read(source: str, *, mixture: str = "mix_clean", **_: Any) -> list:
    """Every mixture of ``source``'s split folders (or of ``source`` as one split)."""
    if os.path.isdir(os.path.join(source, mixture)):
        return read_split(source, None, mixture)
    found = {}
    for name in sorted(os.listdir(source)):
        split = split_of(name)
        if split and os.path.isdir(os.path.join(source, name, mixture)):
            found.setdefault(split, []).append(name)
    if set(found) != {"train", "valid", "test"}:
        raise ManifestError(f"{source}: expected {mixture}/, or train/dev/test (tr/cv/tt) folders holding "
                            f"{mixture}/ (found: {sorted(sum(found.values(), [])) or 'none'}; {DOCS})")
    return [u for split, names in found.items() for name in names
            for u in read_split(os.path.join(source, name), split, mixture)]
