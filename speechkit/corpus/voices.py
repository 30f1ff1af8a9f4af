"""The synthetic voices of the built-in corpus and the engines that speak them.

A *speaker* is one recorded person behind a synthesizer (flite's ``rms``, festival's ``ked``...). A *voice*
is a speaker plus a fixed vocal-tract warp: resampling the synthesized audio by a factor moves pitch and
formants together, as a shorter or longer vocal tract would. Splits hold out whole voices, and by default
the test split holds out a whole speaker.

Engines run as separate programs (flite and espeak: one process per utterance; festival: one process per
batch of utterances), which keeps synthesis free of hidden state: the same text and settings give the same
samples, whatever the number of workers.

eSpeak NG voices (``ESPEAK_VOICES``, named ``espeak-<accent>-<variant>``) pair an English accent with a voice
variant. The variant sets pitch, formants and voice quality, the accent only pronunciation and rhythm, so the
*speaker* of an eSpeak voice is its variant: ``espeak-us-m3`` and ``espeak-sc-m3`` are one speaker
(``espeak-m3``) with two accents.

Example:
    >>> [v.name for v in VOICES if v.speaker == "kal"]
    ['kal', 'kal-lo', 'kal-hi']
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np
import soundfile

from speechkit.corpus import effects
from speechkit.errors import DataError

SAMPLE_RATE = 16000

#: engine name -> (program, Debian package that provides it)
ENGINE_PROGRAMS = {"flite": ("flite", "flite"), "festival": ("festival", "festival festvox-kdlpc16k"),
                   "espeak": ("espeak-ng", "espeak-ng")}


@dataclass(frozen=True)
class Voice:
    """One voice: an engine's speaker, a fixed warp factor (>1: higher pitch and formants), a sex label."""

    name: str
    speaker: str
    engine: str
    engine_voice: str
    warp: float
    sex: str


def _variants(speaker: str, engine: str, engine_voice: str, sex: str, low: float, high: float) -> list:
    return [Voice(speaker, speaker, engine, engine_voice, 1.0, sex),
            Voice(f"{speaker}-lo", speaker, engine, engine_voice, low, sex),
            Voice(f"{speaker}-hi", speaker, engine, engine_voice, high, sex)]


#: Five speakers x three warps. flite ``kal16`` and festival ``kal_diphone`` are one person: kal16 only.
VOICES: tuple = tuple(
    _variants("rms", "flite", "rms", "m", 0.93, 1.09)
    + _variants("slt", "flite", "slt", "f", 0.94, 1.07)
    + _variants("awb", "flite", "awb", "m", 0.93, 1.08)
    + _variants("ked", "festival", "ked_diphone", "m", 0.93, 1.09)
    + _variants("kal", "flite", "kal16", "m", 0.94, 1.08)
)

#: Two more warps of each speaker (a shorter and a longer vocal tract than ``-lo``/``-hi``), not in the
#: default corpus: source separation uses them, since a separator generalises to new voices only after
#: hearing many.
EXTRA_VOICES: tuple = tuple(
    Voice(f"{speaker}-{tag}", speaker, engine, engine_voice, warp, sex)
    for speaker, engine, engine_voice, sex, low, high in (
        ("rms", "flite", "rms", "m", 0.87, 1.16), ("slt", "flite", "slt", "f", 0.88, 1.13),
        ("awb", "flite", "awb", "m", 0.87, 1.15), ("ked", "festival", "ked_diphone", "m", 0.87, 1.16),
        ("kal", "flite", "kal16", "m", 0.88, 1.15))
    for tag, warp in (("lower", low), ("higher", high))
)

#: eSpeak NG English accents: voice-name tag -> espeak-ng language voice (``espeak-ng --voices=en``).
ESPEAK_ACCENTS = {"us": "en-us", "gb": "en", "sc": "en-gb-scotland", "ca": "en-029"}
#: eSpeak NG variants that sound like ordinary speech (no whisper, croak or robot effects): tag -> sex.
ESPEAK_VARIANTS = {"m1": "m", "m2": "m", "m3": "m", "m4": "m", "m5": "m", "m6": "m", "m7": "m",
                   "f1": "f", "f2": "f", "f3": "f", "f4": "f"}

#: Formant-synthesized voices, every accent x variant (44), not in the default corpus: they sound robotic
#: (fine for separation and for variety of audio, not as the only voices to train recognition on).
ESPEAK_VOICES: tuple = tuple(
    Voice(f"espeak-{accent}-{variant}", f"espeak-{variant}", "espeak", f"{language}+{variant}", 1.0, sex)
    for accent, language in ESPEAK_ACCENTS.items() for variant, sex in ESPEAK_VARIANTS.items()
)

#: Every voice known by name (``voices=`` of a corpus may pick any of them).
ALL_VOICES: tuple = VOICES + EXTRA_VOICES + ESPEAK_VOICES

#: Default split of voices: test holds out a whole speaker; valid holds out one warp of each other speaker.
DEFAULT_TEST_VOICES = ("kal", "kal-lo", "kal-hi")
DEFAULT_VALID_VOICES = ("rms-hi", "slt-lo", "awb-hi", "ked-lo")


def voice_by_name(name: str) -> Voice:
    for voice in ALL_VOICES:
        if voice.name == name:
            return voice
    raise DataError(f"unknown corpus voice {name!r}; known voices: {', '.join(v.name for v in ALL_VOICES)}")


def check_engines(voices: Sequence[Voice]) -> None:
    """Raise DataError naming the missing program and its Debian package if a voice's engine is absent."""
    for engine in sorted({v.engine for v in voices}):
        program, package = ENGINE_PROGRAMS[engine]
        if shutil.which(program) is None:
            users = ", ".join(v.name for v in voices if v.engine == engine)
            raise DataError(f"voices {users} need the {engine!r} program, which is not installed "
                            f"(Debian: apt-get install {package}); or choose other voices with --voices")


def speaker_of(voice_name: str) -> str:
    """The person (or eSpeak variant) behind a corpus voice; a name that is no corpus voice is its own."""
    for voice in ALL_VOICES:
        if voice.name == voice_name:
            return voice.speaker
    return voice_name


def _read_wav(path: str, what: str, rate: int = SAMPLE_RATE) -> np.ndarray:
    wave, found = soundfile.read(path, dtype="float32")
    if found != rate:
        raise DataError(f"{what} gave {found} Hz audio, expected {rate} Hz")
    return wave if wave.ndim == 1 else wave[:, 0]


def synthesize_flite(text: str, voice: Voice, stretch: float, workdir: str) -> np.ndarray:
    """One utterance with flite; ``stretch`` > 1 speaks slower. Returns (time,) float32 at 16 kHz."""
    path = os.path.join(workdir, "flite.wav")
    command = ["flite", "-voice", voice.engine_voice, "--setf", f"duration_stretch={stretch:.4f}",
               "-t", text.lower(), "-o", path]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or not os.path.exists(path):
        raise DataError(f"flite failed for voice {voice.name!r} on {text!r}: {done.stderr.strip()}")
    wave = _read_wav(path, f"flite voice {voice.engine_voice}")
    os.remove(path)
    return wave


def synthesize_festival(items: Sequence[tuple], voice: Voice, workdir: str) -> list:
    """Many utterances in one festival process. ``items``: (text, stretch) pairs; returns one array each."""
    lines = [f"(voice_{voice.engine_voice})"]
    paths = []
    for index, (text, stretch) in enumerate(items):
        path = os.path.join(workdir, f"festival_{index}.wav")
        paths.append(path)
        lines.append(f"(Parameter.set 'Duration_Stretch {stretch:.4f})")
        lines.append(f'(utt.save.wave (SynthText "{text.lower()}") "{path}" \'riff)')
    script = os.path.join(workdir, "batch.scm")
    with open(script, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    done = subprocess.run(["festival", "-b", script], capture_output=True, text=True)
    missing = [p for p in paths if not os.path.exists(p)]
    if done.returncode != 0 or missing:
        raise DataError(f"festival failed for voice {voice.name!r} ({len(missing)} of {len(paths)} "
                        f"utterances missing): {done.stderr.strip()[-500:]}")
    waves = [_read_wav(p, f"festival voice {voice.engine_voice}") for p in paths]
    for path in paths:
        os.remove(path)
    return waves


#: espeak-ng's output rate, and its default speaking rate in words per minute
ESPEAK_RATE, ESPEAK_WPM = 22050, 175


def synthesize_espeak(text: str, voice: Voice, stretch: float, workdir: str) -> np.ndarray:
    """One utterance with espeak-ng (a fresh process: espeak keeps state between the utterances of one run).

    ``stretch`` > 1 speaks slower (``-s`` is 175 words per minute divided by it). The text goes after ``--``,
    so no sentence is read as an option. Returns (time,) float32 at 16 kHz, resampled from 22,050 Hz.
    """
    path = os.path.join(workdir, "espeak.wav")
    command = ["espeak-ng", "-v", voice.engine_voice, "-s", str(int(round(ESPEAK_WPM / stretch))),
               "-w", path, "--", text.lower()]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or not os.path.exists(path):
        raise DataError(f"espeak-ng failed for voice {voice.name!r} on {text!r}: {done.stderr.strip()}")
    wave = _read_wav(path, f"espeak-ng voice {voice.engine_voice}", ESPEAK_RATE)
    os.remove(path)
    return effects.resample(wave, ESPEAK_RATE, SAMPLE_RATE)


def synthesize_many(items: Sequence[tuple], voice: Voice, workdir: Optional[str] = None) -> list:
    """Speak ``items`` ((text, stretch) pairs) with ``voice``; one float32 (time,) array per item."""
    with tempfile.TemporaryDirectory(dir=workdir) as scratch:
        if voice.engine == "festival":
            return synthesize_festival(items, voice, scratch)
        if voice.engine == "flite":
            return [synthesize_flite(text, voice, stretch, scratch) for text, stretch in items]
        if voice.engine == "espeak":
            return [synthesize_espeak(text, voice, stretch, scratch) for text, stretch in items]
    raise DataError(f"voice {voice.name!r} names an unknown engine {voice.engine!r}")
