"""Mel "embeddings" of recordings for a vocoder: compute them, interpolate between two, store them for a job.

A vocoder's input is a log mel spectrogram, which makes a handy embedding of a recording: it can be stored,
edited, or blended with another one, and any such array becomes audio with :meth:`Vocoder.generate` or, for
many arrays, the sharded ``generate`` job (``speechkit infer --task generate``). :func:`write_embeddings`
writes each input's mel and, for each pair asked for, ``steps`` blends from the first input to the second, as
``.npy`` files plus a manifest the job reads: ``{id: {"mel": path, "duration": s, "source": audio path or
"<first> -> <second>", "alpha": null or the blend's weight of the second}}``.

Example:
    >>> vocoder = Vocoder.from_hparams("results/vocoder-model")                        # doctest: +SKIP
    >>> a, b = vocoder.mel_of_file("a.flac"), vocoder.mel_of_file("b.flac")            # doctest: +SKIP
    >>> halfway = interpolate_mels(a, b, 0.5)  # (round(mean of the frame counts), n_mels)  # doctest: +SKIP
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from speechkit.atomic_files import atomic_write
from speechkit.errors import ManifestError


def stretch(mel: torch.Tensor, frames: int) -> torch.Tensor:
    """(frames, n_mels): ``mel`` linearly resampled along time to ``frames`` frames (first and last kept)."""
    if mel.shape[0] == frames:
        return mel.clone()
    resized = torch.nn.functional.interpolate(mel.T.unsqueeze(0), size=frames, mode="linear",
                                              align_corners=frames > 1)
    return resized[0].T.contiguous()


def interpolate_mels(first: torch.Tensor, second: torch.Tensor, alpha: float) -> torch.Tensor:
    """A blend of two (frames, n_mels) log mels: both are stretched to the interpolated frame count
    ``round((1 - alpha) * frames_1 + alpha * frames_2)``, then mixed ``(1 - alpha) * first + alpha * second``
    (alpha 0 gives ``first``, 1 gives ``second``).

    Example:
        >>> interpolate_mels(torch.zeros(10, 4), torch.ones(20, 4), 0.5).shape
        torch.Size([15, 4])
    """
    if first.dim() != 2 or second.dim() != 2 or first.shape[1] != second.shape[1]:
        raise ValueError(f"need two (frames, n_mels) mels with the same n_mels, got {tuple(first.shape)} "
                         f"and {tuple(second.shape)}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    frames = max(1, round((1.0 - alpha) * first.shape[0] + alpha * second.shape[0]))
    return (1.0 - alpha) * stretch(first, frames) + alpha * stretch(second, frames)


def file_stem(item_id: str) -> str:
    """A file name for an id: the id itself when it is plain, else its plain characters and a hash."""
    safe = re.sub(r"[^A-Za-z0-9._~-]", "_", item_id)[:150]
    if safe != item_id or safe.startswith("."):
        safe = f"{safe.lstrip('.') or 'item'}-{hashlib.sha1(item_id.encode('utf-8')).hexdigest()[:10]}"
    return safe


def _save_atomic(path: Path, array: np.ndarray) -> None:
    with atomic_write(path, "wb") as handle:  # a file object: np.save would add ".npy" to the name
        np.save(handle, np.ascontiguousarray(array, dtype=np.float32), allow_pickle=False)


def write_embeddings(vocoder, rows: dict, output, pairs: Sequence = (), steps: int = 5,
                     audio_field: str = "wav", progress: Optional[Callable[[int, int], None]] = None) -> Path:
    """Write each row's mel and the blends of each pair to ``output``; returns the manifest's path.

    Args:
        vocoder: a :class:`speechkit.pretrained.Vocoder` (its mel settings define the embedding).
        rows: ``{id: {audio_field: path, ...}}``, e.g. a loaded manifest.
        output: folder for ``<id>.npy``, ``<first>~<second>~<k>.npy`` and ``manifest.json``.
        pairs: ``(first_id, second_id)`` pairs to blend.
        steps: blends per pair at alphas ``linspace(0, 1, steps)`` (so the ends equal the inputs' mels).
        progress: called as ``progress(done, total)`` after each array written (rows, then blends).

    Raises:
        ManifestError: a pair names an id that is not in ``rows``, a blend's id (or file name) is already an
            item's, or a row has no ``audio_field``.
    """
    if steps < 2:
        raise ValueError(f"steps must be >= 2 (the two ends at least), got {steps}")
    missing = sorted({i for pair in pairs for i in pair} - set(rows))
    if missing:
        raise ManifestError(f"--interpolate names id(s) not in the manifest: {', '.join(missing)}")
    pairs = list(dict.fromkeys(map(tuple, pairs)))  # a pair given twice is blended once
    taken = {file_stem(item_id): item_id for item_id in rows}
    for first, second in pairs:  # checked before anything is written: a blend never replaces an item
        for item_id in (f"{first}~{second}~{k}" for k in range(steps)):
            if file_stem(item_id) in taken:
                raise ManifestError(f"the blend id {item_id!r} is already the manifest's item "
                                    f"{taken[file_stem(item_id)]!r} (or its file name): rename the item, or "
                                    "blend other ids")
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    seconds_per_frame = vocoder.hop_length / vocoder.sample_rate
    manifest, mels = {}, {}
    total = len(rows) + len(pairs) * steps
    for item_id, row in rows.items():
        if audio_field not in row:
            raise ManifestError(f"item '{item_id}' has no field '{audio_field}' (the audio)")
        mels[item_id] = vocoder.mel_of_file(row[audio_field]).cpu()
        path = output / f"{file_stem(item_id)}.npy"
        _save_atomic(path, mels[item_id].numpy())
        manifest[item_id] = {"mel": str(path.resolve()), "source": str(row[audio_field]), "alpha": None,
                             "duration": mels[item_id].shape[0] * seconds_per_frame}
        if progress:
            progress(len(manifest), total)
    for first, second in pairs:
        for k, alpha in enumerate(np.linspace(0.0, 1.0, steps).tolist()):
            mel = interpolate_mels(mels[first], mels[second], alpha)
            item_id = f"{first}~{second}~{k}"
            path = output / f"{file_stem(item_id)}.npy"
            _save_atomic(path, mel.numpy())
            manifest[item_id] = {"mel": str(path.resolve()), "duration": mel.shape[0] * seconds_per_frame,
                                 "source": f"{first} -> {second}", "alpha": alpha}
            if progress:
                progress(len(manifest), total)
    path = output / "manifest.json"
    with atomic_write(path) as handle:
        handle.write(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return path
