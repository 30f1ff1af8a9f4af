"""Data preparation of the FSDD recipe: isolated spoken digits of real speakers, and connected digit strings
made from them, split by speaker (one speaker held out for test: leave-one-speaker-out).

The Free Spoken Digit Dataset names its recordings ``{digit}_{speaker}_{index}.wav`` (8 kHz mono). From them:

- **isolated digits**: one row per recording, its transcript the digit's word (``SEVEN``);
- **connected digit strings** of 3 to 6 digits: recordings of one speaker joined with pauses of 0.05-0.35 s
  filled with that speaker's own background level (the recordings are cut tight, so a bare join would be a
  click and digital silence). Each speaker's strings are drawn from a seed and the speaker's name alone, so a
  speaker's strings stay the same whatever other speakers the folder holds; they are written once into
  ``prepared_folder/strings`` (built in a temporary folder, then renamed: an interrupted run leaves no half
  corpus), and a later run with the same settings reuses them.

Roles follow the dataset's own convention: recordings 0-4 of each speaker and digit are its test part,
5-49 its training part. For a held-out speaker ``S`` (``prepared_folder/S/``):

===================  ==========================================================================
``train.json``       isolated digits 5-49 and the strings made of them, every speaker but S
``valid.json``       strings made of recordings 0-4, every speaker but S (picks the checkpoint)
``test.json``        every string of S (made of all its recordings): the connected-digit figure
``test_isolated``    every isolated recording of S
===================  ==========================================================================

``test_speaker="all"`` holds every speaker out, for a model trained elsewhere (e.g. on the built-in
corpus alone): ``prepared_folder/all/`` gets ``test.json`` (every speaker's strings, the union of the folds'
test sets) and ``test_isolated.json`` only.

With ``synthetic_strings`` N > 0, ``train.json`` also holds N connected digit strings (same lengths as the
real ones) read by the built-in corpus' 69 synthetic voices (``speechkit.corpus``, ``text="digits"``),
built once into ``prepared_folder/synthetic-digits-N`` (16 kHz: the recipe's audio policy resamples them)
and shared by every fold: voices no held-out speaker can be part of.

Rows are ordinary speechkit manifests: ``{id: {"wav", "duration", "text", "spk", "sample_rate", "sources"}}``
(``sources``: the FSDD recordings an utterance is made of, in order); isolated
digits point at the FSDD folder through ``$data_root`` (the recipe replaces it with ``data_folder``), the
strings at their absolute path.

Example:
    >>> paths = prepare_fsdd("fsdd", "data/FSDD", test_speaker="jackson")  # doctest: +SKIP
    >>> sorted(paths)  # doctest: +SKIP
    ['test', 'test_isolated', 'train', 'valid']

Run alone (the recipe's train.py calls it itself)::

    python prepare.py --data_folder ~/free-spoken-digit-dataset/recordings --test_speaker jackson
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import tempfile
import zlib
from dataclasses import asdict, dataclass, replace

import numpy as np
import soundfile

from speechkit.data.manifest import write_json_manifest
from speechkit.errors import DataError

DIGIT_WORDS = ("ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE")
#: ``{digit}_{speaker}_{index}.wav``, FSDD's naming convention.
FILE_NAME = re.compile(r"^(?P<digit>[0-9])_(?P<speaker>[A-Za-z0-9]+)_(?P<index>[0-9]+)\.wav$")
#: Indices below this are the dataset's test part (its README: 0-4 test, 5-49 train).
FIRST_TRAINING_INDEX = 5
SPLITS = ("train", "valid", "test", "test_isolated")
#: ``test_speaker`` value holding every speaker out (test manifests only).
ALL_SPEAKERS = "all"


@dataclass(frozen=True)
class Recording:
    """One FSDD file: ``path`` relative to the data folder, what is said and by whom, its length."""

    path: str
    digit: int
    speaker: str
    index: int
    frames: int

    @property
    def name(self) -> str:
        return os.path.splitext(os.path.basename(self.path))[0]

    @property
    def role(self) -> str:
        """``train`` or ``valid``: the dataset's training or test part."""
        return "train" if self.index >= FIRST_TRAINING_INDEX else "valid"


@dataclass(frozen=True)
class StringSettings:
    """Everything that decides the strings' bytes (recorded in ``strings/settings.json``)."""

    seed: int = 1234
    train_strings: int = 150  # per speaker, from its recordings 5-49
    valid_strings: int = 15  # per speaker, from its recordings 0-4
    min_digits: int = 3
    max_digits: int = 6
    gap_range: tuple = (0.05, 0.35)  # seconds of pause between two digits
    edge_range: tuple = (0.1, 0.3)  # seconds before the first and after the last digit
    fade_ms: float = 5.0  # fade in and out of every digit: no click at the joins

    def checked(self) -> StringSettings:
        if not 1 <= self.min_digits <= self.max_digits:
            raise DataError(f"digits per string: need 1 <= min_digits <= max_digits, got {self.min_digits}, "
                            f"{self.max_digits}")
        for name in ("gap_range", "edge_range"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise DataError(f"{name} must be 0 <= low <= high seconds, got {getattr(self, name)}")
        if self.train_strings < 0 or self.valid_strings < 0:
            raise DataError("train_strings and valid_strings must be >= 0")
        return self


def recordings_folder(data_folder: str) -> str:
    """The folder holding the wav files: ``data_folder/recordings`` (a checkout) or ``data_folder`` itself."""
    nested = os.path.join(data_folder, "recordings")
    folder = nested if os.path.isdir(nested) else data_folder
    if not os.path.isdir(folder):
        raise DataError(f"data_folder {data_folder} does not exist: point it at an FSDD checkout (the folder "
                        "holding recordings/) or at its recordings folder; recipes/FSDD/README.md says how "
                        "to get it")
    return folder


def find_recordings(data_folder: str, sample_rate: int = 8000) -> list:
    """Every ``.wav`` of the folder as a :class:`Recording`, sorted; checks names, rates and channels.

    Raises:
        DataError: no recording, a ``.wav`` whose name breaks the convention (naming it), one that cannot
            be read or is not ``sample_rate`` Hz mono.
    """
    folder = recordings_folder(data_folder)
    prefix = os.path.relpath(folder, data_folder)
    found = []
    for name in sorted(os.listdir(folder)):
        if not name.lower().endswith(".wav"):
            continue
        match = FILE_NAME.match(name)
        path = os.path.join(folder, name)
        if match is None:
            raise DataError(f"{path}: not an FSDD file name ({{digit}}_{{speaker}}_{{index}}.wav); move it "
                            "out of the folder")
        try:
            info = soundfile.info(path)
        except (RuntimeError, soundfile.LibsndfileError) as error:
            raise DataError(f"{path}: unreadable audio ({error})") from error
        if info.samplerate != sample_rate or info.channels != 1 or info.frames == 0:
            raise DataError(f"{path}: {info.samplerate} Hz, {info.channels} channel(s), {info.frames} "
                            f"samples; expected {sample_rate} Hz mono speech")
        relative = name if prefix == "." else os.path.join(prefix, name)
        found.append(Recording(relative, int(match["digit"]), match["speaker"], int(match["index"]),
                               info.frames))
    if not found:
        raise DataError(f"{folder}: no FSDD recording ({{digit}}_{{speaker}}_{{index}}.wav) found")
    return found


def isolated_rows(recordings: list, sample_rate: int) -> dict:
    """Manifest rows of single digits, audio as ``$data_root/<path>``."""
    rows = {}
    for rec in recordings:
        rows[rec.name] = {"wav": f"$data_root/{rec.path}", "duration": round(rec.frames / sample_rate, 4),
                          "text": DIGIT_WORDS[rec.digit], "spk": rec.speaker, "sample_rate": sample_rate,
                          "sources": rec.name}
    return rows


def plan_strings(recordings: list, count: int, settings: StringSettings, rng: random.Random) -> list:
    """``count`` lists of recordings (3-6 each), drawn in rounds so each recording is used about equally."""
    pool: list = []
    plans = []
    for _ in range(count):
        length = rng.randint(settings.min_digits, settings.max_digits)
        while len(pool) < length:
            round_ = list(recordings)
            rng.shuffle(round_)
            pool.extend(round_)
        plans.append(pool[:length])
        del pool[:length]
    return plans


def background_level(wave: np.ndarray, frame: int) -> float:
    """RMS of the quietest ``frame`` samples of ``wave``: the room and microphone level under the speech."""
    frames = len(wave) // frame
    if frames == 0:
        return float(np.sqrt(np.mean(wave ** 2)))
    energies = np.mean(wave[: frames * frame].reshape(frames, frame) ** 2, axis=1)
    return float(np.sqrt(energies.min()))


def render_string(waves: list, settings: StringSettings, sample_rate: int,
                  rng: np.random.Generator) -> np.ndarray:
    """Join ``waves`` (float, one per digit) with pauses of the speakers' background level; (time,) float."""
    fade = max(1, int(settings.fade_ms * sample_rate / 1000))
    floor = min(background_level(w, max(1, sample_rate // 50)) for w in waves)

    def pause(low_high: tuple) -> np.ndarray:
        return floor * rng.standard_normal(int(rng.uniform(*low_high) * sample_rate))

    pieces = [pause(settings.edge_range)]
    for position, wave in enumerate(waves):
        wave = wave.copy()
        ramp = np.linspace(0.0, 1.0, min(fade, len(wave) // 2) + 1)[1:]
        wave[: len(ramp)] *= ramp
        wave[len(wave) - len(ramp):] *= ramp[::-1]
        pieces.append(wave)
        pieces.append(pause(settings.gap_range if position < len(waves) - 1 else settings.edge_range))
    return np.clip(np.concatenate(pieces), -1.0, 1.0)


def build_strings(recordings: list, data_folder: str, out: str, settings: StringSettings,
                  sample_rate: int) -> dict:
    """Write every speaker's strings under ``out/<speaker>/``; returns ``{role: {id: row}}``."""
    rows: dict = {"train": {}, "valid": {}}
    for speaker in sorted({rec.speaker for rec in recordings}):
        # Seeded by the speaker's name: the same strings whatever other speakers the folder holds.
        rng = random.Random(settings.seed * 1_000_003 + zlib.crc32(speaker.encode()))
        noise = np.random.default_rng(rng.randrange(2 ** 31))
        os.makedirs(os.path.join(out, speaker))
        for role, count in (("train", settings.train_strings), ("valid", settings.valid_strings)):
            own = [rec for rec in recordings if rec.speaker == speaker and rec.role == role]
            if count and not own:
                raise DataError(f"speaker {speaker!r} has no recording in its {role} part (indices "
                                f"{'>=' if role == 'train' else '<'} {FIRST_TRAINING_INDEX})")
            for number, plan in enumerate(plan_strings(own, count, settings, rng)):
                waves = [soundfile.read(os.path.join(data_folder, rec.path), dtype="float64")[0]
                         for rec in plan]
                wave = render_string(waves, settings, sample_rate, noise)
                string_id = f"{speaker}-{role}-{number:04d}"
                path = os.path.join(out, speaker, f"{string_id}.wav")
                soundfile.write(path, wave, sample_rate, subtype="PCM_16")
                rows[role][string_id] = {
                    "wav": path, "duration": round(len(wave) / sample_rate, 4),
                    "text": " ".join(DIGIT_WORDS[rec.digit] for rec in plan), "spk": speaker,
                    "sample_rate": sample_rate, "sources": " ".join(rec.name for rec in plan)}
    return rows


def strings_once(recordings: list, data_folder: str, prepared_folder: str, settings: StringSettings,
                 sample_rate: int) -> dict:
    """The strings of ``prepared_folder/strings``: reused when built with these settings and recordings,
    else built in a temporary folder and renamed into place. Returns ``{role: {id: row}}``.

    Raises:
        DataError: the folder holds strings built with other settings or recordings (never overwritten).
    """
    final = os.path.join(os.path.abspath(prepared_folder), "strings")
    record = {"settings": json.loads(json.dumps(asdict(settings))), "sample_rate": sample_rate,
              "recordings": zlib.crc32("\n".join(f"{rec.path}|{rec.frames}" for rec in recordings).encode())}
    if os.path.isdir(final):
        return _reuse(final, record)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=".strings-", dir=os.path.dirname(final))
    try:
        rows = build_strings(recordings, data_folder, scratch, settings, sample_rate)
        for role_rows in rows.values():  # the rows name the folder the files will have once renamed
            for row in role_rows.values():
                row["wav"] = os.path.join(final, os.path.relpath(row["wav"], scratch))
        with open(os.path.join(scratch, "strings.json"), "w", encoding="utf-8") as handle:
            json.dump({**record, "rows": rows}, handle, indent=1)
        try:
            os.replace(scratch, final)
        except OSError:
            if not os.path.isdir(final):
                raise
            return _reuse(final, record)  # another run (another fold) finished first: its strings are these
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


def _reuse(final: str, record: dict) -> dict:
    """The rows of the strings in ``final`` when they were built as ``record`` says, else DataError."""
    summary = os.path.join(final, "strings.json")
    try:
        with open(summary, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError) as error:
        raise DataError(f"{final} exists but is no complete set of strings ({error}): delete "
                        "it") from error
    if {key: found.get(key) for key in record} != record:
        raise DataError(f"{final} holds strings built with other settings or recordings "
                        f"({found.get('settings')}); use another prepared_folder or delete it")
    return found["rows"]


def synthetic_digit_rows(prepared_folder: str, count: int, settings: StringSettings, num_workers: int = 1,
                         log=print) -> dict:
    """Training rows of ``count`` digit strings read by every synthetic voice of the built-in corpus, built
    into ``prepared_folder/synthetic-digits-<count>`` on first use and reused after (the corpus refuses a
    folder built with other settings); their ``wav`` paths are absolute, their fields those of the FSDD rows
    (``sources``: the voice)."""
    from speechkit.corpus import ALL_VOICES, CorpusConfig, build_corpus
    from speechkit.corpus.voices import SAMPLE_RATE as SYNTHETIC_SAMPLE_RATE

    folder = os.path.join(os.path.abspath(prepared_folder), f"synthetic-digits-{count}")
    config = CorpusConfig(folder, num_train=count, num_valid=0, num_test=0, seed=settings.seed, text="digits",
                          digit_string_length=(settings.min_digits, settings.max_digits),
                          voices=[voice.name for voice in ALL_VOICES], test_voices=[], valid_voices=[],
                          num_workers=num_workers)
    if not os.path.isdir(folder):  # built aside and renamed: folds started together never share a half corpus
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        scratch = tempfile.mkdtemp(prefix=".synthetic-", dir=os.path.dirname(folder))
        try:
            build_corpus(replace(config, output_dir=scratch), log=log)
            try:
                os.replace(scratch, folder)
            except OSError:
                if not os.path.isdir(folder):
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    build_corpus(config, log=log)  # reused; refused when the folder holds other settings
    with open(os.path.join(folder, "train.json"), encoding="utf-8") as handle:
        rows = json.load(handle)
    # The fields of the FSDD rows (a manifest's rows share their fields); ``sources`` names the voice.
    return {key: {"wav": row["wav"].replace("$data_root", folder, 1), "duration": row["duration"],
                  "text": row["text"], "spk": row["spk"], "sample_rate": SYNTHETIC_SAMPLE_RATE,
                  "sources": row["voice"]} for key, row in rows.items()}


def prepare_fsdd(data_folder: str, prepared_folder: str, test_speaker: str, settings: StringSettings = None,
                 sample_rate: int = 8000, isolated_in_train: bool = True, synthetic_strings: int = 0) -> dict:
    """Manifests of one leave-one-speaker-out fold; returns ``{split: path}`` (see the module docstring).

    Raises:
        DataError: ``test_speaker`` is not a speaker of the folder, or fewer than two speakers are there.
    """
    settings = (settings or StringSettings()).checked()
    data_folder = os.path.abspath(data_folder)
    recordings = find_recordings(data_folder, sample_rate)
    speakers = sorted({rec.speaker for rec in recordings})
    if test_speaker == ALL_SPEAKERS:
        return _write_fold(prepared_folder, ALL_SPEAKERS, every_speaker_held_out(
            recordings, data_folder, prepared_folder, settings, sample_rate))
    if test_speaker not in speakers:
        raise DataError(f"test_speaker {test_speaker!r} is not among the speakers of {data_folder}: "
                        f"{', '.join(speakers)}")
    if len(speakers) < 2:
        raise DataError(f"{data_folder} holds one speaker ({test_speaker}); holding it out leaves no "
                        "training data")
    strings = strings_once(recordings, data_folder, prepared_folder, settings, sample_rate)
    isolated = isolated_rows(recordings, sample_rate)
    held_in = [rec for rec in recordings if rec.speaker != test_speaker]
    manifests = {
        "train": {**({rec.name: isolated[rec.name] for rec in held_in if rec.role == "train"}
                     if isolated_in_train else {}),
                  **{k: v for k, v in strings["train"].items() if v["spk"] != test_speaker},
                  **(synthetic_digit_rows(prepared_folder, synthetic_strings, settings)
                     if synthetic_strings > 0 else {})},
        "valid": {k: v for k, v in strings["valid"].items() if v["spk"] != test_speaker},
        "test": {k: v for role in ("valid", "train") for k, v in strings[role].items()
                 if v["spk"] == test_speaker},
        "test_isolated": {rec.name: isolated[rec.name] for rec in recordings if rec.speaker == test_speaker},
    }
    return _write_fold(prepared_folder, test_speaker, manifests)


def every_speaker_held_out(recordings: list, data_folder: str, prepared_folder: str, settings: StringSettings,
                           sample_rate: int) -> dict:
    """The test manifests of a model that heard none of the speakers: every string, every recording."""
    strings = strings_once(recordings, data_folder, prepared_folder, settings, sample_rate)
    return {"test": {k: v for role in ("valid", "train") for k, v in strings[role].items()},
            "test_isolated": isolated_rows(recordings, sample_rate)}


def _write_fold(prepared_folder: str, name: str, manifests: dict) -> dict:
    fold = os.path.join(os.path.abspath(prepared_folder), name)
    paths = {}
    for split, rows in manifests.items():
        paths[split] = os.path.join(fold, f"{split}.json")
        write_json_manifest(rows, paths[split])
    return paths


def prepare_manifests(hparams: dict, build: bool = True) -> dict:
    """The recipe's hook: prepares the fold of ``test_speaker`` on the main process (``build``), the other
    processes read the manifests it wrote."""
    if hparams["test_speaker"] == ALL_SPEAKERS:
        raise DataError(f"test_speaker {ALL_SPEAKERS!r} writes test manifests only, for a model trained "
                        "elsewhere (python prepare.py ... --test_speaker all); training holds one speaker "
                        "out")
    fold = os.path.join(os.path.abspath(hparams["prepared_folder"]), hparams["test_speaker"])
    paths = {split: os.path.join(fold, f"{split}.json") for split in SPLITS}
    if not build or hparams.get("skip_prep", False):
        missing = [path for path in paths.values() if not os.path.isfile(path)]
        if missing:
            raise DataError(f"manifests missing: {', '.join(missing)} (run once without skip_prep)")
        return paths
    settings = StringSettings(**{key: hparams[key] for key in ("train_strings", "valid_strings")
                                 if key in hparams}, seed=hparams.get("data_seed", 1234))
    return prepare_fsdd(hparams["data_folder"], hparams["prepared_folder"], hparams["test_speaker"], settings,
                        sample_rate=hparams["model"]["sample_rate"],
                        isolated_in_train=hparams.get("isolated_in_train", True),
                        synthetic_strings=int(hparams.get("synthetic_strings", 0)))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_folder", required=True, help="an FSDD checkout or its recordings folder")
    parser.add_argument("--prepared_folder", default="../../../data/FSDD",
                        help="where strings and manifests go")
    parser.add_argument("--test_speaker", required=True,
                        help="the speaker held out for test ('all': every speaker, test manifests only)")
    parser.add_argument("--train_strings", type=int, default=StringSettings.train_strings)
    parser.add_argument("--valid_strings", type=int, default=StringSettings.valid_strings)
    parser.add_argument("--seed", type=int, default=StringSettings.seed)
    parser.add_argument("--synthetic_strings", type=int, default=0,
                        help="digit strings read by synthetic voices, added to training")
    args = parser.parse_args(argv)
    settings = StringSettings(seed=args.seed, train_strings=args.train_strings,
                              valid_strings=args.valid_strings)
    paths = prepare_fsdd(args.data_folder, args.prepared_folder, args.test_speaker, settings,
                         synthetic_strings=args.synthetic_strings)
    for split, path in paths.items():
        with open(path, encoding="utf-8") as handle:
            print(f"{split}: {len(json.load(handle))} utterances in {path}")


if __name__ == "__main__":
    main()
