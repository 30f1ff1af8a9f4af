"""Mixture sets (wsj0-2mix layout) and dynamic mixing: deterministic, speaker-disjoint, exact sums, errors."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from speechkit.data.mixtures import DynamicMixtures, load_sources, mix_sources, plan_mixtures, write_mixtures
from speechkit.errors import DataError
from tests.unit.data.mixture_sources import speaker_tones_manifest


def _digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_written_mixtures_are_byte_identical_per_seed_and_speaker_disjoint(tmp_path):
    manifest = speaker_tones_manifest(tmp_path)
    replacements = {"data_root": str(tmp_path)}
    for name in ("one", "two"):
        write_mixtures(manifest, str(tmp_path / name), "test", 6, seed=3, replacements=replacements,
                       log=lambda *_: None)
    assert _digest(tmp_path / "one") == _digest(tmp_path / "two")
    write_mixtures(manifest, str(tmp_path / "other"), "test", 6, seed=4, replacements=replacements,
                   log=lambda *_: None)
    assert _digest(tmp_path / "one") != _digest(tmp_path / "other")
    rows = json.loads((tmp_path / "one" / "test.json").read_text())
    assert len(rows) == 6
    for row in rows.values():
        assert row["s1_spk"] != row["s2_spk"]
        assert abs(row["s1_gain_db"] - row["s2_gain_db"]) <= 5.0
        mix, rate = soundfile.read(row["mix_wav"].replace("$data_root", str(tmp_path / "one")))
        s1, _ = soundfile.read(row["s1_wav"].replace("$data_root", str(tmp_path / "one")))
        s2, _ = soundfile.read(row["s2_wav"].replace("$data_root", str(tmp_path / "one")))
        assert rate == 8000 and len(mix) == len(s1) == len(s2)
        np.testing.assert_allclose(mix, s1 + s2, atol=2.0 / 32768)  # int16 rounding of three files


def test_three_speakers_max_mode_and_held_out_voices(tmp_path):
    manifest = speaker_tones_manifest(tmp_path, speakers=("x", "y", "z"))
    write_mixtures(manifest, str(tmp_path / "out"), "valid", 4, num_speakers=3, mode="max",
                   replacements={"data_root": str(tmp_path)}, log=lambda *_: None)
    rows = json.loads((tmp_path / "out" / "valid.json").read_text())
    for row in rows.values():
        assert {row["s1_spk"], row["s2_spk"], row["s3_spk"]} == {"x", "y", "z"}  # only the given voices
        # "max" pads to the longest source (utterance u of speaker s: 4000 + 800 u + 160 s samples, 16 kHz)
        sizes = [(4000 + 800 * int(row[f"s{k}_id"].split("-")[1]) + 160 * "xyz".index(row[f"s{k}_spk"])) // 2
                 for k in (1, 2, 3)]
        assert round(row["duration"] * 8000) == max(sizes)
    assert (tmp_path / "out" / "valid" / "s3").is_dir()


def test_mix_sources_min_and_max_modes():
    waves = [torch.ones(100), torch.ones(60)]
    mixture, sources = mix_sources(waves, [0.0, 0.0], "min")
    assert mixture.shape == (60,) and sources.shape == (2, 60)
    torch.testing.assert_close(mixture, sources.sum(0))
    mixture, sources = mix_sources(waves, [0.0, 0.0], "max")
    assert mixture.shape == (100,) and float(sources[1, 60:].abs().sum()) == 0.0
    with pytest.raises(DataError, match="mode"):
        mix_sources(waves, [0.0, 0.0], "longest")


def test_bad_manifests_raise_named_errors(tmp_path):
    rows = {"u1": {"wav": "a.flac", "spk": "a"}, "u2": {"wav": "b.flac"}}
    with pytest.raises(DataError, match="u2.*spk"):
        plan_mixtures(rows, 2)
    with pytest.raises(DataError, match="3 speakers"):
        plan_mixtures({"u1": {"spk": "a"}, "u2": {"spk": "b"}}, 2, num_speakers=3)
    manifest = speaker_tones_manifest(tmp_path, speakers=("a",))
    with pytest.raises(DataError, match="found 1"):
        write_mixtures(manifest, str(tmp_path / "out"), "test", 2, replacements={"data_root": str(tmp_path)})
    assert not (tmp_path / "out" / "test.json").exists()


def test_dynamic_mixing_is_new_each_epoch_and_reproducible(tmp_path):
    manifest = speaker_tones_manifest(tmp_path)
    sources = load_sources(manifest, 8000, {"data_root": str(tmp_path)})
    mixtures = DynamicMixtures(sources, num_mixtures=5, segment_samples=2000, seed=7)
    first = [mixtures[i] for i in range(5)]
    again = DynamicMixtures(sources, num_mixtures=5, segment_samples=2000, seed=7)
    for a, b in zip(first, [again[i] for i in range(5)]):
        assert torch.equal(a["mix_sig"], b["mix_sig"]) and torch.equal(a["s1_sig"], b["s1_sig"])
    mixtures.set_epoch(1)
    second = [mixtures[i] for i in range(5)]
    assert any(not torch.equal(a["mix_sig"], b["mix_sig"]) for a, b in zip(first, second))
    for item in first + second:
        assert item["mix_sig"].shape[0] <= 2000
        torch.testing.assert_close(item["mix_sig"], item["s1_sig"] + item["s2_sig"])


def test_dynamic_mixing_resumes_mid_epoch_with_the_same_mixtures(tmp_path):
    from speechkit.data.loader import make_dataloader

    sources = load_sources(speaker_tones_manifest(tmp_path), 8000, {"data_root": str(tmp_path)})

    def loader():
        dataset = DynamicMixtures(sources, num_mixtures=8, segment_samples=1500, seed=1)
        return make_dataloader(dataset, "train", batch_size=2, seed=5)

    first = loader()
    first.set_epoch(3)
    iterator = iter(first)
    next(iterator)
    state = first.state_dict()
    rest = [batch.mix_sig.data for batch in iterator]
    resumed = loader()  # a new process: the dataset's epoch comes from the restored loader state
    resumed.load_state_dict(state)
    again = [batch.mix_sig.data for batch in resumed]
    assert len(again) == len(rest) == 3
    assert first.dataset.epoch == resumed.dataset.epoch == 3  # the loader hands its epoch to the dataset
    for a, b in zip(rest, again):
        assert torch.equal(a, b)


def test_dynamic_mixing_perturbs_each_source_reproducibly_and_keeps_the_sum(tmp_path):
    from speechkit.augment import RandomGain, SpeedPerturb

    RATE = 8000
    sources = load_sources(speaker_tones_manifest(tmp_path), RATE, {"data_root": str(tmp_path)})
    plain = DynamicMixtures(sources, num_mixtures=4, segment_samples=2000, seed=7)
    perturbed = DynamicMixtures(sources, num_mixtures=4, segment_samples=2000, seed=7,
                                source_augmentation=SpeedPerturb(speed_range=(0.9, 1.1), sample_rate=RATE))
    again = DynamicMixtures(sources, num_mixtures=4, segment_samples=2000, seed=7,
                            source_augmentation=SpeedPerturb(speed_range=(0.9, 1.1), sample_rate=RATE))
    for index in range(4):
        item, same, reference = perturbed[index], again[index], plain[index]
        assert torch.equal(item["mix_sig"], same["mix_sig"])
        torch.testing.assert_close(item["mix_sig"], item["s1_sig"] + item["s2_sig"])
        assert item["mix_sig"].shape != reference["mix_sig"].shape or not torch.equal(item["mix_sig"],
                                                                                      reference["mix_sig"])
    unchanged = DynamicMixtures(sources, 4, segment_samples=2000, seed=7)[0]["mix_sig"]
    assert torch.equal(plain[0]["mix_sig"], unchanged)
    with pytest.raises(DataError, match="source_augmentation must have an augment"):
        DynamicMixtures(sources, num_mixtures=4, source_augmentation=lambda wave: wave)
    assert DynamicMixtures(sources, 2, source_augmentation=RandomGain(sample_rate=RATE))[0]["mix_sig"].numel()


def test_anchor_speakers_start_every_mixture_and_leave_other_plans_unchanged(tmp_path):
    rows = json.loads(Path(speaker_tones_manifest(tmp_path, speakers=("a", "b", "c", "d", "e"))).read_text())
    plans = plan_mixtures(rows, 200, num_speakers=2, seed=5, anchor_speakers=["e", "a"])
    assert {plan.sources[0].speaker for plan in plans} == {"a", "e"}
    assert all(plan.sources[0].speaker != plan.sources[1].speaker for plan in plans)
    assert {plan.sources[1].speaker for plan in plans} == {"a", "b", "c", "d", "e"}
    assert plans == plan_mixtures(rows, 200, num_speakers=2, seed=5, anchor_speakers=["a", "e"])
    # Without anchors the draws are the ones every earlier mixture set was written with.
    unanchored = plan_mixtures(rows, 50, num_speakers=3, seed=5)
    assert unanchored == plan_mixtures(rows, 50, num_speakers=3, seed=5, anchor_speakers=[])
    assert any(plan.sources[0].speaker not in ("a", "e") for plan in unanchored)
    with pytest.raises(DataError, match=r"anchor speakers \['z'\] have no utterance"):
        plan_mixtures(rows, 5, anchor_speakers=["z"])
