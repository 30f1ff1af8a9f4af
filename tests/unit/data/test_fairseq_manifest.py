"""fairseq TSV manifests: the exact layout written, reading with .wrd/.ltr labels, and every bad line."""
from __future__ import annotations

import pytest
import torch

from speechkit.data import audio
from speechkit.data.dataset import DynamicItemDataset
from speechkit.data.fairseq_manifest import (
    is_fairseq_manifest,
    load_fairseq_manifest,
    write_fairseq_manifest,
    write_labels,
)
from speechkit.data.manifest import load_manifest
from speechkit.errors import ManifestError
from tests.unit.data import fairseq_tree

tree = fairseq_tree.tree  # a shared fixture: pytest finds it under this name


def test_reading_with_labels_through_load_manifest_and_dataset(tree, tmp_path):
    root, sizes = tree
    manifest = tmp_path / "train.tsv"
    write_fairseq_manifest(root, sizes.items(), manifest)
    (tmp_path / "train.wrd").write_text("HELLO WORLD\nA\nGOOD DAY\n")
    (tmp_path / "train.ltr").write_text("H E L L O | W O R L D |\nA |\nG O O D | D A Y |\n")
    assert is_fairseq_manifest(manifest)
    rows = load_manifest(manifest)
    assert list(rows) == ["u1", "u2", "u3"]
    assert rows["u2"] == {"wav": str(root / "s1/u2.flac"), "num_samples": 3203, "duration": 3203 / 16000,
                          "wrd": "A", "ltr": "A |"}
    dataset = DynamicItemDataset.from_manifest(str(manifest))
    dataset.set_output_keys(["id", "wrd", "num_samples"])
    assert dataset[2] == {"id": "u3", "wrd": "GOOD DAY", "num_samples": 800}
    only_words = load_fairseq_manifest(manifest, labels=["wrd"], sample_rate=8000)
    assert "ltr" not in only_words["u1"] and only_words["u1"]["duration"] == 0.2


def test_write_labels_matches_the_letter_format(tmp_path):
    rows = {"a": {"text": "HELLO  WORLD"}, "b": {"text": "IT'S"}}
    write_fairseq_manifest("/data", [("a.flac", 10), ("b.flac", 10)], tmp_path / "dev.tsv")
    wrd, ltr = write_labels(rows, tmp_path / "dev.tsv")
    assert open(wrd).read() == "HELLO WORLD\nIT'S\n"
    assert open(ltr).read() == "H E L L O | W O R L D |\nI T ' S |\n"
    write_fairseq_manifest("/data", [("b.flac", 10)], tmp_path / "x.tsv")
    with pytest.raises(ManifestError, match="'b' has no 'text'"):
        write_labels({"b": {}}, tmp_path / "x.tsv")


def test_ids_must_be_unique(tmp_path):
    root = tmp_path / "c"
    for name in ("x.flac", "x.wav", "good0.wav"):
        audio.write(root / name, torch.zeros(160), 16000)
    (tmp_path / "two.tsv").write_text(f"{root}\nx.flac\t160\ngood0.wav\t160\nx.wav\t160\n")
    with pytest.raises(ManifestError, match=r"two.tsv, lines 2 and 4: 'x.flac' and 'x.wav' both give the id "
                                            r"'x'"):
        load_fairseq_manifest(tmp_path / "two.tsv")
    (tmp_path / "same.tsv").write_text(f"{root}\ngood0.wav\t160\n./good0.wav\t160\n")
    with pytest.raises(ManifestError, match=r"same.tsv, line 3: './good0.wav' is listed twice \(first on "
                                            r"line 2\)"):
        load_fairseq_manifest(tmp_path / "same.tsv")


def test_same_file_names_in_two_folders_get_path_ids(tmp_path):
    root = tmp_path / "c"
    for speaker in ("s1", "s2"):
        audio.write(root / speaker / "001.flac", torch.zeros(160), 16000)
    write_fairseq_manifest(root, [("s1/001.flac", 160), ("s2/001.flac", 160)], tmp_path / "t.tsv")
    assert list(load_fairseq_manifest(tmp_path / "t.tsv")) == ["s1/001", "s2/001"]


def test_speechkit_tsv_with_a_header_still_loads_as_a_table(tmp_path):
    path = tmp_path / "words.tsv"
    path.write_text("id\twords\nu1\tHELLO\n")
    assert not is_fairseq_manifest(path)
    assert load_manifest(path) == {"u1": {"words": "HELLO"}}


@pytest.mark.parametrize("body, message", [
    ("", "starts with the root folder"),
    ("{root}\ts1/u1.flac\n", "starts with the root folder"),
    ("{root}\ns1/u1.flac\n", "line 2: expected 'relative/path<TAB>num_samples'"),
    ("{root}\ns1/u1.flac\t1600\ns1/u2.flac\tmany\n", "line 3: the sample count must be a positive integer"),
    ("{root}\ns1/u1.flac\t0\n", "line 2: the sample count"),
    ("{root}\ns1/u1.flac\t1600\ns1/u1.flac\t1600\n", "line 3: 's1/u1.flac' is listed twice"),
    ("{root}\ns1/gone.flac\t1600\n", "line 2: missing audio file"),
])
def test_bad_manifests_name_the_line(tree, tmp_path, body, message):
    root, _ = tree
    path = tmp_path / "bad.tsv"
    path.write_text(body.format(root=root))
    with pytest.raises(ManifestError, match=message) as caught:
        load_fairseq_manifest(path)
    assert str(path) in str(caught.value)


def test_label_files_must_match_the_manifest(tree, tmp_path):
    root, sizes = tree
    manifest = tmp_path / "train.tsv"
    write_fairseq_manifest(root, sizes.items(), manifest)
    (tmp_path / "train.wrd").write_text("ONE\nTWO\n")
    with pytest.raises(ManifestError, match=r"train.wrd: 2 lines for the 3 rows"):
        load_fairseq_manifest(manifest)
    with pytest.raises(ManifestError, match=r"label file not found: .*train.ltr"):
        load_fairseq_manifest(manifest, labels=["ltr"])


def test_a_bad_file_name_leaves_the_old_manifest(tmp_path):
    path = tmp_path / "train.tsv"
    write_fairseq_manifest("/data", [("a.flac", 10)], path)
    with pytest.raises(ManifestError, match="a tab or a line break"):
        write_fairseq_manifest("/data", [("b.flac", 10), ("bad\tname.flac", 5)], path)
    assert path.read_text() == "/data\na.flac\t10\n"
