"""Speech mixtures for source separation: written sets in the wsj0-2mix layout, and dynamic mixing.

``write_mixtures`` turns a manifest with a speaker field into a mixture set::

    {output_dir}/{split}/mix/{id}.wav  {split}/s1/{id}.wav  {split}/s2/{id}.wav  (s3/ for three speakers)
    {output_dir}/{split}.json          {id: {"mix_wav", "s1_wav", "s2_wav", "duration",
                                              "s1_id", "s1_spk", "s1_gain_db", "s2_id", ...}}

Each mixture takes utterances of ``num_speakers`` different speakers, brings each to one reference level, then
applies a random gain within +-``level_range_db``/2 dB (so two sources differ by at most ``level_range_db``),
and cuts every source to the shortest one (``mode="min"``) or pads them to the longest (``"max"``). The mix is
the exact sum of the written sources (all scaled together below full scale). Every random choice comes from
``(seed, mixture index)``, so a seed always writes the same bytes.

:class:`DynamicMixtures` draws new pairs, gains and crops every epoch for training from sources held in
memory; item ``i`` of epoch ``e`` depends only on ``(seed, e, i)``, so a resumed epoch continues with the same
mixtures (the sampler's position is checkpointed, the content needs no state).

Example:
    >>> rows = {"a1": {"wav": "a1.flac", "spk": "a"}, "b1": {"wav": "b1.flac", "spk": "b"}}
    >>> plan = plan_mixtures(rows, num_mixtures=1, seed=0)
    >>> sorted({plan[0].sources[0].speaker, plan[0].sources[1].speaker})
    ['a', 'b']
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch

from speechkit.atomic_files import atomic_write
from speechkit.data import audio
from speechkit.data.audio_policy import shared_policy
from speechkit.data.manifest import load_manifest
from speechkit.errors import DataError

MODES = ("min", "max")
#: RMS level every source is brought to before its random gain (dBFS).
REFERENCE_DBFS = -25.0


@dataclass(frozen=True)
class SourcePlan:
    id: str
    speaker: str
    gain_db: float


@dataclass(frozen=True)
class MixturePlan:
    id: str
    sources: tuple  # SourcePlan per speaker, in output order (s1, s2, ...)


def _speaker_index(rows: Mapping[str, Mapping], speaker_key: str, where: str) -> dict:
    """{speaker: [ids, sorted]}; DataError naming the id whose speaker field is missing."""
    speakers: dict = {}
    for utt_id, row in rows.items():
        if speaker_key not in row:
            raise DataError(f"{where}: item {utt_id!r} has no {speaker_key!r} field (the speaker)")
        speakers.setdefault(str(row[speaker_key]), []).append(utt_id)
    return {spk: sorted(ids) for spk, ids in sorted(speakers.items())}


def _draw(rng: np.random.Generator, speakers: dict, num_speakers: int, level_range_db: float,
          anchors: Sequence[str] = ()) -> list:
    """Distinct speakers, one utterance of each, and a gain each; with ``anchors``, the first speaker is
    one of them (the others are any of the rest)."""
    names = list(speakers)
    if anchors:
        first = anchors[int(rng.integers(len(anchors)))]
        rest = [n for n in names if n != first]
        chosen = [first] + [rest[int(i)] for i in rng.choice(len(rest), size=num_speakers - 1, replace=False)]
    else:
        chosen = [names[int(i)] for i in rng.choice(len(names), size=num_speakers, replace=False)]
    sources = []
    for name in chosen:
        ids = speakers[name]
        gain = float(rng.uniform(-level_range_db / 2.0, level_range_db / 2.0))
        sources.append(SourcePlan(ids[int(rng.integers(len(ids)))], name, round(gain, 3)))
    return sources


def plan_mixtures(rows: Mapping[str, Mapping], num_mixtures: int, num_speakers: int = 2,
                  level_range_db: float = 5.0, seed: int = 0, speaker_key: str = "spk",
                  prefix: str = "mix", where: str = "manifest",
                  anchor_speakers: Optional[Sequence[str]] = None) -> list:
    """Which utterances, speakers and gains each mixture takes; never two utterances of one speaker.

    ``anchor_speakers``: every mixture's first source is one of these speakers (e.g. the voices of a speech
    engine held out of training, each mixed with other unseen voices); None: any speakers.

    Raises DataError when a row lacks the speaker field, there are fewer speakers than ``num_speakers``, an
    anchor speaker has no utterance, or ``num_mixtures`` is below 1.
    """
    if num_speakers < 2:
        raise DataError(f"a mixture needs at least 2 speakers, got num_speakers={num_speakers}")
    if isinstance(num_mixtures, bool) or not isinstance(num_mixtures, int) or num_mixtures < 1:
        raise DataError(f"num_mixtures must be a whole number >= 1, got {num_mixtures!r}")
    speakers = _speaker_index(rows, speaker_key, where)
    if len(speakers) < num_speakers:
        raise DataError(f"{where}: {num_speakers}-speaker mixtures need {num_speakers} speakers, found "
                        f"{len(speakers)} ({', '.join(speakers)})")
    anchors = sorted(str(a) for a in anchor_speakers or ())
    missing = [a for a in anchors if a not in speakers]
    if missing:
        raise DataError(f"{where}: anchor speakers {missing} have no utterance (speakers: "
                        f"{', '.join(speakers)})")
    plans = []
    for index in range(num_mixtures):
        rng = np.random.default_rng([seed, index])
        plans.append(MixturePlan(f"{prefix}-{index:06d}",
                                 tuple(_draw(rng, speakers, num_speakers, level_range_db, anchors))))
    return plans


def mix_sources(waves: Sequence[torch.Tensor], gains_db: Sequence[float], mode: str = "min",
                peak: float = 0.9) -> tuple:
    """Level, gain, cut or pad, and sum sources.

    Args:
        waves: one (time_i,) float tensor per source.
        gains_db: gain of each source after bringing it to :data:`REFERENCE_DBFS`.
        mode: ``"min"`` cuts every source to the shortest, ``"max"`` zero-pads them to the longest.
        peak: the mixture and the sources are scaled together so that no sample passes this value.

    Returns:
        ``(mixture, sources)``: (time,) and (num_sources, time); ``mixture == sources.sum(0)``.
    """
    if mode not in MODES:
        raise DataError(f"mixture mode must be one of {MODES}, got {mode!r}")
    length = (min if mode == "min" else max)(int(w.shape[0]) for w in waves)
    sources = torch.zeros(len(waves), length)
    for index, (wave, gain) in enumerate(zip(waves, gains_db)):
        wave = wave.to(torch.float32)[:length]
        rms = wave.pow(2).mean().clamp(min=1e-10).sqrt()
        scale = 10.0 ** ((REFERENCE_DBFS + gain) / 20.0) / rms
        sources[index, : wave.shape[0]] = wave * scale
    mixture = sources.sum(0)
    top = max(float(mixture.abs().max()), float(sources.abs().max()))
    if top > peak:
        sources, mixture = sources * (peak / top), mixture * (peak / top)
    return mixture, sources


def _read_source(row: Mapping, utt_id: str, sample_rate: int, wav_key: str) -> torch.Tensor:
    if wav_key not in row:
        raise DataError(f"item {utt_id!r} has no {wav_key!r} field (the audio path)")
    wave = shared_policy(sample_rate).read(row[wav_key])  # refuses NaN and inf samples, naming the file
    if wave.shape[0] == 0:
        raise DataError(f"item {utt_id!r}: {row[wav_key]} holds no samples at {sample_rate} Hz; a mixture "
                        "source needs audio (drop the item from the manifest)")
    return wave


def check_settings(num_mixtures: int, num_speakers: int, sample_rate: int, level_range_db: float,
                   mode: str) -> None:
    """Raise DataError naming the first setting of a mixture set that makes no sense."""
    for name, value, least in (("num_mixtures", num_mixtures, 1), ("num_speakers", num_speakers, 2),
                               ("sample_rate", sample_rate, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise DataError(f"{name} must be a whole number >= {least}, got {value!r}")
    if isinstance(level_range_db, bool) or not isinstance(level_range_db, (int, float)) \
            or not math.isfinite(level_range_db) or level_range_db < 0:
        raise DataError(f"level_range_db must be a finite number >= 0, got {level_range_db!r}")
    if mode not in MODES:
        raise DataError(f"mixture mode must be one of {MODES}, got {mode!r}")


def write_mixtures(manifest: str, output_dir: str, split: str, num_mixtures: int, num_speakers: int = 2,
                   sample_rate: int = 8000, mode: str = "min", level_range_db: float = 5.0, seed: int = 0,
                   replacements: Optional[Mapping[str, str]] = None, speaker_key: str = "spk",
                   wav_key: str = "wav", log=print,
                   progress: Optional[Callable[[int, int], None]] = None,
                   anchor_speakers: Optional[Sequence[str]] = None) -> str:
    """Write ``num_mixtures`` mixtures of ``manifest``'s utterances under ``output_dir/split``.

    Raises DataError for a setting out of range (:func:`check_settings`), a row without the speaker or audio
    field, a source without samples, or fewer speakers than ``num_speakers``; AudioError for an unreadable
    source or one with NaN or infinite samples (each naming the item or file).

    The manifest (``output_dir/{split}.json``, audio as ``$data_root/...``) is written last, through a
    temporary file, so an interrupted run never leaves a manifest naming missing audio. Returns its path.
    ``log`` prints the summary line; ``progress(done, total)`` is called after each mixture;
    ``anchor_speakers`` as in :func:`plan_mixtures`.
    """
    check_settings(num_mixtures, num_speakers, sample_rate, level_range_db, mode)
    rows = load_manifest(manifest, replacements)
    plans = plan_mixtures(rows, num_mixtures, num_speakers, level_range_db, seed, speaker_key,
                          prefix=split, where=str(manifest), anchor_speakers=anchor_speakers)
    folders = ["mix"] + [f"s{k + 1}" for k in range(num_speakers)]
    for folder in folders:
        os.makedirs(os.path.join(output_dir, split, folder), exist_ok=True)
    out: dict = {}
    for plan in plans:
        waves = [_read_source(rows[s.id], s.id, sample_rate, wav_key) for s in plan.sources]
        mixture, sources = mix_sources(waves, [s.gain_db for s in plan.sources], mode)
        entry: dict = {}
        for folder, signal in zip(folders, [mixture, *sources]):
            audio.write(os.path.join(output_dir, split, folder, f"{plan.id}.wav"), signal, sample_rate)
            entry[f"{folder}_wav"] = f"$data_root/{split}/{folder}/{plan.id}.wav"
        entry["duration"] = round(mixture.shape[0] / sample_rate, 4)
        for k, source in enumerate(plan.sources):
            entry.update({f"s{k + 1}_id": source.id, f"s{k + 1}_spk": source.speaker,
                          f"s{k + 1}_gain_db": source.gain_db})
        out[plan.id] = entry
        if progress:
            progress(len(out), len(plans))
    path = os.path.join(output_dir, f"{split}.json")
    with atomic_write(path) as handle:
        json.dump(out, handle, indent=1)
    log(f"mixtures: {len(out)} {num_speakers}-speaker mixtures ({mode}, {sample_rate} Hz) in {path}")
    return path


def load_sources(manifest: str, sample_rate: int, replacements: Optional[Mapping[str, str]] = None,
                 speaker_key: str = "spk", wav_key: str = "wav") -> list:
    """Every utterance of ``manifest`` as ``(id, speaker, (time,) float tensor at sample_rate)``, in id
    order (what :class:`DynamicMixtures` mixes)."""
    rows = load_manifest(manifest, replacements)
    _speaker_index(rows, speaker_key, str(manifest))
    return [(utt_id, str(rows[utt_id][speaker_key]), _read_source(rows[utt_id], utt_id, sample_rate, wav_key))
            for utt_id in sorted(rows)]


class DynamicMixtures(torch.utils.data.Dataset):
    """Training mixtures drawn anew each epoch: speakers, utterances, gains and crops.

    Args:
        sources: ``(id, speaker, waveform)`` triples (see :func:`load_sources`).
        num_mixtures: items per epoch.
        num_speakers: sources per mixture (distinct speakers).
        segment_samples: longest training crop; longer mixtures are cut at a random offset per source.
        level_range_db, mode: as for :func:`mix_sources`.
        seed: with the epoch (``set_epoch``, called by the loader) and the index, decides each item.
        source_augmentation: an augmentation of :mod:`speechkit.augment` (or anything with
            ``augment(wave, generator)``) applied to each source before mixing, e.g. ``SpeedPerturb`` with a
            ``speed_range``: the references are the augmented sources, so the task stays exact. Its draws
            come from the item's seed, epoch, index and source number, like everything else here.

    Items: ``{"id", "mix_sig": (time,), "s1_sig": (time,), "s2_sig": ...}``.
    """

    def __init__(self, sources: Sequence[tuple], num_mixtures: int, num_speakers: int = 2,
                 segment_samples: Optional[int] = None, level_range_db: float = 5.0, mode: str = "min",
                 seed: int = 0, source_augmentation: Optional[Any] = None):
        if source_augmentation is not None and not callable(getattr(source_augmentation, "augment", None)):
            raise DataError(f"source_augmentation must have an augment(wave, generator) method (a "
                            f"speechkit.augment augmentation), got {type(source_augmentation).__name__}")
        self.source_augmentation = source_augmentation
        self.waves = {utt_id: wave for utt_id, _, wave in sources}
        self.speakers = _speaker_index({u: {"spk": s} for u, s, _ in sources}, "spk", "dynamic mixing")
        if len(self.speakers) < num_speakers:
            raise DataError(f"dynamic mixing of {num_speakers} speakers needs {num_speakers} speakers, "
                            f"found {len(self.speakers)}")
        self.num_mixtures, self.num_speakers = int(num_mixtures), int(num_speakers)
        self.segment_samples, self.level_range_db = segment_samples, float(level_range_db)
        self.mode, self.seed, self.epoch = mode, int(seed), 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.num_mixtures

    def __getitem__(self, index: int) -> dict:
        rng = np.random.default_rng([self.seed, self.epoch, int(index)])
        plan = _draw(rng, self.speakers, self.num_speakers, self.level_range_db)
        waves = []
        for number, source in enumerate(plan):
            wave = self.waves[source.id]
            if self.source_augmentation is not None:
                generator = torch.Generator().manual_seed(int(rng.integers(2**62)) + number)
                wave = self.source_augmentation.augment(wave, generator)
            if self.segment_samples and wave.shape[0] > self.segment_samples:
                start = int(rng.integers(wave.shape[0] - self.segment_samples + 1))
                wave = wave[start:start + self.segment_samples]
            waves.append(wave)
        mixture, sources = mix_sources(waves, [s.gain_db for s in plan], self.mode)
        if self.segment_samples and mixture.shape[0] > self.segment_samples:  # "max" mode of short crops
            mixture, sources = mixture[: self.segment_samples], sources[:, : self.segment_samples]
        item = {"id": f"dm-{self.epoch}-{index:07d}", "mix_sig": mixture}
        item.update({f"s{k + 1}_sig": sources[k] for k in range(self.num_speakers)})
        return item



def mixture_crop(keys: Sequence[str], segment_samples: int, seed: int = 0, policy=None):
    """A dynamic item reading a written mixture and its sources cropped to one window of ``segment_samples``
    (the same window in every file; its start drawn from ``(seed, id)``, so an item is always the same).

    Training on written mixtures (LibriMix, WHAM!) this way keeps batches as short as dynamic mixing does.
    Takes ``id`` and ``<key>_wav`` per key; provides ``<key>_sig`` (time,) per key, one channel.
    ``policy`` (an :class:`~speechkit.data.audio_policy.AudioPolicy`) is the model's rate and channels: a
    file at that rate is read in its window alone; one at another rate is converted whole, then cropped (or
    refused by a non-converting policy), so no file is read as if its rate matched.

    Example:
        >>> from speechkit.data.dataset import DynamicItemDataset
        >>> wavs = {"mix_wav": "data/utt1.wav", "s1_wav": "data/utt1.wav", "s2_wav": "data/utt1.wav"}
        >>> dataset = DynamicItemDataset({"mixture1": wavs})
        >>> dataset.add_dynamic_item(mixture_crop(["mix", "s1", "s2"], 8000, seed=1))
        >>> dataset.set_output_keys(["mix_sig", "s1_sig"])
        >>> dataset[0]["mix_sig"].shape
        torch.Size([8000])
    """
    import zlib

    from speechkit.data.pipeline import DynamicItem

    if isinstance(segment_samples, bool) or not isinstance(segment_samples, int) or segment_samples < 1:
        raise DataError(f"segment_samples must be a whole number >= 1, got {segment_samples!r}")

    def rate_of(path: Any) -> int:
        return audio.info(path["file"] if isinstance(path, Mapping) else path).sample_rate

    def read_cropped(data_id: str, *paths: Any):
        first = audio.info(paths[0]["file"] if isinstance(paths[0], Mapping) else paths[0])
        rate = first.sample_rate if policy is None else policy.sample_rate
        frames = round(first.frames * rate / first.sample_rate)
        room = max(0, frames - segment_samples)
        start = int(np.random.default_rng([seed, zlib.crc32(data_id.encode())]).integers(room + 1))
        waves = []
        for path in paths:
            if policy is None or rate_of(path) == rate:  # the window alone, at the model's rate
                wave = audio.read(path, start, start + segment_samples)
                wave = policy.apply(wave, rate, str(path)) if policy is not None else (
                    wave.mean(dim=1) if wave.dim() == 2 else wave)
            else:  # converted whole, then the same window in the model's samples
                wave = policy.read(path)[start:start + segment_samples]
            waves.append(wave)
        return tuple(waves) if len(waves) > 1 else waves[0]

    return DynamicItem(read_cropped, ["id"] + [f"{key}_wav" for key in keys], [f"{key}_sig" for key in keys])
