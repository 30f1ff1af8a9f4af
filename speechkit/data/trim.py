"""Edge silence: where speech starts and ends in a recording, and manifests that point at that part only.

Read and synthetic speech usually carries a few hundred milliseconds of silence before and after the words.
A recognizer learns nothing from most of it (the CTC blank covers silence after a few frames), yet every
frame of it costs a step of the encoder. Trimming it in the manifest, as a ``{"file", "start", "stop"}``
segment, keeps the audio files as they are, keeps the durations that the batch sampler sorts by exact, and
costs nothing when the data is read (a seek instead of reading from the start).

The detector compares the energy of short frames with the loudest frame of the recording, so it needs no
calibration for the recording level; speech quieter than ``threshold_db`` below the peak at either end counts
as silence. It is meant for edges only: pauses inside an utterance are kept.

From the command line (``speechkit trim-silence``)::

    speechkit trim-silence data/train.json data/train.trimmed.json --replace data_root=data --margin 0.1

Example:
    >>> rows = load_manifest("data/train.json", file_fields=())
    >>> trimmed = trim_manifest(rows, {"data_root": "data"}, margin=0.1)
    >>> trimmed["utt1"]["wav"]   # 0.3 s of silence, 1 s of tone, 0.2 s of silence
    {'file': '$data_root/utt1.wav', 'start': 3200, 'stop': 22400, 'unit': 'samples'}
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional

import numpy as np

from speechkit import distributed
from speechkit.data.manifest import load_manifest, substitute, write_json_manifest
from speechkit.errors import AudioError, HparamsError, ManifestError


def speech_bounds(wave: np.ndarray, threshold_db: float = -40.0, frame: int = 160,
                  margin: int = 0) -> tuple:
    """``(first, last)`` sample of the speech in ``wave``: edge frames quieter than ``threshold_db`` below the
    loudest frame are silence; ``margin`` samples of it are kept on each side.

    Args:
        wave: samples, shape (time,) or (time, channels) (channels are averaged in power).
        threshold_db: level, relative to the loudest ``frame``-sample frame, under which a frame is silent.
        frame: frame length in samples (160: 10 ms at 16 kHz).
        margin: samples kept before the first and after the last loud frame.

    Returns:
        ``(first, last)`` with ``0 <= first < last <= len(wave)``; the whole wave when it is shorter than a
        frame or has no frame above the threshold (all digital zero).

    Example:
        >>> wave = np.concatenate([np.zeros(1600), np.ones(800), np.zeros(1600)])
        >>> speech_bounds(wave, margin=160)
        (1440, 2560)
    """
    wave = np.asarray(wave)
    length = len(wave)
    frames = length // frame
    if frames == 0:
        return 0, length
    power = wave[: frames * frame].astype(np.float64) ** 2
    if power.ndim > 1:
        power = power.mean(axis=1)
    energy = power.reshape(frames, frame).mean(axis=1)
    if energy.max() <= 0.0:
        return 0, length
    level = 10.0 * np.log10(energy + 1e-12)
    loud = np.nonzero(level > level.max() + threshold_db)[0]
    first = max(0, int(loud[0]) * frame - margin)
    last = min(length, (int(loud[-1]) + 1) * frame + margin)
    return first, last


def trim_batch(wavs, lengths, sample_rate: int, margin: float = 0.1, threshold_db: float = -40.0) -> tuple:
    """Trim each item of a zero-padded batch to its speech, as :func:`trim_manifest` trims files.

    A model trained on trimmed manifests should see its input trimmed the same way at inference (the
    per-utterance feature normalization would otherwise see other statistics); the pretrained interfaces
    call this when their hyperparameters hold ``trim_silence: {margin: ..., threshold_db: ...}``.

    Args:
        wavs: (batch, time) float waveforms, zero-padded.
        lengths: (batch,) int64 valid samples per item.
        sample_rate: samples per second (frames are 10 ms).

    Returns:
        ``(trimmed, new_lengths)``: (batch, longest trimmed item) on the device of ``wavs``, and (batch,).

    Example:
        >>> wavs = torch.zeros(2, 16000); wavs[0, 4000:8000] = 0.5; wavs[1, :12000] = 0.5
        >>> trim_batch(wavs, torch.tensor([16000, 12000]), 16000, margin=0.0)[1]
        tensor([ 4000, 12000])
    """
    import torch

    rows = []
    for wave, length in zip(wavs, lengths.tolist()):
        samples = wave[:length]
        first, last = speech_bounds(samples.detach().cpu().numpy(), threshold_db, frame=sample_rate // 100,
                                    margin=round(margin * sample_rate))
        rows.append(samples[first:last])
    new_lengths = torch.tensor([len(row) for row in rows], dtype=torch.int64, device=lengths.device)
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True), new_lengths


def trim_manifest(rows: Mapping[str, Mapping[str, Any]], replacements: Optional[Mapping[str, str]] = None, *,
                  field: str = "wav", margin: float = 0.1, threshold_db: float = -40.0,
                  num_workers: int = 1, name: str = "manifest",
                  progress: Optional[Callable[[int, int], None]] = None) -> dict:
    """A copy of ``rows`` whose ``field`` is the speech segment of each recording, with ``duration`` to match.

    Args:
        rows: ``{id: {field: path or segment, "duration": ..., ...}}``, loaded with the placeholders kept
            (``load_manifest(path, file_fields=())``), so that the output keeps them too.
        replacements: values of the placeholders, to find the files.
        field: the audio field; a value that is already a segment is trimmed inside that segment.
        margin: seconds of silence kept on each side of the speech.
        threshold_db: see :func:`speech_bounds`.
        num_workers: processes reading audio (above 1, rows are read in parallel).
        name: the manifest's path, named in errors.
        progress: called as ``progress(done, total)`` after each recording read.

    Returns:
        ``{id: row}`` in the order of ``rows``, ``row[field] = {"file", "start", "stop", "unit": "samples"}``.

    Raises:
        ManifestError: a row without ``field``, or with a file that cannot be read (names the id and file).
    """
    if margin < 0:
        raise ValueError(f"margin must be >= 0 seconds, got {margin}")
    if threshold_db >= 0:
        raise ValueError(f"threshold_db must be below 0 (dB under the loudest frame), got {threshold_db}")
    jobs = []
    for data_id, row in rows.items():
        if field not in row:
            raise ManifestError(f"{name}: id {data_id!r}: no field {field!r} to trim (fields: {sorted(row)})")
        jobs.append((f"{name}: id {data_id!r}", row[field], dict(replacements or {}), margin, threshold_db))
    if num_workers > 1 and len(jobs) > 1:
        import multiprocessing

        with multiprocessing.Pool(num_workers) as pool:
            found = []
            for result in pool.imap(_segment_of, jobs, chunksize=32):
                found.append(result)
                if progress:
                    progress(len(found), len(jobs))
    else:
        found = []
        for job in jobs:
            found.append(_segment_of(job))
            if progress:
                progress(len(found), len(jobs))
    trimmed = {}
    for (data_id, row), (segment, duration) in zip(rows.items(), found):
        trimmed[data_id] = {**row, field: segment, "duration": duration}
    return trimmed


def trim_manifest_files(manifests: Mapping[str, str], folder: str,
                        replacements: Optional[Mapping[str, str]] = None, **options: Any) -> dict:
    """Write a trimmed copy of each manifest into ``folder`` (same file name; options as in
    :func:`trim_manifest`) and return ``{split: trimmed path}``.

    A copy newer than its manifest is kept as it is, so a resumed run does not read every file again: name
    ``folder`` after the options (a copy made with other options is not detected).

    Example:
        >>> trim_manifest_files({"train": "data/train.json"}, "results/manifests",
        ...                     {"data_root": "data"}, margin=0.1)
        {'train': 'results/manifests/train.json'}
    """
    written = {}
    for split, path in manifests.items():
        target = os.path.join(folder, os.path.splitext(os.path.basename(path))[0] + ".json")
        if os.path.abspath(target) == os.path.abspath(path):
            raise ManifestError(f"{path}: the trimmed copy would overwrite it; choose another folder")
        if not (os.path.isfile(target) and os.path.getmtime(target) >= os.path.getmtime(path)):
            rows = load_manifest(path, file_fields=())
            write_json_manifest(trim_manifest(rows, replacements, name=path, **options), target)
        written[split] = target
    return written


def trim_splits_once(manifests: Mapping[str, str], splits: Iterable[str], folder: str,
                     replacements: Optional[Mapping[str, str]] = None, margin: Optional[float] = 0.1,
                     **options: Any) -> dict:
    """``manifests`` with those of ``splits`` replaced by copies trimmed to the speech and ``margin`` seconds
    around it, written into ``<folder>/trim_margin-<margin>/`` by the main process only (the others wait,
    then read the same paths): what a recipe does before building its datasets. ``margin=None`` returns
    ``manifests`` unchanged (the recordings are read whole). Options as in :func:`trim_manifest`.

    Raises:
        HparamsError: a split of ``splits`` is not one of ``manifests``.

    Example:
        >>> trim_splits_once({"train": "data/train.json", "test": "data/test.json"},
        ...                  ["train"], "results/manifests", {"data_root": "data"}, margin=0.1)
        {'train': 'results/manifests/trim_margin-0.1/train.json', 'test': 'data/test.json'}
    """
    if margin is None:
        return dict(manifests)
    unknown = sorted(set(splits) - set(manifests))
    if unknown:
        raise HparamsError(f"trim_splits: no split {unknown[0]!r} (the splits are {sorted(manifests)})")
    chosen = {split: manifests[split] for split in splits}
    folder = os.path.join(folder, f"trim_margin-{margin}")  # a copy made with another margin is not reused
    trimmed = distributed.run_on_main(trim_manifest_files, args=(chosen, folder, replacements),
                                      kwargs={"margin": margin, **options})
    return {**manifests, **distributed.broadcast_object(trimmed)}


def _segment_of(job: tuple) -> tuple:
    """``(segment, duration in seconds)`` of one row's speech (runs in worker processes)."""
    # Imported here: the corpus builder uses speech_bounds alone, without torch.
    from speechkit.data.audio import read_array

    where, source, replacements, margin, threshold_db = job
    if isinstance(source, Mapping):
        path, offset = source.get("file"), source.get("start") or 0
        if source.get("unit", "samples") != "samples":
            raise ManifestError(f"{where}: trimming needs segments in samples, got {dict(source)!r}")
    else:
        path, offset = source, 0
    try:
        wave, rate = read_array(substitute(source, replacements))
    except AudioError as error:  # names the file
        raise ManifestError(f"{where}: {error}") from None
    first, last = speech_bounds(wave, threshold_db, frame=rate // 100, margin=round(margin * rate))
    segment = {"file": path, "start": int(offset) + first, "stop": int(offset) + last, "unit": "samples"}
    return segment, (last - first) / rate
