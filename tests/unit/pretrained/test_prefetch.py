"""prefetch_model: a model folder's YAML and the files its pretrainer names, fetched, nothing built."""
from __future__ import annotations

import pytest

from speechkit.errors import FetchError
from speechkit.pretrained.prefetch import prefetch_model
from speechkit.pretrained.sources.model_source import ModelSource

YAML = """\
encoder: !new:torch.nn.NotAModuleAtAll   # never built: the YAML is read as data
pretrainer: !new:speechkit.pretrained.Pretrainer
    loadables: {encoder: !ref <encoder>, head: !ref <encoder>}
    paths: {encoder: enc.safetensors}
"""


def model_folder(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "hyperparams.yaml").write_text(YAML)
    (folder / "enc.safetensors").write_bytes(b"enc")
    (folder / "head.ckpt").write_bytes(b"head")
    return folder


def test_the_yaml_and_every_file_of_the_pretrainer_arrive_in_the_save_folder(tmp_path):
    files = prefetch_model(ModelSource.resolve(model_folder(tmp_path), savedir=tmp_path / "copy"))
    assert list(files) == ["hyperparams.yaml", "encoder", "head"]
    assert {path.parent for path in files.values()} == {tmp_path / "copy"}
    assert files["encoder"].read_bytes() == b"enc" and files["head"].read_bytes() == b"head"


def test_a_yaml_that_is_not_utf8_is_named_with_its_byte(tmp_path):
    folder = model_folder(tmp_path)
    (folder / "hyperparams.yaml").write_bytes(b"pretrainer: \xff\n")
    with pytest.raises(FetchError, match=r"hyperparams.yaml from .*byte 12 is not UTF-8"):
        prefetch_model(ModelSource.resolve(folder, savedir=tmp_path / "copy"))


def test_a_missing_file_of_the_pretrainer_is_named(tmp_path):
    folder = model_folder(tmp_path)
    (folder / "head.ckpt").unlink()
    with pytest.raises(FetchError, match="head.ckpt"):
        prefetch_model(ModelSource.resolve(folder, savedir=tmp_path / "copy"))
