"""A user's own recordings as one more "engine" of the built-in corpus: real speech mixed with the synthetic.

A recording brings its transcript and its speaker with it; the corpus gives it the same treatment as a
synthesized utterance (edge silence trimmed, level, leading and trailing silence over a noise floor, optional
noise, 16 kHz FLAC) but no warp, and it keeps its own words. Every recording is used once; its speaker's voice
``recorded-<speaker>`` decides its split (train unless named in the test or valid voices; all of them with
``held_out_engine="recorded"``). The manifests' ``spk`` is that name too, so a real speaker never shares a
name with a synthetic one (tools that keep speakers apart, such as ``speechkit mixtures``, read ``spk``).

Where the transcripts and speakers come from:

- a **manifest** (``.json``, ``.jsonl``, ``.csv``: ``speechkit.data.manifest``) with ``wav`` and ``text`` per
  row and ``spk`` (or ``speaker``); relative paths and ``$data_root`` are read from the manifest's folder;
- a **folder**: every ``.wav``/``.flac``/``.ogg`` under it with a same-name ``.txt`` beside it holding the
  transcript; the speaker is the first sub-folder (``folder/<speaker>/.../x.wav``), or the folder's own name
  for files directly in it.

Transcripts are normalized as the corpus' own (:func:`speechkit.corpus.text.normalize_text`): upper-case
letters, apostrophes, single spaces; write numbers as words (``5`` would vanish, and is refused).

Example:
    >>> recordings = load_recordings("data/train.json")
    >>> recordings[0].voice, recordings[0].text
    ('recorded-alice', 'HELLO WORLD')
"""
from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass

import numpy as np
import soundfile

from speechkit.corpus import effects
from speechkit.corpus.text import normalize_text
from speechkit.errors import DataError

#: The engine name of recorded speech (``held_out_engine="recorded"`` tests on it alone).
RECORDED_ENGINE = "recorded"
VOICE_PREFIX = f"{RECORDED_ENGINE}-"
AUDIO_EXTENSIONS = (".wav", ".flac", ".ogg")
MANIFEST_EXTENSIONS = (".json", ".jsonl", ".csv", ".tsv")
_SPEAKER = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class Recording:
    """One recorded utterance: an absolute audio ``path``, its normalized ``text`` and ``speaker``."""

    path: str
    text: str
    speaker: str

    @property
    def voice(self) -> str:
        return f"{VOICE_PREFIX}{self.speaker}"


def is_recorded(voice_name: str) -> bool:
    """Whether a corpus voice name is a speaker of the user's recordings (``recorded-<speaker>``)."""
    return voice_name.startswith(VOICE_PREFIX)


def _checked(path: str, text: str, speaker: str, where: str) -> Recording:
    normalized = normalize_text(text or "")
    if not normalized:
        raise DataError(f"{where}: empty transcript (after keeping letters and apostrophes: {text!r}); write "
                        "numbers and symbols as words")
    if not speaker or not _SPEAKER.match(speaker):
        raise DataError(f"{where}: speaker {speaker!r} must be letters, digits, '_', '-' or '.'")
    if not os.path.isfile(path):
        raise DataError(f"{where}: audio file not found: {path}")
    return Recording(os.path.abspath(path), normalized, speaker)


def _from_manifest(path: str) -> list:
    from speechkit.data.manifest import load_manifest

    folder = os.path.dirname(os.path.abspath(path))
    # Its own ManifestError names the file and the id of a malformed row.
    rows = load_manifest(path, replacements={"data_root": folder}, check_files=False, require_duration=False)
    found = []
    for utt_id, row in rows.items():
        where = f"{path}: id {utt_id!r}"
        if "wav" not in row or "text" not in row:
            raise DataError(f"{where}: needs 'wav' and 'text' (has {sorted(row)})")
        speaker = row.get("spk", row.get("speaker"))
        if speaker is None:
            raise DataError(f"{where}: needs a speaker ('spk' or 'speaker')")
        wav = row["wav"] if os.path.isabs(row["wav"]) else os.path.join(folder, row["wav"])
        found.append(_checked(wav, str(row["text"]), str(speaker), where))
    return found


def _from_folder(folder: str) -> list:
    found = []
    own_name = os.path.basename(os.path.normpath(os.path.abspath(folder)))
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            stem, ext = os.path.splitext(name)
            if ext.lower() not in AUDIO_EXTENSIONS:
                continue
            path = os.path.join(root, name)
            transcript = os.path.join(root, f"{stem}.txt")
            if not os.path.isfile(transcript):
                raise DataError(f"{path}: no transcript {transcript} beside it (or give a manifest)")
            with open(transcript, encoding="utf-8") as handle:
                text = handle.read()
            relative = os.path.relpath(root, folder)
            speaker = own_name if relative == "." else relative.split(os.sep)[0]
            found.append(_checked(path, text, speaker, path))
    return found


def load_recordings(source: str) -> list:
    """The recordings of a folder or manifest (see the module docstring), in a stable order.

    Raises:
        DataError: no such path, no recording, a recording without a transcript or speaker, an empty
            transcript, a missing audio file, one path listed twice; each naming the file or id.
    """
    if os.path.isfile(source) and source.lower().endswith(MANIFEST_EXTENSIONS):
        found = _from_manifest(source)
    elif os.path.isdir(source):
        found = _from_folder(source)
    else:
        raise DataError(f"recordings {source}: neither a folder nor a manifest "
                        f"({', '.join(MANIFEST_EXTENSIONS)})")
    if not found:
        raise DataError(f"recordings {source}: no recording found ({', '.join(AUDIO_EXTENSIONS)} files with "
                        ".txt transcripts, or manifest rows)")
    seen: dict = {}
    for recording in found:
        if recording.path in seen:
            raise DataError(f"recordings {source}: {recording.path} is listed twice")
        seen[recording.path] = recording
    return sorted(found, key=lambda r: (r.speaker, r.path))


def recordings_checksum(recordings: list) -> int:
    """CRC of the paths, transcripts and sizes: a corpus is rebuilt only when these change."""
    text = "\n".join(f"{r.path}|{r.text}|{r.speaker}|{os.path.getsize(r.path)}" for r in recordings)
    return zlib.crc32(text.encode("utf-8"))


def read_recording(path: str, sample_rate: int) -> np.ndarray:
    """(time,) float64 at ``sample_rate`` (channels averaged, band-limited resampling).

    Raises:
        DataError: the file cannot be read as audio, or holds no samples.
    """
    try:
        wave, rate = soundfile.read(path, dtype="float64", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as error:
        raise DataError(f"{path}: unreadable audio ({error})") from error
    if wave.shape[0] == 0:
        raise DataError(f"{path}: no samples")
    return effects.resample(wave.mean(axis=1), rate, sample_rate).astype(np.float64)
