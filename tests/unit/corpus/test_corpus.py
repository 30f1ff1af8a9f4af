"""The built-in corpus: text normalization, the plan's splits, signal effects, and a tiny real build."""
from __future__ import annotations

import json
import random
import shutil

import numpy as np
import pytest
import soundfile

from speechkit.corpus import (
    CorpusConfig,
    build_corpus,
    effects,
    make_digit_strings,
    make_plan,
    make_sentences,
    normalize_text,
    vocabulary,
)
from speechkit.corpus.generator import split_voices
from speechkit.corpus.text import DIGIT_WORDS
from speechkit.corpus.voices import speaker_of, voice_by_name
from speechkit.errors import DataError
from tests.helpers.folders import folder_digest

ENGINES_PRESENT = shutil.which("flite") is not None and shutil.which("festival") is not None
needs_engines = pytest.mark.skipif(not ENGINES_PRESENT, reason="flite/festival not installed "
                                   "(apt-get install flite festival festvox-kdlpc16k)")


def test_normalize_text_keeps_upper_case_letters_apostrophes_and_single_spaces():
    assert normalize_text("  Don't  stop, it\u2019s 5-ish!\n") == "DON'T STOP IT'S ISH"
    assert normalize_text("") == ""


def test_sentences_are_distinct_normalized_and_reproducible():
    first = make_sentences(500, random.Random(7))
    assert first == make_sentences(500, random.Random(7))
    assert first != make_sentences(500, random.Random(8))
    assert len(set(first)) == 500
    words = set(vocabulary())
    for sentence in first:
        assert normalize_text(sentence) == sentence
        assert set(sentence.split()) <= words
    assert 300 <= len(words) <= 600


def test_digit_strings_are_distinct_within_their_lengths_and_reproducible():
    strings = make_digit_strings(300, random.Random(5), (2, 4))
    assert strings == make_digit_strings(300, random.Random(5), (2, 4))
    assert strings != make_digit_strings(300, random.Random(6), (2, 4))
    assert len(set(strings)) == 300
    assert {len(s.split()) for s in strings} == {2, 3, 4}
    assert set(" ".join(strings).split()) == set(DIGIT_WORDS)
    assert all(normalize_text(s) == s for s in strings)
    assert sorted(make_digit_strings(10, random.Random(0), (1, 1))) == sorted(DIGIT_WORDS)  # every one
    with pytest.raises(ValueError, match="only 10 distinct digit strings have 1 to 1 digits, 11 asked"):
        make_digit_strings(11, random.Random(0), (1, 1))
    with pytest.raises(ValueError, match="1 <= min <= max"):
        make_digit_strings(1, random.Random(0), (0, 2))


def test_a_digits_corpus_reads_digit_strings_and_a_grammar_corpus_keeps_its_settings():
    config = CorpusConfig("unused", num_train=40, num_valid=5, num_test=5, seed=3, text="digits",
                          digit_string_length=(3, 5))
    plan = make_plan(config)
    for item in plan:
        assert 3 <= len(item.text.split()) <= 5 and set(item.text.split()) <= set(DIGIT_WORDS)
    texts = {split: {p.text for p in plan if p.split == split} for split in ("train", "valid", "test")}
    assert not texts["test"] & texts["train"] and not texts["valid"] & texts["train"]
    assert config.content_settings()["text"] == "digits"
    assert config.content_settings()["digit_string_length"] == [3, 5]
    # Corpora built before the option have no such settings: a grammar corpus records none, so it is reused.
    assert "text" not in CorpusConfig("unused").content_settings()
    assert "digit_string_length" not in CorpusConfig("unused").content_settings()
    # More distinct strings asked than there are: refused, naming the setting.
    with pytest.raises(DataError, match="num_sentences=4000: only 110 distinct digit strings"):
        make_plan(CorpusConfig("unused", num_train=5, num_valid=0, num_test=0, text="digits",
                               digit_string_length=(1, 2)))


def test_a_digit_share_mixes_digit_strings_into_every_split_of_a_grammar_corpus():
    config = CorpusConfig("unused", num_train=400, num_valid=80, num_test=80, seed=3, digit_share=0.25,
                          digit_string_length=(3, 4), num_sentences=800)
    plan = make_plan(config)
    assert plan == make_plan(config)
    is_digits = lambda text: set(text.split()) <= set(DIGIT_WORDS)
    for split in ("train", "valid", "test"):
        texts = [p.text for p in plan if p.split == split]
        share = sum(map(is_digits, texts)) / len(texts)
        assert 0.12 < share < 0.4, (split, share)  # about a quarter in each split
        assert all(3 <= len(t.split()) <= 4 for t in texts if is_digits(t))
    texts = {split: {p.text for p in plan if p.split == split} for split in ("train", "valid", "test")}
    assert not texts["test"] & texts["train"] and not texts["valid"] & texts["train"]
    assert config.content_settings()["digit_share"] == 0.25
    assert config.content_settings()["digit_string_length"] == [3, 4]
    # Without a share the plan is the one corpora built before the option had.
    plain = CorpusConfig("unused", num_train=400, num_valid=80, num_test=80, seed=3, num_sentences=800)
    assert "digit_share" not in plain.content_settings()
    assert not any(is_digits(p.text) for p in make_plan(plain))
    with pytest.raises(DataError, match="only 110 distinct digit strings have 1 to 2 digits, 200 needed"):
        make_plan(CorpusConfig("unused", num_train=5, num_valid=0, num_test=0, digit_share=0.05,
                               digit_string_length=(1, 2)))


def test_plan_keeps_voices_and_sentences_apart_across_splits():
    config = CorpusConfig("unused", num_train=300, num_valid=40, num_test=60, seed=3)
    plan = make_plan(config)
    assert plan == make_plan(config)
    by_split = {split: [p for p in plan if p.split == split] for split in ("train", "valid", "test")}
    assert [len(by_split[s]) for s in ("train", "valid", "test")] == [300, 40, 60]
    voices = {split: {p.voice for p in items} for split, items in by_split.items()}
    texts = {split: {p.text for p in items} for split, items in by_split.items()}
    assert voices["test"] == set(config.test_voices) and not voices["test"] & voices["train"]
    assert not voices["valid"] & voices["train"]
    assert not texts["test"] & texts["train"] and not texts["valid"] & texts["train"]
    assert not texts["test"] & texts["valid"]
    assert len(texts["test"]) == 60  # one distinct sentence per test utterance
    assert len({p.id for p in plan}) == len(plan)
    for item in plan:
        assert 1 / 1.2 - 1e-3 <= item.stretch <= 1 / 0.85 + 1e-3 and -30 <= item.loudness_dbfs <= -18
        assert item.noise_color is None  # noise is off by default
    other_seed = make_plan(CorpusConfig("unused", num_train=300, num_valid=40, num_test=60, seed=4))
    assert [p.text for p in other_seed] != [p.text for p in plan]


def test_plan_errors_name_the_bad_voice_or_split():
    with pytest.raises(DataError, match="unknown corpus voice 'nobody'"):
        make_plan(CorpusConfig("x", test_voices=["nobody"]))
    with pytest.raises(DataError, match="both the valid and the test"):
        make_plan(CorpusConfig("x", test_voices=["kal"], valid_voices=["kal"]))
    with pytest.raises(DataError, match="test split asks for 5 utterances but has no voice"):
        make_plan(CorpusConfig("x", num_test=5, voices=["rms", "slt"]))
    # Without held-out valid voices, valid is spoken by training voices (its sentences stay unseen).
    voices = split_voices(CorpusConfig("x", valid_voices=[]))
    assert voices["valid"] == voices["train"]


def test_effects_resample_level_noise_and_trim():
    rate = 16000
    tone = np.sin(2 * np.pi * 500 * np.arange(rate) / rate).astype(np.float32)
    for exact in (True, False):
        higher = effects.resample(tone, 1.1, 1.0, exact=exact)  # played 1.1x faster
        assert abs(len(higher) - rate / 1.1) <= rate * 0.002
        peak = np.argmax(np.abs(np.fft.rfft(higher[500:-500]))) * rate / len(higher[500:-500])
        assert abs(peak - 550.0) < 3.0
    assert len(effects.resample(tone, 16000, 8000)) == 8000
    loud = effects.set_loudness(tone * 0.01, -20.0)
    assert abs(effects.rms_dbfs(loud) - (-20.0)) < 0.01
    capped = effects.set_loudness(tone, 0.0)
    assert np.max(np.abs(capped)) <= 0.98 + 1e-6
    rng = np.random.default_rng(0)
    noisy = effects.add_noise(loud, 10.0, "pink", rng)
    assert abs(effects.rms_dbfs(noisy - loud) - (effects.rms_dbfs(loud) - 10.0)) < 0.01
    padded = np.concatenate([np.zeros(800, np.float32), tone, np.zeros(1600, np.float32)])
    assert abs(len(effects.trim_silence(padded)) - rate) <= 160


def tiny_config(folder, workers):
    return CorpusConfig(str(folder), num_train=6, num_valid=2, num_test=2, seed=11, num_sentences=40,
                        noise_prob=0.5, num_workers=workers, chunk_size=3)


@needs_engines
def test_tiny_build_writes_flac_and_manifests_byte_identically(tmp_path):
    summary = build_corpus(tiny_config(tmp_path / "one", workers=2), log=lambda message: None)
    assert summary["utterances"] == {"train": 6, "valid": 2, "test": 2}
    manifests = {split: json.loads((tmp_path / "one" / f"{split}.json").read_text())
                 for split in ("train", "valid", "test")}
    for split, manifest in manifests.items():
        for utt_id, entry in manifest.items():
            assert set(entry) == {"wav", "duration", "spk", "voice", "text"}
            assert entry["wav"].startswith(f"$data_root/{split}/{entry['voice']}/")
            assert entry["spk"] == speaker_of(entry["voice"])  # the person, not the warp
            path = entry["wav"].replace("$data_root", str(tmp_path / "one"))
            info = soundfile.info(path)
            assert info.samplerate == 16000 and info.channels == 1 and info.format == "FLAC"
            assert abs(info.frames / 16000 - entry["duration"]) < 1e-3 and entry["duration"] > 0.5
            assert normalize_text(entry["text"]) == entry["text"] and utt_id.startswith(entry["voice"])
    assert {e["voice"] for e in manifests["test"].values()} <= {"kal", "kal-lo", "kal-hi"}
    assert {e["spk"] for e in manifests["test"].values()} == {"kal"}
    train_texts = {e["text"] for e in manifests["train"].values()}
    assert not {e["text"] for e in manifests["test"].values()} & train_texts
    # Same seed, another folder, another number of workers: the same bytes.
    build_corpus(tiny_config(tmp_path / "two", workers=1), log=lambda message: None)
    assert folder_digest(tmp_path / "one") == folder_digest(tmp_path / "two")


@needs_engines
def test_existing_corpus_is_reused_and_other_content_refused(tmp_path):
    folder = tmp_path / "corpus"
    config = CorpusConfig(str(folder), num_train=2, num_valid=0, num_test=1, seed=2, num_sentences=20,
                          voices=["kal", "kal-lo", "ked"], test_voices=["kal-lo"], valid_voices=[],
                          num_workers=1)
    messages = []
    build_corpus(config, log=messages.append)
    before = folder_digest(folder)
    build_corpus(config, log=messages.append)
    assert "already built" in messages[-1] and folder_digest(folder) == before
    config.seed = 3
    with pytest.raises(DataError, match="other settings"):
        build_corpus(config, log=messages.append)
    build_corpus(config, overwrite=True, log=messages.append)
    assert folder_digest(folder) != before
    assert len(list((folder / "train").rglob("*.flac"))) == 2  # the old build's files were removed
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    with pytest.raises(DataError, match="not a corpus.*notes.txt"):
        build_corpus(CorpusConfig(str(stray), num_train=1, num_valid=0, num_test=1), log=messages.append)
    # An interrupted build (files but no corpus.json) is simply built again.
    (folder / "corpus.json").unlink()
    (folder / "train.json").write_text("{trunc")
    build_corpus(config, log=messages.append)
    assert json.loads((folder / "train.json").read_text()) and (folder / "corpus.json").exists()


@needs_engines
def test_mixtures_of_the_corpus_never_pair_two_warps_of_one_person(tmp_path, capsys):
    from speechkit.cli import main

    folder = tmp_path / "corpus"
    voices = ["kal", "kal-lo", "kal-hi", "ked"]  # three warps of one person, and another person
    config = CorpusConfig(str(folder), num_train=0, num_valid=0, num_test=6, seed=5, num_sentences=20,
                          voices=voices, test_voices=voices, valid_voices=[], num_workers=1)
    build_corpus(config, log=lambda message: None)
    assert main(["mixtures", str(folder / "test.json"), str(tmp_path / "mix"), "--num-mixtures", "12",
                 "--replace", f"data_root={folder}"]) == 0, capsys.readouterr()
    rows = json.loads((tmp_path / "mix" / "test.json").read_text())
    assert len(rows) == 12 and all({row["s1_spk"], row["s2_spk"]} == {"kal", "ked"} for row in rows.values())
    # A corpus built before the manifests named speakers (spk held the voice) is brought up to date on reuse.
    manifest = json.loads((folder / "test.json").read_text())
    (folder / "test.json").write_text(json.dumps({utt_id: {"wav": row["wav"], "duration": row["duration"],
                                                           "spk": row["voice"], "text": row["text"]}
                                                  for utt_id, row in manifest.items()}))
    build_corpus(config, log=lambda message: None)
    assert json.loads((folder / "test.json").read_text()) == manifest


def test_a_held_out_engine_speaks_only_its_own_test_split():
    base = {"num_train": 30, "num_valid": 6, "num_test": 6, "seed": 3, "num_sentences": 60}
    plain = make_plan(CorpusConfig("c", **base))
    for engine in ("festival", "espeak"):
        config = CorpusConfig("c", held_out_engine=engine, **base)
        voices = split_voices(config)
        plan = make_plan(config)
        engine_of = {p.voice: voice_by_name(p.voice).engine for p in plan}
        trained = {engine_of[p.voice] for p in plan if p.split in ("train", "valid")}
        assert engine not in trained and voices["test"] == ["kal", "kal-lo", "kal-hi"]
        unheard = [p for p in plan if p.split == "test_engine"]
        assert len(unheard) == 6 and {engine_of[p.voice] for p in unheard} == {engine}
        assert {p.text for p in unheard} <= {p.text for p in plan if p.split == "test"}  # same sentences
        assert not {p.text for p in unheard} & {p.text for p in plan if p.split == "train"}
    assert "held_out_engine" not in CorpusConfig("c", **base).content_settings()  # older corpora still match
    assert [p.id for p in plain] == [p.id for p in make_plan(CorpusConfig("c", held_out_engine=None, **base))]


def test_a_held_out_engine_that_leaves_a_split_without_voices_is_refused():
    with pytest.raises(DataError, match="held_out_engine must be one of"):
        split_voices(CorpusConfig("c", held_out_engine="sapi"))
    # The default test speaker (kal) is a flite voice: holding flite out leaves test without a voice.
    with pytest.raises(DataError, match="test split asks .* no voice without the held-out engine 'flite'"):
        split_voices(CorpusConfig("c", held_out_engine="flite"))
    assert split_voices(CorpusConfig("c", held_out_engine="flite", test_voices=["ked"], valid_voices=[]))
