"""Convert a manifest's audio once to FLAC at a model's rate and channels, and write a manifest of the copies.

What ``speechkit data convert`` runs (docs/data.md, "The audio policy"). Each recording (or segment) is read
by an :class:`~speechkit.data.audio_policy.AudioPolicy`, the code every loader uses, and written as mono FLAC
at the policy's rate under ``DEST/audio/<manifest name>/``; ``DEST/<manifest name>.json`` names the copies as
``$data_root/audio/...`` (so ``--data_folder DEST`` finds them) and keeps every other field. Training then
reads files that need no conversion, and ``AudioPolicy(..., convert=False)`` can insist on it.

Safe to interrupt and rerun: every file is written under a temporary name and renamed, a copy newer than its
source at the right rate is kept (so a rerun converts only what is missing or changed), the manifest is
written last, atomically, and only when every item converted. A source is never written to.

Example:
    >>> convert_manifest("data/train.json", "data8k", AudioPolicy(8000), replacements={"data_root": "data"})
    ConversionReport(manifest='data8k/train.json', converted=2, kept=0, seconds=2.5, clipped=0)
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Optional

import numpy as np

from speechkit.atomic_files import atomic_write, replacing
from speechkit.data.audio_policy import AudioPolicy
from speechkit.data.fields import FILE_FIELDS
from speechkit.data.manifest import load_manifest, write_json_manifest
from speechkit.errors import AudioError, DataError, ManifestError

#: The settings a folder of copies was made with (a rerun with others is refused: its copies would mix).
SETTINGS_FILE = "conversion.json"
AUDIO_DIR = "audio"
PLACEHOLDER = "data_root"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class ConversionReport(NamedTuple):
    """One manifest's conversion: the manifest written, files converted now and kept from an earlier run,
    the audio's total seconds, and samples clipped to full scale (resampling can overshoot a loud file)."""

    manifest: str
    converted: int
    kept: int
    seconds: float
    clipped: int


def audio_fields(row: Mapping[str, Any]) -> list:
    """The fields of a row that name audio: ``wav``, ``audio``, ``flac``, ``file``, ``path`` and ``*_wav``
    (separation manifests' ``mix_wav``, ``s1_wav``, ...)."""
    return [name for name in row if name in FILE_FIELDS or name.endswith("_wav")]


def copy_name(item_id: str, field: str, several: bool) -> str:
    """The copy's file name: the id made safe for any file system (a hash added when it had to change, so
    two ids never share a file), with the field when a row has several audio fields.

    Example:
        >>> copy_name("spk1/utt 3", "wav", several=False)
        'spk1_utt_3-b0f44fc0.flac'
    """
    safe = _UNSAFE.sub("_", item_id)[:120]
    if safe != item_id or safe.startswith("."):
        safe = f"{safe.lstrip('.') or 'item'}-{hashlib.sha1(item_id.encode('utf-8')).hexdigest()[:8]}"
    return f"{safe}.{field}.flac" if several else f"{safe}.flac"


def convert_manifest(manifest: str, dest: str, policy: AudioPolicy, *,
                     fields: Optional[Sequence[str]] = None, replacements: Optional[Mapping[str, str]] = None,
                     subtype: str = "PCM_16", num_workers: int = 1,
                     progress: Optional[Callable[[int, int], None]] = None) -> ConversionReport:
    """Convert the audio of ``manifest`` into ``dest`` (see the module docstring).

    Arguments:
        fields: the audio fields to convert (default: :func:`audio_fields` of each row).
        replacements: ``{name: value}`` for the manifest's ``$name`` placeholders.
        subtype: the FLAC sample format, ``PCM_16`` or ``PCM_24``.
        num_workers: processes converting files.
        progress: called as ``progress(done, total)`` after each file.

    Raises:
        ManifestError: a bad manifest, or a name clash with the source.
        AudioError: files that cannot be read or converted (each named with its id); the copies made are kept
            and the manifest is not written.
        DataError: ``dest`` holds copies made with other settings.
    """
    if subtype not in ("PCM_16", "PCM_24"):
        raise DataError(f"subtype must be PCM_16 or PCM_24, got {subtype!r}")
    rows = load_manifest(manifest, replacements)
    name = os.path.splitext(os.path.basename(manifest))[0]
    out_manifest = os.path.join(dest, f"{name}.json")
    if os.path.exists(out_manifest) and os.path.samefile(out_manifest, manifest):
        raise ManifestError(f"{manifest}: --dest would replace this manifest; choose another folder")
    folder = os.path.join(dest, AUDIO_DIR, name)
    _claim_folder(folder, policy, subtype)
    jobs, new_rows, primary = [], {}, {}
    for item_id, row in rows.items():
        chosen = list(fields) if fields else audio_fields(row)
        missing = [f for f in chosen if f not in row]
        if missing or not chosen:
            raise ManifestError(f"{manifest}: item {item_id!r} has no audio field "
                                f"{missing[0] if missing else 'wav'!r} (fields: {sorted(row)})")
        primary[item_id] = chosen[0]  # its duration is the row's
        new_rows[item_id] = dict(row)
        for field in chosen:
            file_name = copy_name(item_id, field, several=len(chosen) > 1)
            jobs.append((item_id, field, row[field], os.path.join(folder, file_name), policy, subtype))
            new_rows[item_id][field] = f"${PLACEHOLDER}/{AUDIO_DIR}/{name}/{file_name}"
        if "sample_rate" in row:
            new_rows[item_id]["sample_rate"] = policy.sample_rate
        if "channels" in row:
            new_rows[item_id]["channels"] = 1
    results = _run(jobs, num_workers, progress)
    failures = [f"{item_id!r}: {error}" for item_id, _, _, _, error in results if error]
    if failures:
        more = f" and {len(failures) - 5} more" if len(failures) > 5 else ""
        raise AudioError(f"{manifest}: {len(failures)} of {len(jobs)} file(s) could not be converted: "
                         f"{'; '.join(failures[:5])}{more}. The {len(jobs) - len(failures)} converted are "
                         "kept (a rerun skips them); no manifest was written")
    seconds = 0.0
    for item_id, field, duration, _, _ in results:
        if field == primary[item_id]:
            seconds += duration
            if "duration" in new_rows[item_id]:
                new_rows[item_id]["duration"] = round(duration, 6)
    write_json_manifest(new_rows, out_manifest)
    converted = sum(1 for r in results if r[3] >= 0)
    return ConversionReport(out_manifest, converted, len(results) - converted, seconds,
                            sum(max(r[3], 0) for r in results))


def _claim_folder(folder: str, policy: AudioPolicy, subtype: str) -> None:
    """Record the settings of ``folder``'s copies, or check that a rerun uses the same ones."""
    from speechkit.data.resample import POLICY_FILTER

    settings = {"sample_rate": policy.sample_rate, "channels": policy.channels, "subtype": subtype,
                "resampler": POLICY_FILTER}
    path = os.path.join(folder, SETTINGS_FILE)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            recorded = json.load(handle)
        if recorded != json.loads(json.dumps(settings)):
            raise DataError(f"{folder} holds copies made with other settings ({recorded}); choose another "
                            "--dest, or remove that folder to convert again")
        return
    os.makedirs(folder, exist_ok=True)
    with atomic_write(path) as handle:
        json.dump(settings, handle, indent=1)


def _run(jobs: list, num_workers: int, progress: Optional[Callable[[int, int], None]]) -> list:
    if num_workers > 1 and len(jobs) > 1:
        import multiprocessing

        with multiprocessing.Pool(num_workers) as pool:
            results = []
            for result in pool.imap(convert_one, jobs, chunksize=8):
                results.append(result)
                if progress:
                    progress(len(results), len(jobs))
            return results
    results = []
    for job in jobs:
        results.append(convert_one(job))
        if progress:
            progress(len(results), len(jobs))
    return results


def convert_one(job: tuple) -> tuple:
    """Convert one file: ``(id, field, seconds, clipped samples (-1: an earlier copy kept), error)``, the
    error None on success."""
    import soundfile
    import torch

    torch.set_num_threads(1)  # one file per process: workers must not fight over the cores
    item_id, field, source, target, policy, subtype = job
    source_path = source.get("file") if isinstance(source, Mapping) else source
    try:
        if os.path.exists(source_path) and os.path.realpath(source_path) == os.path.realpath(target):
            return item_id, field, 0.0, 0, f"{target} is its own source; it is never written over"
        kept = _up_to_date(target, source_path, policy)
        if kept is not None:
            return item_id, field, kept, -1, None
        wave = policy.read(source).numpy()
        top = 1.0 - 2.0 ** -15 if subtype == "PCM_16" else 1.0 - 2.0 ** -23
        clipped = int(np.count_nonzero(np.abs(wave) > top))
        wave = np.clip(wave, -1.0, top)
        with replacing(target) as temporary:
            soundfile.write(temporary, wave, policy.sample_rate, format="FLAC", subtype=subtype)
        return item_id, field, len(wave) / policy.sample_rate, clipped, None
    except (AudioError, OSError, RuntimeError) as error:
        return item_id, field, 0.0, 0, str(error)


def _up_to_date(target: str, source: str, policy: AudioPolicy) -> Optional[float]:
    """The copy's duration when it is complete, newer than its source and at the policy's rate; else None."""
    import soundfile

    try:
        if os.stat(target).st_mtime_ns < os.stat(source).st_mtime_ns:
            return None
        found = soundfile.info(target)
    except (OSError, RuntimeError):
        return None
    if found.samplerate != policy.sample_rate or found.channels != 1:
        return None
    return found.frames / found.samplerate
