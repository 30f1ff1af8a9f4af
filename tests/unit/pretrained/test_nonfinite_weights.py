"""Weights holding NaN or inf are refused on load, naming the file and the tensor, unless allowed."""
from __future__ import annotations

import collections

import pytest
import torch

from speechkit.errors import CheckpointError
from speechkit.pretrained import Pretrainer
from speechkit.pretrained.loading import ALLOW_NONFINITE_VARIABLE, load_weights, save_weights


def _model():
    return torch.nn.Sequential(collections.OrderedDict(enc=torch.nn.Linear(4, 3), out=torch.nn.Linear(3, 2)))


@pytest.mark.parametrize("suffix, bad", [(".ckpt", float("nan")), (".safetensors", float("inf"))])
def test_a_non_finite_tensor_is_refused_naming_file_and_tensor(tmp_path, suffix, bad):
    state = _model().state_dict()
    state["out.weight"][1, 2] = bad
    save_weights(state, tmp_path / f"ctc_head{suffix}")
    with pytest.raises(CheckpointError) as error:
        load_weights(tmp_path / f"ctc_head{suffix}")
    message = str(error.value)
    assert f"ctc_head{suffix}" in message and "tensor 'out.weight' holds 1 non-finite value(s)" in message
    assert ALLOW_NONFINITE_VARIABLE in message and "allow_nonfinite=True" in message
    loaded = load_weights(tmp_path / f"ctc_head{suffix}", allow_nonfinite=True)
    assert not torch.isfinite(loaded["out.weight"]).all()


def test_integer_tensors_and_finite_weights_load(tmp_path):
    state = {**_model().state_dict(), "count": torch.tensor(3), "steps": torch.arange(4)}
    save_weights(state, tmp_path / "model.ckpt")
    assert set(load_weights(tmp_path / "model.ckpt")) == set(state)


def test_a_pretrainer_refuses_a_nan_file_and_the_environment_can_allow_it(tmp_path, monkeypatch):
    source = tmp_path / "remote"
    source.mkdir()
    state = {name: torch.full_like(value, float("nan")) for name, value in _model().state_dict().items()}
    save_weights(state, source / "ctc_head.ckpt")
    paths = {"ctc_head": str(source / "ctc_head.ckpt")}
    pretrainer = Pretrainer(tmp_path / "collect", {"ctc_head": _model()}, paths)
    pretrainer.collect_files()
    with pytest.raises(CheckpointError, match="ctc_head.ckpt: tensor 'enc.weight' holds 12 non-finite"):
        pretrainer.load_collected()
    monkeypatch.setenv(ALLOW_NONFINITE_VARIABLE, "1")
    target = _model()
    allowed = Pretrainer(tmp_path / "collect", {"ctc_head": target}, paths)
    allowed.collect_files()
    allowed.load_collected()
    assert torch.isnan(target.enc.weight).all()
