"""Real recordings as one more corpus engine: found with their transcripts and speakers, put in the split of
their voice, written like synthetic utterances (16 kHz FLAC, no warp), and bad inputs named."""
from __future__ import annotations

import json
import shutil

import pytest
import soundfile

from speechkit.corpus import CorpusConfig, build_corpus, make_plan
from speechkit.corpus.generator import split_voices
from speechkit.corpus.recordings import load_recordings
from speechkit.errors import DataError
from tests.helpers.folders import folder_digest
from tests.unit.corpus.recording_files import speaker_folder, write_recording

needs_flite = pytest.mark.skipif(shutil.which("flite") is None, reason="flite not installed")
#: Only recordings: no synthetic utterance, so no speech engine is needed.
ONLY_RECORDED = dict(num_train=0, num_valid=0, num_test=0, test_voices=[], valid_voices=[], num_workers=1)


def test_a_folder_gives_speakers_from_sub_folders_and_normalized_transcripts(tmp_path):
    found = load_recordings(str(speaker_folder(tmp_path / "rec")))
    assert [(r.speaker, r.text) for r in found] == [("anna", "TURN ON THE LIGHT"), ("anna", "SEVEN FOUR"),
                                                    ("ben", "HELLO THERE"), ("ben", "GOOD NIGHT")]
    assert {r.voice for r in found} == {"recorded-anna", "recorded-ben"}


def test_a_manifest_gives_paths_relative_to_itself(tmp_path):
    write_recording(tmp_path / "audio" / "x.wav", None)
    rows = {"u1": {"wav": "audio/x.wav", "text": "zero one", "spk": "carl"},
            "u2": {"wav": "$data_root/audio/x2.wav", "text": "two", "spk": "dora"}}
    write_recording(tmp_path / "audio" / "x2.wav", None, seed=5)
    (tmp_path / "list.json").write_text(json.dumps(rows))
    found = load_recordings(str(tmp_path / "list.json"))
    audio = tmp_path / "audio"
    assert [(r.speaker, r.text, r.path) for r in found] == [("carl", "ZERO ONE", str(audio / "x.wav")),
                                                            ("dora", "TWO", str(audio / "x2.wav"))]


@pytest.mark.parametrize("make, message", [
    (lambda root: write_recording(root / "s" / "a.wav", None), r"a\.wav: no transcript .*a\.txt"),
    (lambda root: write_recording(root / "s" / "a.wav", "123 !"), r"a\.wav: empty transcript"),
    (lambda root: (root / "s").mkdir(parents=True), "no recording found"),
])
def test_bad_folders_are_named(tmp_path, make, message):
    make(tmp_path / "rec")
    with pytest.raises(DataError, match=message):
        load_recordings(str(tmp_path / "rec"))


@pytest.mark.parametrize("row, message", [
    ({"wav": "missing.wav", "text": "one", "spk": "a"}, "id 'u1': audio file not found"),
    ({"wav": "x.wav", "text": "one"}, "id 'u1': needs a speaker"),
    ({"wav": "x.wav", "spk": "a"}, r"id 'u1': needs 'wav' and 'text'"),
    ({"wav": "x.wav", "text": "one", "spk": "a/b"}, "id 'u1': speaker 'a/b'"),
])
def test_bad_manifest_rows_are_named(tmp_path, row, message):
    write_recording(tmp_path / "x.wav", None)
    (tmp_path / "list.json").write_text(json.dumps({"u1": row}))
    with pytest.raises(DataError, match=message):
        load_recordings(str(tmp_path / "list.json"))


def test_recorded_voices_take_the_split_they_are_named_in(tmp_path):
    source = str(speaker_folder(tmp_path / "rec"))
    base = dict(num_train=12, num_valid=2, num_test=2, seed=3, num_sentences=40, recordings=source)
    config = CorpusConfig("c", test_voices=["kal", "recorded-ben"], **base)
    plan = make_plan(config)
    recorded = {p.id: p for p in plan if p.source}
    assert {(p.voice, p.split) for p in recorded.values()} == {("recorded-anna", "train"),
                                                              ("recorded-ben", "test")}
    assert all(p.warp == 1.0 and p.stretch == 1.0 for p in recorded.values())
    # The synthetic utterances are those of a corpus without recordings: mixing real speech changes none.
    without = make_plan(CorpusConfig("c", test_voices=["kal"], **{**base, "recordings": None}))
    assert [p for p in plan if not p.source] == without
    assert not any(p.voice.startswith("recorded-") for p in without)
    held_out = split_voices(CorpusConfig("c", held_out_engine="recorded", **base),
                            ["recorded-anna", "recorded-ben"])
    assert held_out["test_engine"] == ["recorded-anna", "recorded-ben"]
    assert not any(v.startswith("recorded-") for s in ("train", "valid", "test") for v in held_out[s])
    with pytest.raises(DataError, match="'recorded-zoe' is no speaker of the recordings"):
        make_plan(CorpusConfig("c", test_voices=["kal", "recorded-zoe"], **base))
    with pytest.raises(DataError, match="held_out_engine 'recorded' needs recordings"):
        split_voices(CorpusConfig("c", held_out_engine="recorded"))


def test_a_corpus_of_recordings_is_written_at_16_khz_reused_and_rebuilt_when_they_change(tmp_path):
    source = speaker_folder(tmp_path / "rec")
    config = CorpusConfig(str(tmp_path / "corpus"), recordings=str(source), seed=1, **ONLY_RECORDED)
    summary = build_corpus(config, log=lambda message: None)
    assert summary["utterances"] == {"train": 4, "valid": 0, "test": 0}
    train = json.loads((tmp_path / "corpus" / "train.json").read_text())
    # spk is the voice too: a real speaker never shares a name with a synthetic one (mixtures keep them apart)
    assert {(row["spk"], row["voice"]) for row in train.values()} == {("recorded-anna", "recorded-anna"),
                                                                     ("recorded-ben", "recorded-ben")}
    for row in train.values():
        info = soundfile.info(row["wav"].replace("$data_root", str(tmp_path / "corpus")))
        assert info.samplerate == 16000 and info.channels == 1 and info.format == "FLAC"
        assert abs(info.frames / 16000 - row["duration"]) < 1e-3 and row["duration"] > 0.2
    assert sorted(row["text"] for row in train.values()) == ["GOOD NIGHT", "HELLO THERE", "SEVEN FOUR",
                                                            "TURN ON THE LIGHT"]
    before = folder_digest(tmp_path / "corpus")
    messages = []
    build_corpus(config, log=messages.append)
    assert "already built" in messages[-1] and folder_digest(tmp_path / "corpus") == before
    again = CorpusConfig(str(tmp_path / "again"), recordings=str(source), seed=1, **ONLY_RECORDED)
    build_corpus(again, log=lambda message: None)
    assert folder_digest(tmp_path / "again") == before  # same recordings and seed: the same bytes
    (source / "anna" / "a1.txt").write_text("turn off the light")
    with pytest.raises(DataError, match="other settings or recordings"):
        build_corpus(config, log=lambda message: None)


def test_an_unreadable_recording_is_named_and_no_corpus_is_left_complete(tmp_path):
    source = speaker_folder(tmp_path / "rec")
    (source / "anna" / "a2.wav").write_bytes(b"RIFF not audio")
    config = CorpusConfig(str(tmp_path / "corpus"), recordings=str(source), **ONLY_RECORDED)
    with pytest.raises(DataError, match=r"a2\.wav: unreadable audio"):
        build_corpus(config, log=lambda message: None)
    assert not (tmp_path / "corpus" / "corpus.json").exists()
