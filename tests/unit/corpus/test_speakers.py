"""Speaker identities of the built-in corpus: warps and engines are identities, eSpeak accents are not; the
default split holds out whole persons."""
from __future__ import annotations

import pytest

from speechkit.corpus.generator import CorpusConfig, split_voices
from speechkit.corpus.speakers import check_disjoint, identity_of, speaker_rows, speaker_split
from speechkit.corpus.voices import speaker_of
from speechkit.errors import DataError


def test_identities():
    assert identity_of("rms-lo") != identity_of("rms-hi") != identity_of("rms")
    assert identity_of("espeak-us-f2") == identity_of("espeak-ca-f2") == "espeak-f2"
    assert identity_of("someone") == "someone"


def test_default_split_holds_out_whole_persons():
    split = speaker_split()
    voices = split_voices(CorpusConfig("x", voices=split["voices"], test_voices=split["test_voices"],
                                       valid_voices=split["valid_voices"]))
    persons = {name: {speaker_of(v) for v in names} for name, names in voices.items()}
    assert not persons["train"] & persons["test"] and not persons["train"] & persons["valid"]
    assert not persons["valid"] & persons["test"]
    identities = {name: {identity_of(v) for v in names} for name, names in voices.items()}
    assert len(identities["train"]) == 26 and len(identities["test"]) == 8
    assert {v.split("-")[0] for v in voices["test"]} == {"kal", "espeak"}  # two engines: cross-engine trials
    with pytest.raises(DataError, match="unknown corpus speaker"):
        speaker_split(test_speakers=["nobody"])
    with pytest.raises(DataError, match="both test and valid"):
        speaker_split(test_speakers=["kal"], valid_speakers=["kal"])


def test_speaker_rows_and_disjoint_check():
    rows = speaker_rows({"a": {"wav": "a.flac", "voice": "kal-lo"},
                         "b": {"wav": "b.flac", "spk": "espeak-us-m2"}})
    assert rows["a"]["spk"] == "kal-lo" and rows["a"]["person"] == "kal" and rows["a"]["engine"] == "flite"
    assert rows["b"]["spk"] == "espeak-m2" and rows["b"]["engine"] == "espeak"
    train = speaker_rows({"c": {"voice": "kal"}})
    with pytest.raises(DataError, match="share speakers \\['kal'\\]"):
        check_disjoint({"train": train, "test": rows})
    with pytest.raises(DataError, match="'x' has none of voice, spk, speaker"):
        speaker_rows({"x": {"wav": "x.flac"}})
    imported = speaker_rows({"v": {"wav": "v.wav", "speaker": "id10001"}})  # speechkit data import voxceleb
    assert imported["v"]["spk"] == imported["v"]["person"] == "id10001"
