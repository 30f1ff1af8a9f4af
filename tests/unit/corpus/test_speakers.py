"""Speaker identities of the built-in corpus: warps and engines are identities, eSpeak accents are not; the
default split holds out whole persons."""
from __future__ import annotations

import shutil

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


@pytest.mark.skipif(shutil.which("flite") is None, reason="flite is not installed")
def test_command_line_writes_conversations_of_the_test_speakers(tmp_path, capsys):
    import json

    from speechkit.cli import main
    from speechkit.data.rttm import read_rttm

    folder = tmp_path / "corpus"
    arguments = ["corpus", str(folder), "--num-train", "1", "--num-valid", "0", "--num-test", "6", "--voices",
                 "kal,kal-lo,rms", "--test-voices", "kal,kal-lo", "--valid-voices", "",
                 "--num-sentences", "10", "--num-workers", "1", "--no-progress"]
    assert main(arguments + ["--conversations", "2", "--conversation-speakers", "2", "2"]) == 0
    manifest = json.loads((folder / "conversations" / "conversations.json").read_text())
    reference = read_rttm(str(folder / "conversations" / "all.rttm"))
    assert sorted(manifest) == sorted(reference) == ["conversation-0000", "conversation-0001"]
    assert all({s for _, _, s in turns} == {"kal", "kal-lo"} for turns in reference.values())
    # A folder holding a corpus is used as it is (its settings need not be repeated).
    assert main(["corpus", str(folder), "--conversations", "1", "--conversation-speakers", "2", "2",
                 "--no-progress"]) == 0
