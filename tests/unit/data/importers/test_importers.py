"""speechkit data import: a miniature of each real layout imported (names, rates, channels, quirks kept), and
the hostile inputs refused naming the file, line or id."""
from __future__ import annotations

import json
import os

import pytest

from speechkit.data.importers import import_corpus
from speechkit.data.importers.base import Utterance, split_by_speaker
from speechkit.data.manifest import load_manifest
from speechkit.errors import ManifestError
from tests.unit.data.importers import layouts


def manifests(dest) -> dict:
    return {split: load_manifest(dest / f"{split}.json") for split in ("train", "valid", "test")}


def test_commonvoice_keeps_rate_channels_text_and_speakers(tmp_path):
    source = layouts.commonvoice(tmp_path / "cv")
    import_corpus("commonvoice", str(source), str(tmp_path / "out"), log=lambda _: None)
    data = manifests(tmp_path / "out")
    assert [len(data[s]) for s in ("train", "valid", "test")] == [4, 1, 1]
    row = data["train"]["common_voice_en_19000001"]
    assert (row["sample_rate"], row["channels"]) == (48000, 2)
    assert row["text"] == 'She called it "the bottle".'  # quotes kept: Common Voice TSVs are not quoted
    assert row["speaker"] == "b7c2" * 16
    assert os.path.isabs(row["wav"]) and row["wav"].endswith("clips/common_voice_en_19000001.mp3")
    assert abs(row["duration"] - 0.9) < 0.06  # MP3 frames pad a little
    assert not (tmp_path / "out" / "split.json").exists()


def test_commonvoice_without_splits_is_split_by_speaker_and_reported(tmp_path, capsys):
    source = layouts.commonvoice(tmp_path / "cv", splits=False)
    import_corpus("commonvoice", str(source), str(tmp_path / "out"), seed=3)
    report = json.loads((tmp_path / "out" / "split.json").read_text())
    assert report["seed"] == 3 and report["by"] == "speaker"
    data = manifests(tmp_path / "out")
    speakers = {s: {row["speaker"] for row in rows.values()} for s, rows in data.items()}
    assert not speakers["train"] & speakers["test"] and not speakers["train"] & speakers["valid"]
    assert {s: sorted(v) for s, v in speakers.items()} == report["speakers"]
    assert "split by speaker with seed 3" in capsys.readouterr().out


def test_librispeech_maps_split_folders_to_template_names(tmp_path):
    source = layouts.librispeech(tmp_path / "LibriSpeech")
    import_corpus("librispeech", str(source), str(tmp_path / "out"), log=lambda _: None)
    data = manifests(tmp_path / "out")
    assert sorted(data["train"]) == ["103-1240-0000", "103-1240-0001", "1034-1240-0000", "1034-1240-0001"]
    assert {r["speaker"] for r in data["valid"].values()} == {"1272"}
    assert data["test"]["1089-1240-0001"]["text"] == "CHAPTER 1 OF THE BOOK"
    assert data["test"]["1089-1240-0001"]["sample_rate"] == 16000


def test_folder_with_44k_stereo_and_punctuation(tmp_path):
    source = layouts.folder(tmp_path / "rec")
    import_corpus("folder", str(source), str(tmp_path / "out"), log=lambda _: None)
    rows = {i: r for split in manifests(tmp_path / "out").values() for i, r in split.items()}
    assert rows["bob-take1"]["channels"] == 2 and rows["bob-take1"]["sample_rate"] == 44100
    assert rows["alice-take0"]["text"] == "Hello, Alice take 0." and rows["alice-take0"]["speaker"] == "alice"


@pytest.mark.parametrize("kind", ["csv", "tsv", "jsonl"])
def test_tables_with_configured_columns(tmp_path, kind):
    table = layouts.table(tmp_path / "meta", kind)
    import_corpus("csv", str(table), str(tmp_path / "out"), path_column="file", text_column="transcription",
                  speaker_column="reader", log=lambda _: None)
    rows = {i: r for split in manifests(tmp_path / "out").values() for i, r in split.items()}
    assert sorted(rows) == [f"clip{n}" for n in range(6)]
    assert rows["clip2"]["text"] == 'Line 2, said "clearly"' and rows["clip2"]["speaker"] == "reader2"
    assert rows["clip2"]["sample_rate"] == 22050


def test_kaldi_segments_become_segments_of_their_recording(tmp_path):
    data_dir = layouts.kaldi(tmp_path / "s5")
    import_corpus("kaldi", str(data_dir), str(tmp_path / "out"), audio_root=str(tmp_path / "s5"),
                  log=lambda _: None)
    rows = {i: r for split in manifests(tmp_path / "out").values() for i, r in split.items()}
    segment = rows["spk1-rec1-0001"]
    assert segment["wav"]["start"] == 1.2 and segment["wav"]["stop"] == 2.9
    assert segment["duration"] == pytest.approx(1.7) and segment["speaker"] == "spk1"
    assert rows["spk2-rec2-0000"]["sample_rate"] == 8000


def test_kaldi_without_segments(tmp_path):
    data_dir = layouts.kaldi(tmp_path / "s5", segments=False)
    import_corpus("kaldi", str(data_dir), str(tmp_path / "out"), audio_root=str(tmp_path / "s5"),
                  log=lambda _: None)
    rows = {i: r for split in manifests(tmp_path / "out").values() for i, r in split.items()}
    assert rows["rec1"]["duration"] == pytest.approx(3.0)


def test_voxceleb_speakers_without_text(tmp_path):
    source = layouts.voxceleb(tmp_path / "vox1")
    import_corpus("voxceleb", str(source), str(tmp_path / "out"), log=lambda _: None)
    data = manifests(tmp_path / "out")
    rows = {i: r for split in data.values() for i, r in split.items()}
    assert "id10001-1zcIwhmdeo4-00001" in rows and "text" not in rows["id10001-1zcIwhmdeo4-00001"]
    assert rows["id10001-1zcIwhmdeo4-00001"]["speaker"] == "id10001"
    by_split = [{r["speaker"] for r in data[s].values()} for s in ("train", "valid", "test")]
    assert all(by_split) and not by_split[0] & by_split[2]


def test_librimix_rows_in_the_separation_format(tmp_path):
    source = layouts.librimix(tmp_path / "Libri2Mix" / "wav8k" / "min")
    import_corpus("librimix", str(source), str(tmp_path / "out"), log=lambda _: None)
    data = manifests(tmp_path / "out")
    row = data["train"]["103-1240-0003_1235-135887-0017"]
    assert {"mix_wav", "s1_wav", "s2_wav", "noise_wav"} <= set(row) and row["speaker"] == "103+1235"
    assert row["mix_wav"].endswith("train-100/mix_clean/103-1240-0003_1235-135887-0017.wav")
    assert [len(data[s]) for s in ("train", "valid", "test")] == [3, 1, 1]


def test_split_by_speaker_is_seeded_and_disjoint():
    rows = [Utterance(f"u{n}", "x", speaker=f"s{n % 7}") for n in range(70)]
    first = split_by_speaker(rows, 0.2, 0.2, seed=5)
    again = split_by_speaker([Utterance(u.id, "x", speaker=u.speaker) for u in rows], 0.2, 0.2, seed=5)
    assert first == again
    assert not set(first["train"]) & set(first["test"]) and first["valid"] and first["test"]
    with pytest.raises(ManifestError, match="nothing to train"):
        split_by_speaker(rows, 0.5, 0.5, seed=0)


# -- hostile and careless inputs ----------------------------------------------------------------------------


def test_commonvoice_missing_column_and_short_row_name_file_and_line(tmp_path):
    source = layouts.commonvoice(tmp_path / "cv")
    (source / "dev.tsv").write_text("client_id\tpath\n")
    with pytest.raises(ManifestError, match=r"dev.tsv, line 1: no column 'sentence'"):
        import_corpus("commonvoice", str(source), str(tmp_path / "out"))
    layouts.commonvoice(source)
    with open(source / "train.tsv", "a") as handle:
        handle.write("abc\tcommon_voice_en_1.mp3\tshort row\n")
    with pytest.raises(ManifestError, match=r"train.tsv, line 6: expected 10 tab-separated fields, got 3"):
        import_corpus("commonvoice", str(source), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()  # nothing written before every row is read


def test_missing_audio_names_the_id_and_path(tmp_path):
    source = layouts.commonvoice(tmp_path / "cv")
    (source / "clips" / "common_voice_en_19000005.mp3").unlink()
    with pytest.raises(ManifestError, match=r"test.tsv, line 2: id 'common_voice_en_19000005': audio file "
                                            r"not found: .*common_voice_en_19000005.mp3"):
        import_corpus("commonvoice", str(source), str(tmp_path / "out"))


@pytest.mark.parametrize("bad_path", ["../outside.wav", "/etc/hostname", "audio/../../outside.wav"])
def test_paths_escaping_the_source_are_refused(tmp_path, bad_path):
    layouts.tone(tmp_path / "outside.wav", 0.5, 16000)
    table = layouts.table(tmp_path / "meta", "csv")
    with open(table, "a") as handle:
        handle.write(f"{bad_path},text,reader0\n")
    with pytest.raises(ManifestError,
                       match=rf"metadata.csv, line 8: audio path '{bad_path}' leaves the source"):
        import_corpus("csv", str(table), str(tmp_path / "out"), path_column="file")


def test_fifos_are_skipped_with_a_warning(tmp_path, capsys):
    source = layouts.folder(tmp_path / "rec")
    layouts.make_fifo(source / "alice" / "stuck.wav")
    (source / "alice" / "stuck.txt").write_text("never read")
    import_corpus("folder", str(source), str(tmp_path / "out"), log=lambda _: None)
    assert "stuck.wav is not a regular file" in capsys.readouterr().err
    rows = {i for split in manifests(tmp_path / "out").values() for i in split}
    assert "alice-stuck" not in rows and len(rows) == 8


def test_fifo_named_in_a_table_is_skipped(tmp_path, capsys):
    table = layouts.table(tmp_path / "meta", "csv")
    layouts.make_fifo(tmp_path / "meta" / "audio" / "pipe.wav")
    with open(table, "a") as handle:
        handle.write("audio/pipe.wav,text,reader0\n")
    import_corpus("csv", str(table), str(tmp_path / "out"), path_column="file", log=lambda _: None)
    assert "id 'pipe':" in capsys.readouterr().err


def test_kaldi_piped_command_is_refused(tmp_path):
    data_dir = layouts.kaldi(tmp_path / "s5", segments=False)
    (data_dir / "wav.scp").write_text("rec1 wav/rec1.wav\nrec2 sph2pipe -f wav wav/rec2.sph |\n")
    with pytest.raises(ManifestError, match=r"wav.scp, line 2: recording 'rec2' is a piped command"):
        import_corpus("kaldi", str(data_dir), str(tmp_path / "out"), audio_root=str(tmp_path / "s5"))


def test_kaldi_bad_segments(tmp_path):
    data_dir = layouts.kaldi(tmp_path / "s5")
    (data_dir / "segments").write_text("spk1-rec1-0000 rec1 0.00 1.20\nspk1-rec1-0001 rec1 1.20 9.90\n"
                                       "spk2-rec2-0000 rec2 0.10 1.90\n")
    with pytest.raises(ManifestError, match=r"'spk1-rec1-0001': segment 1.2-9.9 s ends after the end"):
        import_corpus("kaldi", str(data_dir), str(tmp_path / "out"), audio_root=str(tmp_path / "s5"))
    (data_dir / "segments").write_text("spk1-rec1-0000 rec1 abc 1.20\n")
    with pytest.raises(ManifestError, match=r"segments, line 1: start and end must be seconds"):
        import_corpus("kaldi", str(data_dir), str(tmp_path / "out"), audio_root=str(tmp_path / "s5"))
    (data_dir / "segments").write_text("spk1-rec1-0000 rec9 0 1.20\n")
    with pytest.raises(ManifestError, match=r"segments, line 1: recording 'rec9' .* is not in"):
        import_corpus("kaldi", str(data_dir), str(tmp_path / "out"), audio_root=str(tmp_path / "s5"))


def test_folder_audio_without_transcript(tmp_path):
    source = layouts.folder(tmp_path / "rec")
    (source / "carol" / "take1.txt").unlink()
    with pytest.raises(ManifestError, match=r"take1.flac: no transcript take1.txt .*id 'carol-take1'"):
        import_corpus("folder", str(source), str(tmp_path / "out"))
    import_corpus("folder", str(source), str(tmp_path / "out"), allow_missing_text=True, log=lambda _: None)


def test_librispeech_transcript_line_without_audio(tmp_path):
    source = layouts.librispeech(tmp_path / "LibriSpeech")
    (source / "dev-clean" / "1272" / "1240" / "1272-1240-0001.flac").unlink()
    with pytest.raises(ManifestError, match=r"1272-1240.trans.txt, line 2: id '1272-1240-0001' has no audio"):
        import_corpus("librispeech", str(source), str(tmp_path / "out"))


def test_unreadable_audio_and_unknown_layout(tmp_path):
    source = layouts.folder(tmp_path / "rec")
    (source / "dave" / "take0.wav").write_bytes(b"not audio at all")
    with pytest.raises(ManifestError, match=r"id 'dave-take0': cannot read audio file .*take0.wav"):
        import_corpus("folder", str(source), str(tmp_path / "out"))
    with pytest.raises(ManifestError, match="unknown layout 'timit'"):
        import_corpus("timit", str(source), str(tmp_path / "out"))
