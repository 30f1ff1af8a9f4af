"""eSpeak NG voices of the built-in corpus: synthesis, reproducibility across workers, and clear errors."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from speechkit.corpus import CorpusConfig, build_corpus, make_plan
from speechkit.corpus.voices import (
    ALL_VOICES,
    ESPEAK_VOICES,
    VOICES,
    Voice,
    check_engines,
    speaker_of,
    synthesize_many,
    voice_by_name,
)
from speechkit.errors import DataError
from tests.helpers.folders import folder_digest

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None,
                                  reason="espeak-ng not installed (apt-get install espeak-ng)")


def test_espeak_voices_are_named_by_accent_and_variant_and_stay_out_of_the_default_corpus():
    names = [v.name for v in ESPEAK_VOICES]
    assert len(names) == len(set(names)) == 44 and len({v.name for v in ALL_VOICES}) == len(ALL_VOICES)
    assert voice_by_name("espeak-sc-f2").engine_voice == "en-gb-scotland+f2"
    # One speaker per variant, heard in every accent.
    assert speaker_of("espeak-us-m7") == speaker_of("espeak-ca-m7") == "espeak-m7"
    assert speaker_of("espeak-us-m6") == "espeak-m6"
    assert speaker_of("kal-lower") == "kal" and speaker_of("not-a-corpus-voice") == "not-a-corpus-voice"
    assert not {v.engine for v in VOICES} & {"espeak"}
    plan = make_plan(CorpusConfig("unused", num_train=24, num_valid=6, num_test=6))
    assert {p.voice for p in plan} <= {v.name for v in VOICES}


def test_unknown_voice_and_missing_program_name_the_voice_and_the_package(monkeypatch, tmp_path):
    with pytest.raises(DataError, match="unknown corpus voice 'espeak-us-m9'"):
        voice_by_name("espeak-us-m9")
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no engine program is found
    with pytest.raises(DataError, match=r"espeak-us-m1, espeak-ca-f4 need the 'espeak' program.*"
                                        r"apt-get install espeak-ng"):
        check_engines([voice_by_name("espeak-us-m1"), voice_by_name("espeak-ca-f4")])


@needs_espeak
def test_espeak_speaks_16k_float_audio_at_the_planned_rate():
    voice = voice_by_name("espeak-us-m3")
    normal, slow = synthesize_many([("THE OLD MAN READS A BOOK", 1.0), ("THE OLD MAN READS A BOOK", 1.3)],
                                   voice)
    for wave in (normal, slow):
        assert wave.dtype == np.float32 and wave.ndim == 1 and np.isfinite(wave).all()
        assert 0.05 < float(np.abs(wave).max()) <= 1.0
    assert 0.8 < len(normal) / 16000 < 3.5  # six words at 175 words a minute, with some silence
    assert 1.15 < len(slow) / len(normal) < 1.45  # -s is 175 / stretch words per minute
    # Text is data: a sentence that looks like an option is spoken, not obeyed.
    (spoken,) = synthesize_many([("--VERSION -W NOWHERE", 1.0)], voice)
    assert len(spoken) > 8000
    broken = Voice("espeak-xx-m1", "espeak-m1", "espeak", "xx-nowhere+m1", 1.0, "m")
    with pytest.raises(DataError, match="espeak-ng failed for voice 'espeak-xx-m1'.*does not exist"):
        synthesize_many([("HELLO", 1.0)], broken)


@needs_espeak
def test_espeak_corpus_is_byte_identical_whatever_the_workers(tmp_path):
    def config(folder, workers, chunk):
        return CorpusConfig(str(tmp_path / folder), num_train=6, num_valid=0, num_test=2, seed=5,
                            num_sentences=16, voices=["espeak-us-m1", "espeak-sc-f2", "espeak-ca-m7"],
                            test_voices=["espeak-ca-m7"], valid_voices=[], num_workers=workers,
                            chunk_size=chunk)

    # One utterance per task on two workers against one worker speaking every voice's utterances in turn.
    summary = build_corpus(config("two", 2, 1), log=lambda message: None)
    assert summary["utterances"] == {"train": 6, "valid": 0, "test": 2}
    build_corpus(config("one", 1, 12), log=lambda message: None)
    assert folder_digest(tmp_path / "one") == folder_digest(tmp_path / "two")
    assert len(list((tmp_path / "one" / "train" / "espeak-sc-f2").glob("*.flac"))) == 3
