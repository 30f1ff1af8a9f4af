"""Build the built-in corpus: plan each utterance from a seed, synthesize in parallel, write FLAC + manifests.

The plan (which sentence, voice, speed, warp, loudness, silence and noise each utterance gets) is drawn in
one process from the seed before any audio is made; workers only execute it, each utterance with its own
random generator. So the output is byte-identical for a seed whatever the number of workers.

Layout written under ``output_dir``::

    train.json valid.json test.json      {id: {"wav": "$data_root/train/rms-lo/rms-lo-train-000000.flac",
                                                "duration": 2.91, "spk": "rms", "voice": "rms-lo",
                                                "text": "THE OLD ..."}}
    test_engine.json                     with ``held_out_engine``: the test utterances of that engine's voices
                                         (``recorded``: every recording of ``recordings``)
    corpus.json                          the settings, voices per split, counts and hours (written last)
    train/<voice>/<id>.flac ...          16 kHz, 16-bit mono FLAC

With ``recordings`` (a folder or manifest of the user's own recordings, :mod:`speechkit.corpus.recordings`),
real speech joins the synthetic: each recording once, spoken by voice ``recorded-<speaker>``, in the split
its voice is listed in (train by default), with its own transcript.

``spk`` is the speaker, the person behind the voice (:func:`speechkit.corpus.voices.speaker_of`): every warp
of a voice is one speaker, so tools that keep speakers apart (``speechkit mixtures``, speaker-disjoint
splits) never take two warps of one person for two people.

Example:
    >>> config = CorpusConfig("corpus", num_train=8, num_valid=2, num_test=2, seed=1)
    >>> [p.split for p in make_plan(config)][:3]
    ['train', 'train', 'train']
"""
from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
import os
import random
import shutil
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import soundfile

from speechkit.corpus import effects
from speechkit.corpus.recordings import (
    RECORDED_ENGINE,
    is_recorded,
    load_recordings,
    read_recording,
    recordings_checksum,
)
from speechkit.corpus.text import digit_string_count, make_digit_strings, make_sentences
from speechkit.corpus.voices import (
    DEFAULT_TEST_VOICES,
    DEFAULT_VALID_VOICES,
    SAMPLE_RATE,
    VOICES,
    check_engines,
    speaker_of,
    synthesize_many,
    voice_by_name,
)
from speechkit.errors import DataError

SPLITS = ("train", "valid", "test")
#: The split of a corpus built with ``held_out_engine``: test utterances spoken by that engine's voices.
ENGINE_SPLIT = "test_engine"
ALL_SPLITS = SPLITS + (ENGINE_SPLIT,)
#: Voices that speak the held-out engine's test split when the corpus' voices include none of that engine.
HELD_OUT_ENGINE_VOICES = {
    "espeak": ("espeak-us-m3", "espeak-gb-f2", "espeak-sc-m1", "espeak-ca-f4"),
    "festival": ("ked", "ked-lo", "ked-hi"),
    "flite": ("slt", "slt-lo", "slt-hi"),
}

#: Named sizes: (train, valid, test) utterances.
SIZES = {
    "tiny": (24, 6, 6),
    "demo": (800, 100, 150),
    "small": (5000, 300, 400),
    "medium": (20000, 500, 800),
    "large": (50000, 1000, 1500),
}


@dataclass
class CorpusConfig:
    """Everything that decides the corpus' content. Two builds with equal configs write equal bytes."""

    output_dir: str
    num_train: int = SIZES["demo"][0]
    num_valid: int = SIZES["demo"][1]
    num_test: int = SIZES["demo"][2]
    seed: int = 1234
    #: distinct sentences drawn from the grammar; None: max(4000, a third of all utterances)
    num_sentences: Optional[int] = None
    #: what the voices read: "grammar" (everyday sentences) or "digits" (connected digit strings, ZERO to
    #: NINE, for digit recognizers)
    text: str = "grammar"
    #: with ``text="grammar"``: the share of the sentences (each split alike) that are connected digit
    #: strings instead, so a recognizer of everyday sentences also learns numbers read out digit by digit
    digit_share: float = 0.0
    #: digits per string with ``text="digits"`` or a ``digit_share`` (uniform within min-max)
    digit_string_length: tuple = (3, 6)
    #: voices used at all (None: every voice in VOICES)
    voices: Optional[list] = None
    test_voices: list = field(default_factory=lambda: list(DEFAULT_TEST_VOICES))
    #: empty: valid is spoken by the training voices (its sentences stay unseen)
    valid_voices: list = field(default_factory=lambda: list(DEFAULT_VALID_VOICES))
    speed_range: tuple = (0.85, 1.2)  # speaking rate (1.2: 20% faster), applied by the engine
    warp_jitter: float = 0.03  # per-utterance random change of the voice's warp (+-3%)
    loudness_range: tuple = (-30.0, -18.0)  # speech RMS level, dBFS
    silence_range: tuple = (0.1, 0.45)  # seconds of leading and of trailing silence
    floor_dbfs: float = -72.0  # level of the background hiss in the silences
    noise_prob: float = 0.0  # share of utterances with added noise
    snr_range: tuple = (5.0, 30.0)
    noise_colors: tuple = ("white", "pink", "brown")
    #: a speech engine (flite, festival, espeak) none of whose voices is trained on: its voices speak a test
    #: split of their own (test_engine.json), a kind of voice never heard
    held_out_engine: Optional[str] = None
    #: real recordings mixed in, from a folder or a manifest (speechkit.corpus.recordings); each is used once,
    #: its speaker's voice ``recorded-<speaker>`` in train unless named in test_voices or valid_voices
    recordings: Optional[str] = None
    # How the build runs (not part of the content).
    num_workers: int = 2
    chunk_size: int = 12

    def content_settings(self) -> dict:
        """The settings that decide the bytes written (what ``corpus.json`` records)."""
        settings = dataclasses.asdict(self)
        for key in ("output_dir", "num_workers", "chunk_size"):
            settings.pop(key)
        for key in ("held_out_engine", "recordings"):
            if settings[key] is None:
                settings.pop(key)  # corpora built before the option keep their settings
        if settings["digit_share"] == 0.0:  # likewise for the text options
            settings.pop("digit_share")
            if settings["text"] == "grammar":
                settings.pop("text")
                settings.pop("digit_string_length")
        return json.loads(json.dumps(settings))


@dataclass(frozen=True)
class UtterancePlan:
    """What one utterance will be; all the randomness of the corpus is decided here."""

    id: str
    split: str
    voice: str
    text: str
    stretch: float  # engine duration factor (1 / speaking rate)
    warp: float  # resampling factor: pitch and formants times ``warp``, duration divided by it
    loudness_dbfs: float
    silence_before: int  # samples
    silence_after: int
    noise_color: Optional[str]
    snr_db: Optional[float]
    floor_dbfs: float  # background hiss under the whole utterance
    seed: int
    source: Optional[str] = None  # a recording's path: read instead of synthesized (no warp)

    @property
    def relative_path(self) -> str:
        return f"{self.split}/{self.voice}/{self.id}.flac"


#: Allowed values of the numeric settings: name -> (low, high), both included. Speech below -60 dBFS sinks
#: towards the -72 dBFS hiss of the silences; above 0 dBFS it clips. ``speechkit corpus`` checks its flags
#: against the same table.
SETTING_BOUNDS = {"num_train": (0, None), "num_valid": (0, None), "num_test": (0, None),
                  "num_sentences": (1, None), "speed_range": (0.25, 4.0), "loudness_range": (-60.0, 0.0),
                  "noise_prob": (0.0, 1.0), "snr_range": (-30.0, 100.0), "num_workers": (1, None),
                  "chunk_size": (1, None), "digit_string_length": (1, 20), "digit_share": (0.0, 1.0)}
#: What the voices can read (``CorpusConfig.text``).
TEXT_KINDS = ("grammar", "digits")


def check_config(config: CorpusConfig) -> None:
    """Raise DataError naming the first numeric setting that is not a finite number in its bounds
    (:data:`SETTING_BOUNDS`), or a range whose minimum is above its maximum."""
    for name, (low, high) in SETTING_BOUNDS.items():
        value = getattr(config, name)
        if value is None and name == "num_sentences":
            continue
        ranged = name.endswith(("_range", "_length"))
        values = tuple(value) if ranged else (value,)
        if ranged and len(values) != 2:
            raise DataError(f"{name} must be (min, max), got {value!r}")
        for item in values:
            if isinstance(item, bool) or not isinstance(item, (int, float)) or not math.isfinite(item):
                raise DataError(f"{name} must hold finite numbers, got {value!r}")
            if (low is not None and item < low) or (high is not None and item > high):
                bounds = f"[{low}, {high}]" if high is not None else f">= {low}"
                raise DataError(f"{name} must be within {bounds}, got {value!r}")
        if ranged and values[0] > values[1]:
            raise DataError(f"{name}: min {values[0]} is above max {values[1]}")
    if config.text not in TEXT_KINDS:
        raise DataError(f"text must be one of {', '.join(TEXT_KINDS)}, got {config.text!r}")
    if config.digit_share and config.text != "grammar":
        raise DataError(f"digit_share={config.digit_share} mixes digit strings into grammar sentences; with "
                        f"text={config.text!r} leave it at 0")
    if any(int(n) != n for n in config.digit_string_length):
        raise DataError(f"digit_string_length must hold whole numbers, got {config.digit_string_length!r}")


def splits_of(config: CorpusConfig) -> tuple:
    """The splits a corpus has: train, valid, test, and test_engine with a held-out engine."""
    return ALL_SPLITS if config.held_out_engine else SPLITS


def split_voices(config: CorpusConfig, recorded: Sequence[str] = ()) -> dict:
    """Voices of each split, the ``recorded`` voices (``recorded-<speaker>``) of the recordings included;
    raises DataError when a voice is unknown or would appear in two splits."""
    names = list(config.voices) if config.voices is not None else [v.name for v in VOICES]
    for name in names + list(config.test_voices) + list(config.valid_voices):
        if not is_recorded(name):
            voice_by_name(name)
        elif name not in recorded:
            raise DataError(f"voice {name!r} is no speaker of the recordings "
                            f"({', '.join(recorded) or 'no recordings given'})")
    names = [n for n in names if not is_recorded(n)]
    engine = config.held_out_engine
    held_out = []
    if engine == RECORDED_ENGINE and not recorded:
        raise DataError("held_out_engine 'recorded' needs recordings to hold out")
    if engine is not None and engine != RECORDED_ENGINE:
        if engine not in HELD_OUT_ENGINE_VOICES:
            raise DataError(f"held_out_engine must be one of {sorted(HELD_OUT_ENGINE_VOICES)} or "
                            f"{RECORDED_ENGINE!r}, got {engine!r}")
        held_out = ([n for n in names if voice_by_name(n).engine == engine]
                    or list(HELD_OUT_ENGINE_VOICES[engine]))
        names = [n for n in names if voice_by_name(n).engine != engine]
    test = [n for n in names if n in config.test_voices]
    valid = [n for n in names if n in config.valid_voices and n not in test]
    train = [n for n in names if n not in test and n not in valid]
    if set(config.test_voices) & set(config.valid_voices):
        raise DataError(f"voices {sorted(set(config.test_voices) & set(config.valid_voices))} are in both "
                        "the valid and the test voices")
    if not valid and config.num_valid:
        valid = list(train)  # held-out sentences spoken by training voices
    for split, voices, count in (("train", train, config.num_train), ("valid", valid, config.num_valid),
                                 ("test", test, config.num_test)):
        if count and not voices:
            without = f" without the held-out engine {engine!r}" if engine else ""
            raise DataError(f"the {split} split asks for {count} utterances but has no voice{without} "
                            f"(voices: {names}, test voices: {config.test_voices})")
    splits = {"train": train, "valid": valid, "test": test}
    if engine is not None:
        splits[ENGINE_SPLIT] = held_out
    for name in recorded:
        split = (ENGINE_SPLIT if engine == RECORDED_ENGINE else "test" if name in config.test_voices
                 else "valid" if name in config.valid_voices else "train")
        splits[split].append(name)
    return splits


def _sentence_pools(config: CorpusConfig, rng: random.Random) -> dict:
    """Disjoint sentence lists for test, valid and train (no sentence is shared across splits)."""
    total = config.num_train + config.num_valid + config.num_test
    count = config.num_sentences or max(4000, total // 3)
    # Held-out splits get one distinct sentence per utterance while that leaves most sentences to training.
    test_count = min(config.num_test, count // 8)
    valid_count = min(config.num_valid, count // 8)
    if count - test_count - valid_count < 1:
        raise DataError(f"num_sentences={count} leaves no sentence for training")
    sentences = _draw_sentences(config, count, rng)
    pools = {"test": sentences[:test_count], "valid": sentences[test_count:test_count + valid_count],
             "train": sentences[test_count + valid_count:]}
    if config.held_out_engine:  # the held-out engine reads the test sentences: the two test splits compare
        pools[ENGINE_SPLIT] = pools["test"]
    return pools


def _draw_sentences(config: CorpusConfig, count: int, rng: random.Random) -> list:
    """``count`` distinct transcripts: grammar sentences, digit strings, or (``digit_share``) both,
    shuffled together so that every split gets its share."""
    lengths = tuple(int(n) for n in config.digit_string_length)
    digits = count if config.text == "digits" else round(count * config.digit_share)
    if digits > digit_string_count(lengths):
        raise DataError(f"num_sentences={count}: only {digit_string_count(lengths)} distinct digit strings "
                        f"have {lengths[0]} to {lengths[1]} digits, {digits} needed (set num_sentences, "
                        "digit_share or digit_string_length)")
    sentences = make_sentences(count - digits, rng) if digits < count else []
    if digits:
        sentences += make_digit_strings(digits, rng, lengths)
        if digits < count:
            rng.shuffle(sentences)
    return sentences


def _cycle_shuffled(items: list, count: int, rng: random.Random) -> list:
    """``count`` items taken from ``items`` in rounds, each round in a fresh random order."""
    out: list = []
    while len(out) < count:
        round_ = list(items)
        rng.shuffle(round_)
        out.extend(round_[: count - len(out)])
    return out


def make_plan(config: CorpusConfig, recordings: Optional[list] = None) -> list:
    """Every utterance of the corpus, decided from ``config.seed`` alone (no audio is made here);
    ``recordings`` (read from ``config.recordings`` when None) follow the synthetic utterances."""
    if recordings is None:
        recordings = load_recordings(config.recordings) if config.recordings else []
    rng = random.Random(config.seed)
    voices = split_voices(config, sorted({r.voice for r in recordings}))
    pools = _sentence_pools(config, rng)
    counts = {"train": config.num_train, "valid": config.num_valid, "test": config.num_test,
              ENGINE_SPLIT: 0 if config.held_out_engine == RECORDED_ENGINE else config.num_test}
    plan = []
    for split in splits_of(config):
        if not counts[split]:
            continue
        texts = _cycle_shuffled(pools[split], counts[split], rng)
        speakers = _cycle_shuffled([v for v in voices[split] if not is_recorded(v)], counts[split], rng)
        for index, (text, voice_name) in enumerate(zip(texts, speakers)):
            voice = voice_by_name(voice_name)
            noisy = rng.random() < config.noise_prob
            plan.append(UtterancePlan(
                id=f"{voice_name}-{split}-{index:06d}",
                split=split,
                voice=voice_name,
                text=text,
                stretch=round(1.0 / rng.uniform(*config.speed_range), 4),
                warp=round(voice.warp * rng.uniform(1 - config.warp_jitter, 1 + config.warp_jitter), 4),
                loudness_dbfs=round(rng.uniform(*config.loudness_range), 2),
                silence_before=int(rng.uniform(*config.silence_range) * SAMPLE_RATE),
                silence_after=int(rng.uniform(*config.silence_range) * SAMPLE_RATE),
                noise_color=rng.choice(config.noise_colors) if noisy else None,
                snr_db=round(rng.uniform(*config.snr_range), 2) if noisy else None,
                floor_dbfs=config.floor_dbfs,
                seed=rng.randrange(2 ** 31),
            ))
    return plan + _recorded_plan(config, recordings, voices)


def _recorded_plan(config: CorpusConfig, recordings: list, voices: dict) -> list:
    """One utterance per recording, in its voice's split: level, silences and noise drawn as for the
    synthetic ones (from a generator of their own, so adding recordings changes no synthetic utterance)."""
    rng = random.Random(f"{config.seed}-recorded")
    split_of = {voice: split for split, names in voices.items() for voice in names}
    numbers: dict = {}
    plan = []
    for recording in recordings:
        split = split_of[recording.voice]
        index = numbers[split] = numbers.get(split, -1) + 1
        noisy = rng.random() < config.noise_prob
        plan.append(UtterancePlan(
            id=f"{recording.voice}-{split}-{index:06d}", split=split, voice=recording.voice,
            text=recording.text, stretch=1.0, warp=1.0,
            loudness_dbfs=round(rng.uniform(*config.loudness_range), 2),
            silence_before=int(rng.uniform(*config.silence_range) * SAMPLE_RATE),
            silence_after=int(rng.uniform(*config.silence_range) * SAMPLE_RATE),
            noise_color=rng.choice(config.noise_colors) if noisy else None,
            snr_db=round(rng.uniform(*config.snr_range), 2) if noisy else None,
            floor_dbfs=config.floor_dbfs, seed=rng.randrange(2 ** 31), source=recording.path))
    return plan


def render(plan: UtterancePlan, wave: np.ndarray) -> np.ndarray:
    """Turn an engine's output into the final int16 utterance (trim, warp, level, silence, noise)."""
    rng = np.random.default_rng(plan.seed)
    speech = effects.trim_silence(wave)
    # Played ``warp`` times faster: pitch and formants up by ``warp``, like a shorter vocal tract.
    speech = effects.resample(speech, plan.warp, 1.0, exact=False)
    speech = effects.set_loudness(speech, plan.loudness_dbfs)
    padded = effects.pad_with_floor(speech, plan.silence_before, plan.silence_after, plan.floor_dbfs, rng)
    if plan.noise_color is not None:
        padded = effects.add_noise(padded, plan.snr_db, plan.noise_color, rng, reference=speech)
    peak = float(np.max(np.abs(padded)))
    if peak > 0.99:
        padded = padded * (0.99 / peak)
    return effects.to_int16(padded)


def _run_chunk(task: tuple) -> list:
    """Worker: synthesize one chunk (one voice), write its FLAC files; returns (id, num_samples) pairs."""
    output_dir, plans = task
    if plans[0].source is not None:  # a chunk of one recorded speaker
        waves = [read_recording(p.source, SAMPLE_RATE) for p in plans]
    else:
        waves = synthesize_many([(p.text, p.stretch) for p in plans], voice_by_name(plans[0].voice))
    results = []
    for plan, wave in zip(plans, waves):
        samples = render(plan, wave)
        path = os.path.join(output_dir, plan.relative_path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        soundfile.write(path, samples, SAMPLE_RATE, format="FLAC", subtype="PCM_16")
        results.append((plan.id, len(samples)))
    return results


def _chunks(plan: list, size: int) -> list:
    """Group utterances by split and voice, in plan order, into fixed-size chunks (independent of workers)."""
    groups: dict = {}
    for item in plan:
        groups.setdefault((item.split, item.voice), []).append(item)
    chunks = []
    for items in groups.values():
        chunks.extend(items[i:i + size] for i in range(0, len(items), size))
    # Festival chunks start a program each: send the big ones first so workers finish together.
    return sorted(chunks, key=lambda c: -len(c))


def _write_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(obj, handle, indent=2)
        handle.write("\n")
    os.replace(tmp, path)


def build_corpus(config: CorpusConfig, overwrite: bool = False, log=print,
                 progress: Optional[Callable[[int, int], None]] = None) -> dict:
    """Synthesize the corpus described by ``config`` into ``config.output_dir``; returns its summary.

    An existing complete corpus with the same settings is kept as it is (summary returned); one with other
    settings is replaced only with ``overwrite``; the remains of an interrupted build are replaced; a folder
    holding anything else is refused. ``log`` prints the summary line; ``progress(done, total)`` is called
    with the utterances synthesized so far, after each chunk.
    """
    check_config(config)
    out = config.output_dir
    summary_path = os.path.join(out, "corpus.json")
    recordings = load_recordings(config.recordings) if config.recordings else []
    recorded_sum = recordings_checksum(recordings) if recordings else None
    if os.path.exists(summary_path) and not overwrite:
        with open(summary_path, encoding="utf-8") as handle:
            summary = json.load(handle)
        if (summary.get("settings") == config.content_settings()
                and summary.get("recordings_checksum") == recorded_sum):
            log(f"corpus already built in {out}")
            _add_speakers(out)
            return summary
        raise DataError(f"{out} holds a corpus built with other settings or recordings; use another folder "
                        "or --overwrite")
    foreign = [name for name in os.listdir(out) if name not in _CORPUS_NAMES] if os.path.isdir(out) else []
    if foreign and not os.path.exists(summary_path):
        # Never delete a folder of someone else's data, even with overwrite.
        raise DataError(f"{out} holds files that are not a corpus ({', '.join(sorted(foreign)[:3])}); "
                        "use an empty folder")
    plan = make_plan(config, recordings)
    voices = split_voices(config, sorted({r.voice for r in recordings}))
    check_engines([voice_by_name(v) for v in sorted({p.voice for p in plan if p.source is None})])
    # What is left is ours: an interrupted build (no corpus.json yet) or, with overwrite, an older corpus.
    if os.path.isdir(out):
        _remove_corpus_files(out)
    os.makedirs(out, exist_ok=True)
    start = time.perf_counter()
    tasks = [(out, chunk) for chunk in _chunks(plan, config.chunk_size)]
    lengths: dict = {}
    if progress:
        progress(0, len(plan))
    if config.num_workers > 1 and len(tasks) > 1:
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                              else "spawn")
        with context.Pool(config.num_workers) as pool:
            for results in pool.imap_unordered(_run_chunk, tasks):
                lengths.update(results)
                if progress:
                    progress(len(lengths), len(plan))
    else:
        for task in tasks:
            lengths.update(_run_chunk(task))
            if progress:
                progress(len(lengths), len(plan))
    counts, hours = {}, {}
    for split in splits_of(config):
        manifest = {}
        for item in plan:
            if item.split == split:
                manifest[item.id] = {"wav": f"$data_root/{item.relative_path}",
                                     "duration": round(lengths[item.id] / SAMPLE_RATE, 4),
                                     "spk": speaker_of(item.voice), "voice": item.voice, "text": item.text}
        _write_json(os.path.join(out, f"{split}.json"), manifest)
        counts[split] = len(manifest)
        hours[split] = round(sum(v["duration"] for v in manifest.values()) / 3600.0, 4)
    summary = {"settings": config.content_settings(), "voices": voices, "utterances": counts, "hours": hours,
               "sentences": {s: len({p.text for p in plan if p.split == s}) for s in splits_of(config)},
               "checksum": _content_checksum(plan)}
    if recorded_sum is not None:
        summary["recordings_checksum"] = recorded_sum
    _write_json(summary_path, summary)
    elapsed = time.perf_counter() - start
    log(f"corpus: {sum(counts.values())} utterances ({sum(hours.values()):.2f} h) in {out} "
        f"[{', '.join(f'{split} {count}' for split, count in counts.items())}] in {elapsed:.1f} s")
    return summary


def _add_speakers(out: str) -> None:
    """Bring the manifests of a corpus built before they named speakers up to date: ``spk`` held the voice,
    so a tool keeping speakers apart (``speechkit mixtures``) took two warps of one person for two people."""
    for split in ALL_SPLITS:
        path = os.path.join(out, f"{split}.json")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
        if all("voice" in row for row in manifest.values()):
            continue
        for row in manifest.values():
            row["voice"] = row.get("voice", row["spk"])
            row["spk"] = speaker_of(row["voice"])
        _write_json(path, {utt_id: {key: row[key] for key in ("wav", "duration", "spk", "voice", "text")
                                    if key in row} for utt_id, row in manifest.items()})


#: Every name a build writes at the top of its folder (temporary manifests included).
_CORPUS_NAMES = frozenset(("corpus.json", "corpus.json.tmp") + ALL_SPLITS
                          + tuple(f"{split}.json{tmp}" for split in ALL_SPLITS for tmp in ("", ".tmp")))


def _remove_corpus_files(out: str) -> None:
    """Delete what a build writes (summary first: a half-removed corpus never looks complete)."""
    for name in sorted(_CORPUS_NAMES - set(ALL_SPLITS), key=lambda n: n != "corpus.json"):
        if os.path.exists(os.path.join(out, name)):
            os.remove(os.path.join(out, name))
    for split in ALL_SPLITS:
        if os.path.isdir(os.path.join(out, split)):
            shutil.rmtree(os.path.join(out, split))


def _content_checksum(plan: list) -> int:
    """CRC of the plan: two corpora with the same checksum were planned identically."""
    text = "\n".join(f"{p.id}|{p.text}|{p.stretch}|{p.warp}|{p.loudness_dbfs}|{p.seed}"
                     + (f"|{p.source}" if p.source else "") for p in plan)
    return zlib.crc32(text.encode("utf-8"))
