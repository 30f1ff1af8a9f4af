"""What would go wrong in training on some manifests: one report of errors and warnings (docs/data.md,
"The check report").

The checks, per item unless said otherwise:

=====================  =======  ====================================================================
check                  level    finds
=====================  =======  ====================================================================
unreadable             error    a missing file, one libsndfile cannot open, a broken header
non-finite             error    NaN or infinite samples (a damaged float file)
empty audio            error    no samples, or fewer than one model frame (``frame_rate``)
duration mismatch      error    the manifest's ``duration`` differs from the file's by over 50 ms
too long               error    longer than ``max_duration`` (no batch of the budget can hold it)
empty transcript       error    a ``text`` field that is empty or only spaces
outside alphabet       error    characters not in ``alphabet`` (counted per character, with examples)
same audio in splits   error    the same samples (hash) in two splits: the test would score training data
sample rate            warning  a rate other than ``sample_rate`` (resampled when read) or mixed rates
channels               warning  more than one channel (mixed down when read)
too short              warning  shorter than ``min_duration``
frames < characters    warning  fewer model frames than characters: CTC cannot align it
silent                 warning  RMS below -60 dBFS
clipped                warning  over 0.1% of the samples at full scale
duplicate audio        warning  the same samples twice in one split
same text and speaker  warning  one speaker saying one text in two splits
shared speakers        warning  speakers in both a training and a test split
speaking rate          warning  characters per second over ``outlier_factor`` times from the median:
                                likely a transcript of other audio (misaligned)
=====================  =======  ====================================================================

Headers are read for every file (fast: no decoding); the samples are decoded only for the checks that need
them (non-finite, silent, clipped, the audio hash), and not at all with ``decode=False``.

Example:
    >>> paths = ["data/train.json", "data/test.json"]
    >>> report = check_manifests(paths, sample_rate=16000, replacements={"data_root": "data"})
    >>> print(report.format_table())
    split  items  hours  rates (Hz)  channels  speakers
    train  2      0.001  16000x2     1x2       2
    test   1      0.000  16000x1     1x1       1
    <BLANKLINE>
    level    check            split  items  examples
    warning  shared speakers  test   1      1 speaker(s) of test also in train: alice
    <BLANKLINE>
    0 error(s), 1 warning(s): see docs/data.md#the-check-report
    >>> report.errors
    0
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Union

import numpy as np

from speechkit.atomic_files import atomic_write
from speechkit.data.fields import FILE_FIELDS
from speechkit.data.manifest import load_manifest

ERROR, WARNING = "error", "warning"
#: Where the report's lines point for what each check means and how to fix it.
DOCS = "docs/data.md#the-check-report"
SILENCE_DBFS = -60.0
CLIP_LEVEL = 0.999
CLIP_FRACTION = 0.001
DURATION_TOLERANCE = 0.05  # seconds between the manifest's duration and the file's
TRAIN_WORDS = ("train",)
TEST_WORDS = ("test", "eval")


@dataclass
class Finding:
    """One thing found: ``level`` (error or warning), ``check`` (its name), the ``split`` and item ``id``
    (empty for a finding about a whole split), and ``detail`` in words."""

    level: str
    check: str
    split: str
    id: str
    detail: str


@dataclass
class CheckOptions:
    """The thresholds of the checks (all optional; ``None`` leaves a check out)."""

    sample_rate: Optional[int] = None  # the recipe's rate: others are reported as resampled
    min_duration: float = 0.1  # seconds
    max_duration: Optional[float] = None  # seconds: the longest item a batch can take
    frame_rate: Optional[float] = None  # model output frames per second (e.g. 25 for 10 ms hops / 4)
    alphabet: Optional[frozenset] = None  # characters the tokenizer knows (space always allowed)
    outlier_factor: float = 3.0  # speaking rate this many times above or below the median
    decode: bool = True  # decode samples for non-finite, silence, clipping and duplicate audio


@dataclass
class CheckReport:
    """Findings and a summary per split; ``errors``/``warnings`` count findings, ``format_table()`` prints."""

    manifests: dict  # split -> path
    summary: dict  # split -> {"items", "hours", "sample_rates", "channels", "speakers"}
    findings: list = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(f.level == ERROR for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f.level == WARNING for f in self.findings)

    def to_dict(self) -> dict:
        return {"manifests": self.manifests, "summary": self.summary, "errors": self.errors,
                "warnings": self.warnings, "findings": [asdict(f) for f in self.findings]}

    @classmethod
    def from_dict(cls, data: Mapping) -> CheckReport:
        return cls(dict(data["manifests"]), dict(data["summary"]), [Finding(**f) for f in data["findings"]])

    def grouped(self) -> list:
        """``(level, check, split, count, examples)`` per kind of finding, errors first."""
        groups: dict = {}
        for finding in self.findings:
            groups.setdefault((finding.level, finding.check, finding.split), []).append(finding)
        order = sorted(groups, key=lambda key: (key[0] != ERROR, key[1], key[2]))
        return [(*key, len(groups[key]), groups[key][:3]) for key in order]

    def lines(self, level: Optional[str] = None) -> list:
        """One line per kind of finding (``level`` only, when given), with up to three examples."""
        out = []
        for found_level, check, split, count, examples in self.grouped():
            if level is not None and found_level != level:
                continue
            shown = "; ".join(f"{f.id}: {f.detail}" if f.id else f.detail for f in examples)
            more = f" (and {count - len(examples)} more)" if count > len(examples) else ""
            out.append(f"{found_level}: {check} [{split}] {count} item(s): {shown}{more}")
        return out

    def format_table(self) -> str:
        """The summary per split, then one row per kind of finding (the terminal report)."""
        rows = [("split", "items", "hours", "rates (Hz)", "channels", "speakers")]
        for split, info in self.summary.items():
            rows.append((split, str(info["items"]), f"{info['hours']:.3f}",
                         ", ".join(f"{r}x{n}" for r, n in info["sample_rates"].items()),
                         ", ".join(f"{c}x{n}" for c, n in info["channels"].items()), str(info["speakers"])))
        text = [_table(rows), ""]
        for split, info in self.summary.items():
            if info.get("outside_alphabet"):
                counts = info["outside_alphabet"]
                text.append(f"{split}: {len(counts)} character(s) outside the alphabet: "
                            + ", ".join(f"{char!r} x{count}" for char, count in list(counts.items())[:12]))
        if any(info.get("outside_alphabet") for info in self.summary.values()):
            text.append("")
        if self.findings:
            found = [("level", "check", "split", "items", "examples")]
            for level, check, split, count, examples in self.grouped():
                shown = "; ".join(f"{f.id}: {f.detail}" if f.id else f.detail for f in examples[:2])
                found.append((level, check, split, str(count), shown[:140]))
            text += [_table(found), ""]
        text.append(f"{self.errors} error(s), {self.warnings} warning(s)"
                    + (f": see {DOCS}" if self.findings else ""))
        return "\n".join(text)


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)
    return "\n".join(lines)


def split_name(path: str) -> str:
    """``train`` for ``.../train.json``: the name a manifest's split goes by in the report."""
    return os.path.splitext(os.path.basename(path))[0]


def audio_sources(row: Mapping) -> dict:
    """``{field: path or segment}`` of a row's audio: the file fields and every ``*_wav`` field."""
    return {name: value for name, value in row.items()
            if (name in FILE_FIELDS or name.endswith("_wav")) and isinstance(value, (str, dict))}


def _read_header(source: Any) -> tuple:
    """``(frames, rate, channels, segment frames or None)``; raises what soundfile raises."""
    import soundfile

    path = source["file"] if isinstance(source, dict) else source
    found = soundfile.info(path)
    frames = int(found.frames)
    if isinstance(source, dict):
        scale = 1 if source.get("unit", "samples") == "samples" else found.samplerate
        first = int(round(float(source.get("start") or 0) * scale))
        stop = source.get("stop")
        last = frames if stop is None else min(frames, int(round(float(stop) * scale)))
        frames = max(0, last - first)
        return frames, int(found.samplerate), int(found.channels), (first, last)
    return frames, int(found.samplerate), int(found.channels), None


def _decode(source: Any, bounds: Optional[tuple]) -> np.ndarray:
    import soundfile

    path = source["file"] if isinstance(source, dict) else source
    with soundfile.SoundFile(path) as handle:
        if bounds:
            handle.seek(bounds[0])
            return handle.read(bounds[1] - bounds[0], dtype="float32", always_2d=True)
        return handle.read(dtype="float32", always_2d=True)


def check_manifests(manifests: Union[Sequence[str], Mapping[str, str]],
                    options: Optional[CheckOptions] = None, *,
                    replacements: Optional[Mapping[str, str]] = None,
                    progress: Optional[Callable[[int, int], None]] = None,
                    **option_values: Any) -> CheckReport:
    """Check ``manifests`` (paths, or ``{split: path}``) and return the report.

    Arguments:
        options: the thresholds (or give them as keywords: ``sample_rate=16000``).
        replacements: for ``$name`` placeholders in paths; by default ``$data_root`` is each manifest's
            folder (the built-in corpus writes its manifests beside the audio).
        progress: ``progress(done, total)`` after each item.

    Raises:
        ManifestError: a manifest that cannot be parsed at all (naming the file and line).
    """
    options = options or CheckOptions(**option_values)
    if not isinstance(manifests, Mapping):
        manifests = {split_name(path): path for path in manifests}
    loaded = {}
    for split, path in manifests.items():
        found = {"data_root": os.path.dirname(os.path.abspath(path)), **(replacements or {})}
        loaded[split] = load_manifest(path, found, check_files=False)
    total = sum(len(rows) for rows in loaded.values())
    findings: list = []
    summary: dict = {}
    hashes: dict = defaultdict(list)  # audio hash -> [(split, id)]
    said: dict = defaultdict(set)  # (speaker, text) -> splits
    speakers_of: dict = {}
    rates_seen: Counter = Counter()
    speeds: list = []  # (characters per second, split, id)
    done = 0
    for split, rows in loaded.items():
        info = {"items": len(rows), "hours": 0.0, "sample_rates": Counter(), "channels": Counter()}
        speakers: set = set()
        for data_id, row in rows.items():
            add = _Recorder(findings, split, data_id)
            duration = _check_audio(row, options, add, info, hashes, (split, data_id))
            speaker = row.get("speaker", row.get("spk"))
            if speaker not in (None, ""):
                speakers.add(str(speaker))
            if "text" in row:
                text = str(row["text"])
                if not text.strip():
                    add(ERROR, "empty transcript", "the text is empty")
                else:
                    if speaker not in (None, ""):
                        said[(str(speaker), " ".join(text.split()))].add((split, data_id))
                    if duration:
                        speeds.append((len(text.replace(" ", "")) / duration, split, data_id))
                    if options.frame_rate and duration:
                        frames = int(duration * options.frame_rate)
                        if 0 < frames < len(text):
                            add(WARNING, "frames < characters", f"{frames} model frames for {len(text)} "
                                "characters: CTC cannot align it with character tokens")
            done += 1
            if progress:
                progress(done, total)
        info["hours"] = round(info["hours"] / 3600.0, 6)
        info["speakers"] = len(speakers)
        rates_seen.update(info["sample_rates"])
        info["sample_rates"] = dict(sorted(info["sample_rates"].items()))
        info["channels"] = dict(sorted(info["channels"].items()))
        summary[split] = info
        speakers_of[split] = speakers
    if options.sample_rate is None and len(rates_seen) > 1:
        findings.append(Finding(WARNING, "sample rate", "all", "", "mixed rates "
                                + ", ".join(f"{r} Hz x{n}" for r, n in sorted(rates_seen.items()))
                                + ": give the recipe's rate (--sample-rate) to see what is resampled"))
    _check_text(loaded, options, findings, summary)
    _check_across_splits(hashes, said, speakers_of, findings)
    _check_speeds(speeds, options, findings)
    return CheckReport({split: os.fspath(path) for split, path in manifests.items()}, summary, findings)


class _Recorder:
    """``add(level, check, detail)`` for one item: a finding once per check, whichever file says it."""

    def __init__(self, findings: list, split: str, data_id: str):
        self.findings, self.split, self.id, self.reported = findings, split, data_id, set()

    def __call__(self, level: str, check: str, detail: str) -> None:
        if check not in self.reported:
            self.reported.add(check)
            self.findings.append(Finding(level, check, self.split, self.id, detail))


def _check_audio(row: Mapping, options: CheckOptions, add: Callable, info: dict, hashes: dict,
                 key: tuple) -> Optional[float]:
    """Header (and sample) checks of one row; returns its duration in seconds (None when unreadable)."""
    duration, duration_field = None, True
    for name, source in audio_sources(row).items():
        path = source.get("file") if isinstance(source, dict) else source
        try:
            frames, rate, channels, bounds = _read_header(source)
        except Exception as error:  # libsndfile's own error types, a missing file, a bad segment
            add(ERROR, "unreadable", f"{name} {path}: {error}")
            continue
        seconds = frames / rate
        if duration is None:
            duration = seconds
            info["hours"] += seconds
            info["sample_rates"][rate] += 1
            info["channels"][channels] += 1
        if options.sample_rate and rate != options.sample_rate:
            add(WARNING, "sample rate", f"{rate} Hz, resampled to {options.sample_rate} Hz when read")
        if channels > 1:
            add(WARNING, "channels", f"{channels} channels, mixed down to one when read")
        if frames == 0 or (options.frame_rate and seconds * options.frame_rate < 1):
            add(ERROR, "empty audio", f"{path}: {frames} samples ({seconds:.3f} s), no model frame")
        elif seconds < options.min_duration:
            add(WARNING, "too short", f"{seconds:.3f} s < {options.min_duration} s")
        if options.max_duration is not None and seconds > options.max_duration:
            add(ERROR, "too long", f"{seconds:.2f} s > {options.max_duration} s (the longest a batch takes)")
        stated = row.get("duration")
        if name == next(iter(audio_sources(row))) and isinstance(stated, (int, float)) \
                and abs(float(stated) - seconds) > DURATION_TOLERANCE:
            add(ERROR, "duration mismatch", f"the manifest says {stated} s, {path} holds {seconds:.3f} s")
        if options.decode and frames:
            # the audio hash of the first field only (the mixture, not its sources, which a corpus may reuse)
            _check_samples(source, bounds, path, add, hashes if duration_field else None, key)
        duration_field = False
    return duration


def _check_samples(source: Any, bounds: Optional[tuple], path: str, add: Callable, hashes: Optional[dict],
                   key: tuple) -> None:
    try:
        samples = _decode(source, bounds)
    except Exception as error:
        add(ERROR, "unreadable", f"{path}: header read, samples not: {error}")
        return
    finite = np.isfinite(samples)
    if not finite.all():
        add(ERROR, "non-finite", f"{path}: {int((~finite).sum())} NaN or infinite sample(s)")
        return
    if hashes is not None:
        hashes[hashlib.blake2b(samples.tobytes(), digest_size=16).hexdigest()].append(key)
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if samples.size else 0.0
    if rms <= 10 ** (SILENCE_DBFS / 20):
        level = "digital silence" if rms == 0 else f"{20 * math.log10(rms):.1f} dBFS"
        add(WARNING, "silent", f"{path}: RMS {level}")
    clipped = float(np.mean(np.abs(samples) >= CLIP_LEVEL))
    if clipped > CLIP_FRACTION:
        add(WARNING, "clipped", f"{path}: {100 * clipped:.2f}% of the samples at full scale")


def characters_outside(texts: Iterable, alphabet: frozenset) -> tuple:
    """``(counts, examples)``: ``{char: occurrences}`` and ``{char: [ids]}`` of the characters of ``texts``
    (``(id, text)`` pairs) outside ``alphabet``; the text policy's ``count_characters_outside`` when this
    install has it, so that the check and training count the same way."""
    try:
        from speechkit.data.text_policy import count_characters_outside
    except ImportError:
        counts: Counter = Counter()
        examples: dict = defaultdict(list)
        for data_id, text in texts:
            for char in text:
                if char not in alphabet and not char.isspace():  # spaces are word boundaries, not tokens
                    counts[char] += 1
                    if data_id not in examples[char]:
                        examples[char].append(data_id)
        return dict(counts), dict(examples)
    report = count_characters_outside(texts, set(alphabet))
    return dict(report.counts), {char: list(ids) for char, ids in report.examples.items()}


def _check_text(loaded: Mapping, options: CheckOptions, findings: list, summary: dict) -> None:
    if options.alphabet is None:
        return
    allowed = frozenset(options.alphabet) | {" "}
    for split, rows in loaded.items():
        texts = [(data_id, str(row["text"])) for data_id, row in rows.items() if "text" in row]
        counts, _ = characters_outside(texts, allowed)
        if not counts:
            continue
        summary[split]["outside_alphabet"] = dict(sorted(counts.items(), key=lambda item: -item[1]))
        for data_id, text in texts:
            outside = sorted({char for char in text if char not in allowed and not char.isspace()})
            if outside:
                findings.append(Finding(ERROR, "outside alphabet", split, data_id,
                                        ", ".join(f"{char!r} x{text.count(char)}" for char in outside)))


def _check_across_splits(hashes: Mapping, said: Mapping, speakers_of: Mapping, findings: list) -> None:
    for keys in hashes.values():
        splits = {split for split, _ in keys}
        if len(keys) < 2:
            continue
        names = ", ".join(f"{split}/{data_id}" for split, data_id in keys[:4])
        level, check = (ERROR, "same audio in splits") if len(splits) > 1 else (WARNING, "duplicate audio")
        for split, data_id in keys:
            findings.append(Finding(level, check, split, data_id, f"same samples as {names}"))
    for (speaker, text), keys in said.items():
        if len({split for split, _ in keys}) > 1:
            names = ", ".join(f"{split}/{data_id}" for split, data_id in sorted(keys)[:4])
            for split, data_id in sorted(keys):
                findings.append(Finding(WARNING, "same text and speaker", split, data_id,
                                        f"speaker {speaker!r} says {text[:40]!r} in {names}"))
    trains = [s for s in speakers_of if any(word in s for word in TRAIN_WORDS)]
    tests = [s for s in speakers_of if any(word in s for word in TEST_WORDS)]
    for train in trains:
        for test in tests:
            shared = sorted(speakers_of[train] & speakers_of[test])
            if shared:
                findings.append(Finding(WARNING, "shared speakers", test, "",
                                        f"{len(shared)} speaker(s) of {test} also in {train}: "
                                        f"{', '.join(shared[:5])}"))


def _check_speeds(speeds: list, options: CheckOptions, findings: list) -> None:
    if len(speeds) < 5:
        return  # too few items to know what a normal speaking rate is
    median = statistics.median(speed for speed, _, _ in speeds)
    if median <= 0:
        return
    factor = options.outlier_factor
    for speed, split, data_id in speeds:
        if speed > median * factor or speed < median / factor:
            findings.append(Finding(WARNING, "speaking rate", split, data_id,
                                    f"{speed:.1f} characters/s against a median of {median:.1f}: a "
                                    "transcript of other audio?"))


def read_alphabet(value: str) -> frozenset:
    """The characters of ``value``, or of the file it names (newlines left out)."""
    if os.path.isfile(value):
        with open(value, encoding="utf-8") as handle:
            value = handle.read()
    return frozenset(value.replace("\n", "").replace("\r", ""))


def save_report(report: CheckReport, path: str) -> None:
    """The report as JSON at ``path`` (through a temporary file)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with atomic_write(path) as handle:
        json.dump(report.to_dict(), handle, indent=1, ensure_ascii=False)


def check_before_training(manifests: Mapping[str, str], cache_folder: str,
                          options: Optional[CheckOptions] = None, *,
                          replacements: Optional[Mapping[str, str]] = None,
                          log: Callable[[str], None] = print) -> CheckReport:
    """The check a recipe runs before training: :func:`check_manifests`, cached by the manifests' content.

    A report without errors is kept in ``cache_folder/data_check-<hash>.json``, the hash of the manifests'
    bytes and the options, so the next run (or the next step of a recipe) reads it instead of checking
    again; a report with errors is never cached (fixing the audio in place is then checked anew).

    Raises:
        DataError: the report has errors; the message holds one line per kind of error and the
            report's path.
    """
    from speechkit.errors import DataError

    options = options or CheckOptions()
    digest = hashlib.sha256()
    for split in sorted(manifests):
        digest.update(split.encode() + b"\0" + os.path.abspath(manifests[split]).encode() + b"\0")
        with open(manifests[split], "rb") as handle:
            digest.update(handle.read())
    digest.update(json.dumps({**asdict(options), "alphabet": sorted(options.alphabet or [])}, sort_keys=True,
                             default=str).encode())
    digest.update(json.dumps(dict(replacements or {}), sort_keys=True).encode())
    cache = os.path.join(cache_folder, f"data_check-{digest.hexdigest()[:16]}.json")
    if os.path.isfile(cache):
        try:
            with open(cache, encoding="utf-8") as handle:
                return CheckReport.from_dict(json.load(handle))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged cache file: check again
    report = check_manifests(manifests, options, replacements=replacements)
    if report.errors:
        failed = os.path.join(cache_folder, "data_check-errors.json")
        save_report(report, failed)
        raise DataError(f"the data check found {report.errors} error(s) in "
                        f"{', '.join(manifests.values())}:\n  "
                        + "\n  ".join(report.lines(ERROR))
                        + f"\nthe full report: {failed} (or run: speechkit data check "
                        + " ".join(manifests.values()) + f"); what each check means: {DOCS}; "
                        "to train anyway, pass --check_data False")
    save_report(report, cache)
    if report.warnings:
        log(f"data check: {report.warnings} warning(s) (the report: {cache}):\n  "
            + "\n  ".join(report.lines()))
    return report
