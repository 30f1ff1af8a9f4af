"""Manifests: JSON/JSONL/CSV loading, placeholders, every kind of bad row, building and splitting."""
from __future__ import annotations

import json
import os

import pytest
import torch

from speechkit.data import audio
from speechkit.data.dataset import DynamicItemDataset
from speechkit.data.manifest import (
    build_manifest,
    find_audio_files,
    load_csv_manifest,
    load_json_manifest,
    load_manifest,
    split_manifest,
    substitute,
    write_csv_manifest,
    write_json_manifest,
)
from speechkit.errors import AudioError, ManifestError


@pytest.fixture
def corpus(tmp_path):
    """Two tiny FLAC files under tmp_path/corpus."""
    root = tmp_path / "corpus"
    for name, samples in [("a", 1600), ("b", 800)]:
        audio.write(root / f"{name}.flac", torch.zeros(samples), 16000)
    return root


def write_json(path, data):
    path.write_text(json.dumps(data, indent=1))
    return path


def test_json_manifest_with_placeholders(tmp_path, corpus):
    path = write_json(tmp_path / "m.json", {
        "a": {"wav": "$data_root/a.flac", "duration": 0.1, "words": "COST $5"},
        "b": {"wav": "${data_root}/b.flac", "duration": 0.05, "words": "HI"},
    })
    data = load_json_manifest(path, replacements={"data_root": str(corpus)})
    assert list(data) == ["a", "b"]
    assert data["a"]["wav"] == f"{corpus}/a.flac" and data["b"]["wav"] == f"{corpus}/b.flac"
    assert data["a"]["words"] == "COST $5"  # text without a matching placeholder is left alone
    dataset = DynamicItemDataset.from_json(path, replacements={"data_root": str(corpus)})
    assert dataset.data_ids == ["a", "b"] and dataset.lengths() == [0.1, 0.05]


def test_csv_manifest_types_and_placeholders(tmp_path, corpus):
    path = tmp_path / "m.csv"
    path.write_text("ID,duration,wav,spk,start\n"
                    "a,0.1,$data_root/a.flac,s1,0\n"
                    "\n"
                    "b,0.05,$data_root/b.flac,s2,160\n")
    data = load_csv_manifest(path, replacements={"data_root": str(corpus)}, types={"spk": str})
    assert data == {"a": {"duration": 0.1, "wav": f"{corpus}/a.flac", "spk": "s1", "start": 0},
                    "b": {"duration": 0.05, "wav": f"{corpus}/b.flac", "spk": "s2", "start": 160}}
    dataset = DynamicItemDataset.from_csv(path, replacements={"data_root": str(corpus)})
    assert dataset[1]["id"] == "b" and dataset.lengths() == [0.1, 0.05]


def test_jsonl_and_writers_round_trip(tmp_path, corpus):
    rows = {"a": {"wav": f"{corpus}/a.flac", "duration": 0.1},
            "b": {"wav": f"{corpus}/b.flac", "duration": 0.05}}
    lines = tmp_path / "m.jsonl"
    lines.write_text("\n".join(json.dumps({"id": k, **v}) for k, v in rows.items()) + "\n")
    assert load_manifest(lines) == rows
    write_json_manifest(rows, tmp_path / "out" / "m.json")
    assert load_manifest(tmp_path / "out" / "m.json") == rows
    write_csv_manifest(rows, tmp_path / "m2.csv")
    assert load_manifest(tmp_path / "m2.csv") == rows
    for name in ("m.jsonl", "m2.csv", "out/m.json"):
        dataset = DynamicItemDataset.from_manifest(tmp_path / name, output_keys=["id", "duration"])
        assert [dataset[i] for i in range(2)] == [{"id": "a", "duration": 0.1}, {"id": "b", "duration": 0.05}]


def test_csv_with_byte_order_mark_and_quoted_newline(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text('\ufeffid,text\na,"two\nlines"\nb,plain\n', encoding="utf-8")
    assert load_csv_manifest(path) == {"a": {"text": "two\nlines"}, "b": {"text": "plain"}}
    with pytest.raises(ManifestError, match=r"line 4: expected 2 fields"):
        path.write_text('id,text\na,"two\nlines"\nb\n')
        load_csv_manifest(path)


def test_text_only_manifest_needs_no_duration(tmp_path):
    path = write_json(tmp_path / "lm.json", {"s1": {"text": "HELLO"}, "s2": {"text": "WORLD"}})
    assert load_json_manifest(path)["s2"] == {"text": "WORLD"}


@pytest.mark.parametrize("rows, message", [
    ({"a": {"wav": "MISSING.flac", "duration": 1.0}}, r"id 'a'.*missing file .*MISSING\.flac"),
    ({"a": {"wav": "{ok}", "duration": 1.0}, "b": {"wav": "{ok}"}}, r"id 'b'.*missing field 'duration'"),
    ({"a": {"wav": "{ok}", "duration": 1.0}, "b": {"wav": "{ok}", "duration": 1.0, "durtion": 2}},
     r"id 'b'.*unknown field 'durtion'"),
    ({"a": {"wav": "{ok}", "duration": 1.0, "spk": "x"}, "b": {"wav": "{ok}", "duration": 1.0}},
     r"id 'b'.*missing field 'spk'"),
    ({"a": {"wav": "{ok}", "duration": "long"}}, r"id 'a'.*'duration' must be a number.*'long'"),
    ({"a": {"wav": "{ok}", "duration": -1.0}}, r"id 'a'.*'duration' must be a finite number >= 0"),
    ({"a": {"wav": "{ok}", "duration": True}}, r"id 'a'.*'duration' must be a number"),
    ({"a": {"wav": 12, "duration": 1.0}}, r"id 'a'.*'wav' must be a path"),
    ({"a": ["not", "an", "object"]}, r"id 'a'.*must be an object"),
    ({"a": {"wav": "$data_root/a.flac", "duration": 1.0}}, r"id 'a'.*placeholder \$data_root with no value"),
])
def test_bad_json_rows_name_the_id(tmp_path, corpus, rows, message):
    text = json.dumps(rows).replace("{ok}", f"{corpus}/a.flac")
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ManifestError, match=message):
        load_json_manifest(path)
    with pytest.raises(ManifestError, match=r"bad\.json"):
        DynamicItemDataset.from_json(path)


def test_unknown_field_against_declared_fields_and_types(tmp_path):
    path = write_json(tmp_path / "m.json", {"a": {"text": "x", "spk": 3}, "b": {"text": "y", "gender": "f"}})
    with pytest.raises(ManifestError, match=r"id 'a'.*unknown field 'spk'"):
        load_json_manifest(path, fields=["text"])
    with pytest.raises(ManifestError, match=r"id 'a'.*'spk' must be str"):
        load_json_manifest(path, fields=["text", "spk", "gender"], types={"spk": str})
    data = load_json_manifest(path, fields=["text", "spk", "gender"], types={"spk": int})  # optional fields
    assert data["b"] == {"text": "y", "gender": "f"}


def test_duplicate_ids_and_malformed_json_name_the_line(tmp_path):
    duplicate = tmp_path / "dup.json"
    duplicate.write_text('{\n "a": {"text": "x"},\n "b": {"text": "y"},\n "a": {"text": "z"}\n}\n')
    with pytest.raises(ManifestError, match=r"dup\.json, line 4: duplicate key 'a'"):
        load_json_manifest(duplicate)
    broken = tmp_path / "broken.json"
    broken.write_text('{\n "a": {"text": "x"},\n "b": {"text": "y"\n}\n')
    with pytest.raises(ManifestError, match=r"broken\.json, line \d+, column \d+: malformed JSON"):
        load_json_manifest(broken)
    with pytest.raises(ManifestError, match="got list"):
        load_json_manifest(write_json(tmp_path / "list.json", [1, 2]))
    lines = tmp_path / "m.jsonl"
    lines.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n')
    with pytest.raises(ManifestError, match=r"line 2: duplicate id 'a' \(first on line 1\)"):
        load_manifest(lines)
    lines.write_text('{"id": "a", "text": "x"}\n{"id": "b", "text": \n')
    with pytest.raises(ManifestError, match=r"m\.jsonl, line 2: malformed JSON"):
        load_manifest(lines)
    lines.write_text('{"text": "x"}\n')
    with pytest.raises(ManifestError, match=r"line 1: .*'id'"):
        load_manifest(lines)
    with pytest.raises(ManifestError, match=r"manifest not found: .*nowhere\.json"):
        load_manifest(tmp_path / "nowhere.json")


def test_bad_csv_lines_name_the_line(tmp_path, corpus):
    def load(text, **options):
        path = tmp_path / "bad.csv"
        path.write_text(text)
        return load_csv_manifest(path, **options)

    ok = f"{corpus}/a.flac"
    with pytest.raises(ManifestError, match=r"bad\.csv, line 3: duplicate id 'a' \(first on line 2\)"):
        load(f"id,wav,duration\na,{ok},1.0\na,{ok},2.0\n")
    with pytest.raises(ManifestError, match=r"line 3: expected 3 fields .* got 4"):
        load(f"id,wav,duration\na,{ok},1.0\nb,{ok},2.0,extra\n")
    with pytest.raises(ManifestError, match=r"line 2 \(id 'a'\).*'duration' must be a number.*'1,5'"):
        load(f'id,wav,duration\na,{ok},"1,5"\n')
    with pytest.raises(ManifestError, match=r"line 2 \(id 'a'\).*missing field 'duration'"):
        load(f"id,wav\na,{ok}\n")
    with pytest.raises(ManifestError, match=r"line 2 \(id 'a'\).*missing file .*gone\.wav"):
        load("id,wav,duration\na,gone.wav,1.0\n")
    with pytest.raises(ManifestError, match=r"line 1: the header needs an 'id'"):
        load(f"wav,duration\n{ok},1.0\n")
    with pytest.raises(ManifestError, match=r"line 2 \(id 'a'\).*unknown field 'spk'"):
        load(f"id,wav,duration,spk\na,{ok},1.0,s1\n", fields=["wav", "duration"])
    with pytest.raises(ManifestError, match=r"line 2 \(id 'a'\).*'age' must be int.*'old'"):
        load("id,text,age\na,hi,old\n", types={"age": int})
    with pytest.raises(ManifestError, match=r"line 2: empty id"):
        load("id,text\n,hi\n")
    with pytest.raises(ManifestError, match="empty CSV"):
        load("")
    assert load("id,wav,duration\na,gone.wav,1.0\n", check_files=False)["a"]["duration"] == 1.0


def test_substitute_handles_nested_values():
    value = {"file": "$root/a.wav", "parts": ["${root}/b", 3], "price": "$5"}
    expected = {"file": "/data/a.wav", "parts": ["/data/b", 3], "price": "$5"}
    assert substitute(value, {"root": "/data"}) == expected


def make_tree(root, count, rate=16000):
    for index in range(count):
        speaker = f"spk{index % 3}"
        audio.write(root / speaker / f"{speaker}-utt{index:03d}.flac", torch.zeros(160 * (index + 1)), rate)
    (root / "notes.txt").write_text("not audio")


def test_build_manifest_reads_durations_and_uses_placeholders(tmp_path):
    root = tmp_path / "tree"
    make_tree(root, 5)
    assert find_audio_files(root, "flac")[0] == os.path.join("spk0", "spk0-utt000.flac")
    data = build_manifest(root, ext="flac")
    assert sorted(data) == sorted(f"spk{i % 3}-utt{i:03d}" for i in range(5))
    assert data["spk1-utt004"]["duration"] == pytest.approx(0.05)
    assert data["spk1-utt004"]["wav"] == str(root / "spk1" / "spk1-utt004.flac")
    portable = build_manifest(root, ext=".flac", placeholder="data_root")
    assert portable["spk0-utt000"]["wav"] == "$data_root/spk0/spk0-utt000.flac"
    write_json_manifest(portable, tmp_path / "m.json")
    loaded = load_json_manifest(tmp_path / "m.json", replacements={"data_root": str(root)})
    assert loaded["spk0-utt000"]["wav"] == str(root / "spk0" / "spk0-utt000.flac")


def test_build_manifest_with_worker_processes_matches_single_process(tmp_path, monkeypatch):
    from speechkit.data import manifest

    monkeypatch.setattr(manifest, "PARALLEL_MIN_FILES", 10)  # use the worker pool on a small tree
    root = tmp_path / "tree"
    make_tree(root, 70)
    calls = []
    parallel = build_manifest(root, num_workers=2, progress=lambda done, total: calls.append((done, total)))
    assert parallel == build_manifest(root, num_workers=1)
    assert len(parallel) == 70 and calls[-1] == (70, 70)


def test_build_manifest_errors(tmp_path):
    root = tmp_path / "tree"
    make_tree(root, 2)
    (root / "spk0" / "broken.flac").write_bytes(b"fLaC nonsense")
    with pytest.raises(AudioError, match=r"broken\.flac"):
        build_manifest(root)
    assert "broken" not in build_manifest(root, skip_unreadable=True)
    audio.write(root / "other" / "spk0-utt000.flac", torch.zeros(10), 16000)
    with pytest.raises(ManifestError, match="two files give the id 'spk0-utt000'"):
        build_manifest(root, skip_unreadable=True)
    with pytest.raises(ManifestError, match="not a directory"):
        build_manifest(tmp_path / "nowhere")


def test_split_is_seeded_disjoint_and_keeps_groups_together():
    data = {f"spk{i % 10}-utt{i:03d}": {"duration": 1.0} for i in range(200)}
    train, valid = split_manifest(data, valid_percent=0.05, seed=1)
    assert len(valid) == 10 and len(train) == 190
    assert not set(train) & set(valid) and set(train) | set(valid) == set(data)
    assert split_manifest(data, 0.05, seed=1) == (train, valid)
    assert split_manifest(data, 0.05, seed=2)[1] != valid
    train, valid = split_manifest(data, 0.25, seed=0, group_of=lambda data_id: data_id.split("-")[0])
    assert {k.split("-")[0] for k in train}.isdisjoint({k.split("-")[0] for k in valid})
    assert len(valid) >= 50
    assert split_manifest(data, 0.0)[1] == {}
    with pytest.raises(ManifestError, match="fraction"):
        split_manifest(data, 5)


@pytest.mark.parametrize("rows, line", [
    ('a,{ok},"hello\nb,{ok},world\n', 2),  # the quote runs to the end of the file
    ('z,{ok},fine\na,{ok},"hello\nb,{ok},"world"\nc,{ok},x\n', 3),  # closed inside a later row
])
def test_unterminated_quote_names_the_line_instead_of_swallowing_rows(rows, line, tmp_path, corpus):
    path = tmp_path / "m.csv"
    path.write_text("id,wav,text\n" + rows.format(ok=f"{corpus}/a.flac"))
    with pytest.raises(ManifestError, match=rf"m\.csv, line {line}: malformed CSV record .* is a quote "
                                            rf"opened on line {line} never closed\?"):
        load_csv_manifest(path, require_duration=False)


def test_quoted_quotes_and_newlines_still_load(tmp_path, corpus):
    path = tmp_path / "m.csv"
    path.write_text(f'id,wav,text\na,{corpus}/a.flac,"say ""hi""\nthere"\nb,{corpus}/a.flac,plain\n')
    assert load_csv_manifest(path, require_duration=False)["a"]["text"] == 'say "hi"\nthere'
