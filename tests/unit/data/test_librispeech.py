"""LibriSpeech-layout preparation: manifests, placeholders, errors naming the file and line."""
from __future__ import annotations

import json

import pytest

from speechkit.data.dataset import DynamicItemDataset
from speechkit.data.librispeech import find_splits, prepare_librispeech, read_split
from speechkit.data.manifest import load_json_manifest
from speechkit.errors import ManifestError
from tests.unit.data.librispeech_tree import make_librispeech


def test_prepare_writes_one_manifest_per_split(tmp_path):
    root = make_librispeech(tmp_path / "LibriSpeech")
    assert find_splits(str(root)) == ["dev-clean", "test-clean"]
    written = prepare_librispeech(str(root), str(tmp_path / "out"))
    assert sorted(written) == ["dev-clean", "test-clean"]
    dev = json.loads((tmp_path / "out" / "dev-clean.json").read_text())
    assert dev["84-121123-0001"] == {"wav": str(root / "dev-clean" / "84" / "121123" / "84-121123-0001.flac"),
                                     "duration": 0.2, "spk": "84", "chapter": "121123",
                                     "text": "BUT IN LESS THAN FIVE MINUTES"}
    assert sorted(dev) == ["174-50561-0005", "84-121123-0000", "84-121123-0001"]
    dataset = DynamicItemDataset.from_json(written["dev-clean"])
    assert sorted(dataset.lengths()) == [0.05, 0.1, 0.2]


def test_placeholder_paths_load_anywhere_and_existing_manifests_are_kept(tmp_path):
    root = make_librispeech(tmp_path / "LibriSpeech")
    written = prepare_librispeech(str(root), str(tmp_path / "out"), ["test-clean"], placeholder="data_root")
    text = (tmp_path / "out" / "test-clean.json").read_text()
    assert "$data_root/test-clean/61/70968/61-70968-0000.flac" in text
    dataset = DynamicItemDataset.from_json(written["test-clean"], replacements={"data_root": str(root)})
    assert dataset[0]["text"] == "HE BEGAN A CONFUSED COMPLAINT"
    (tmp_path / "out" / "test-clean.json").write_text("{}")
    prepare_librispeech(str(root), str(tmp_path / "out"), ["test-clean"])
    assert (tmp_path / "out" / "test-clean.json").read_text() == "{}"  # skip_if_exists
    prepare_librispeech(str(root), str(tmp_path / "out"), ["test-clean"], skip_if_exists=False)
    assert "61-70968-0000" in (tmp_path / "out" / "test-clean.json").read_text()


def test_layout_errors_name_the_file_and_line(tmp_path):
    root = make_librispeech(tmp_path / "LibriSpeech")
    transcript = root / "dev-clean" / "84" / "121123" / "84-121123.trans.txt"
    original = transcript.read_text()

    transcript.write_text(original + "84-121123-0009 NO AUDIO HERE\n")
    with pytest.raises(ManifestError, match=r"121123\.trans\.txt, line 3: id '84-121123-0009' has no audio"):
        read_split(str(root / "dev-clean"))

    transcript.write_text(original + "84-121123-0000 AGAIN\n")
    with pytest.raises(ManifestError, match=r"line 3: duplicate id '84-121123-0000'"):
        read_split(str(root / "dev-clean"))

    transcript.write_text(original + "84-121123-0002\n")
    with pytest.raises(ManifestError, match=r"line 3: expected '<utterance id> <words>'"):
        read_split(str(root / "dev-clean"))

    transcript.write_text(original.splitlines()[0] + "\n")
    with pytest.raises(ManifestError, match=r"84-121123-0001\.flac has no line in .*84-121123\.trans\.txt"):
        read_split(str(root / "dev-clean"))

    transcript.write_text(original)
    with pytest.raises(ManifestError, match=r"'train-other-5' not found .*found: dev-clean, test-clean"):
        prepare_librispeech(str(root), str(tmp_path / "out"), ["train-other-5"])
    with pytest.raises(ManifestError, match="not found"):
        prepare_librispeech(str(tmp_path / "nowhere"), str(tmp_path / "out"))


def test_prepare_also_writes_the_names_the_templates_read(tmp_path):
    from tests.unit.data.importers.layouts import librispeech

    root = librispeech(tmp_path / "LibriSpeech")
    written = prepare_librispeech(str(root), str(tmp_path / "out"), placeholder="data_root")
    assert sorted(written) == ["dev-clean", "test", "test-clean", "train", "train-clean-100", "valid"]
    train = load_json_manifest(written["train"], {"data_root": str(root)})
    assert train == load_json_manifest(written["train-clean-100"], {"data_root": str(root)})
    assert sorted(load_json_manifest(written["valid"], {"data_root": str(root)})) == ["1272-1240-0000",
                                                                                       "1272-1240-0001"]
