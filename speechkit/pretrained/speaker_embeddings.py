"""Speaker embeddings of a manifest's audio, written as ``.npy`` files with a manifest (``speechkit embed``
with a :class:`~speechkit.pretrained.SpeakerRecognition` model).

Writes ``<output>/<id>.npy`` (``(dim,)`` float32) per row and ``manifest.json``: ``{id: {"embedding": path,
"source": audio path, "spk": the row's speaker or null}}``. Files are embedded in batches of ``batch_size``
(the embeddings do not depend on the batch).

Example:
    >>> model = SpeakerRecognition.from_hparams("results/speaker-model")               # doctest: +SKIP
    >>> write_speaker_embeddings(model, {"u1": {"wav": "a.flac"}}, "emb/")             # doctest: +SKIP
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

import torch

from speechkit.atomic_files import atomic_write
from speechkit.errors import ManifestError
from speechkit.pretrained.mel_embeddings import _save_atomic, file_stem


def write_speaker_embeddings(model, rows: dict, output, audio_field: str = "wav", batch_size: int = 8,
                             progress: Optional[Callable[[int, int], None]] = None) -> Path:
    """Embed every row's audio with ``model`` into ``output``; returns the manifest's path."""
    for item_id, row in rows.items():
        if audio_field not in row:
            raise ManifestError(f"item '{item_id}' has no field '{audio_field}' (the audio)")
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    ids, manifest = list(rows), {}
    for start in range(0, len(ids), batch_size):
        chunk = ids[start:start + batch_size]
        waves = [model.load_audio(rows[item_id][audio_field]) for item_id in chunk]
        lengths = torch.tensor([w.shape[0] for w in waves])
        batch = torch.zeros(len(waves), int(lengths.max()))
        for index, wave in enumerate(waves):
            batch[index, : wave.shape[0]] = wave
        embeddings = model.embed_batch(batch, lengths).cpu()
        for item_id, embedding in zip(chunk, embeddings):
            path = output / f"{file_stem(item_id)}.npy"
            _save_atomic(path, embedding.numpy())
            manifest[item_id] = {"embedding": str(path.resolve()), "source": str(rows[item_id][audio_field]),
                                 "spk": rows[item_id].get("spk")}
        if progress:
            progress(len(manifest), len(ids))
    path = output / "manifest.json"
    with atomic_write(path) as handle:
        handle.write(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return path
