"""Files written through a temporary beside them: complete or not at all, and nothing left behind."""
from __future__ import annotations

import json
import os

import pytest
import torch

from speechkit.atomic_files import atomic_write, replacing, replacing_folder, temporary_path


def test_a_written_file_replaces_the_old_one_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "report.json"
    path.write_text("old")
    with atomic_write(path) as handle:
        json.dump({"ok": 1}, handle)
        assert path.read_text() == "old"  # readers see the old file until the new one is complete
    assert json.loads(path.read_text()) == {"ok": 1}
    assert os.listdir(tmp_path) == ["report.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text("old")
    with pytest.raises(ValueError, match="bad row"):
        with atomic_write(path) as handle:
            handle.write("half a fi")
            raise ValueError("bad row")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["manifest.json"]


def test_binary_mode_and_newline_reach_the_file(tmp_path):
    with atomic_write(tmp_path / "a.bin", "wb") as handle:
        handle.write(b"\x00\x01")
    with atomic_write(tmp_path / "a.tsv", newline="\n") as handle:
        handle.write("root\nx\t1\n")
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "a.tsv").read_bytes() == b"root\nx\t1\n"


def test_a_writer_taking_a_path_writes_through_the_temporary(tmp_path):
    path = tmp_path / "weights.pt"
    with replacing(path) as temporary:
        assert os.path.dirname(temporary) == str(tmp_path)  # same folder: the rename stays atomic
        assert os.path.basename(temporary).startswith(".weights.pt.tmp-")
        torch.save({"w": torch.ones(2)}, temporary)
    assert torch.equal(torch.load(path, weights_only=True)["w"], torch.ones(2))
    with pytest.raises(RuntimeError):
        with replacing(path) as temporary:
            torch.save({"w": torch.zeros(2)}, temporary)
            raise RuntimeError("disk full")
    assert torch.equal(torch.load(path, weights_only=True)["w"], torch.ones(2))
    assert os.listdir(tmp_path) == ["weights.pt"]


def test_each_process_has_its_own_temporary_name(tmp_path):
    assert temporary_path(tmp_path / "a.json") == str(tmp_path / f".a.json.tmp-{os.getpid()}")


def test_a_written_folder_replaces_the_old_one_whole(tmp_path):
    output = tmp_path / "models" / "asr"  # its parent is made too
    with replacing_folder(output) as folder:
        assert folder.is_dir() and not any(folder.iterdir()) and not output.exists()
        (folder / "hyperparams.yaml").write_text("new")
    assert sorted(os.listdir(output)) == ["hyperparams.yaml"]
    with replacing_folder(output) as folder:
        (folder / "README.md").write_text("card")
    assert sorted(os.listdir(output)) == ["README.md"]  # nothing of the old folder is left
    assert os.listdir(tmp_path / "models") == ["asr"]


def test_a_failed_folder_keeps_the_old_one_and_removes_the_temporary(tmp_path):
    output = tmp_path / "asr"
    output.mkdir()
    (output / "weights.ckpt").write_text("old")
    with pytest.raises(RuntimeError, match="verification failed"):
        with replacing_folder(output) as folder:
            (folder / "weights.ckpt").write_text("half")
            raise RuntimeError("verification failed")
    assert (output / "weights.ckpt").read_text() == "old"
    assert os.listdir(tmp_path) == ["asr"]

