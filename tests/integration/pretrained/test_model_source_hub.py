"""A model folder's settings (ModelSource) against a Hub-compatible server on 127.0.0.1: the Pretrainer
fetches its files at the folder's revision unless its own YAML pins one."""
from __future__ import annotations

import io

import torch

from speechkit.pretrained import Pretrainer
from speechkit.pretrained.sources.model_source import ModelSource


def _weights(value: float) -> bytes:
    buffer = io.BytesIO()
    torch.save({"weight": torch.full((2, 2), value), "bias": torch.zeros(2)}, buffer)
    return buffer.getvalue()


def _loaded_value(pretrainer: Pretrainer) -> float:
    pretrainer.load_collected()
    return float(pretrainer.loadables["enc"].weight.detach()[0, 0])


def test_the_folder_revision_applies_unless_the_yaml_pins_its_own(hub_server, tmp_path):
    hub_server.repos["org/asr"] = {"main": {"enc.ckpt": _weights(1.0)}, "v1": {"enc.ckpt": _weights(2.0)}}
    model = ModelSource.resolve("org/asr", tmp_path / "main", revision="main")

    unpinned = Pretrainer("unused", {"enc": torch.nn.Linear(2, 2)}, {"enc": "enc.ckpt"})
    unpinned.collect_model_files(model, model.savedir, "hyperparams.yaml")
    assert _loaded_value(unpinned) == 1.0

    pinned = Pretrainer("unused", {"enc": torch.nn.Linear(2, 2)}, {"enc": "enc.ckpt"}, revision="v1")
    pinned.collect_model_files(ModelSource.resolve("org/asr", tmp_path / "v1", revision="main"),
                               tmp_path / "v1", "hyperparams.yaml")
    assert _loaded_value(pinned) == 2.0
    assert pinned.revision == "v1" and unpinned.revision is None  # nothing set from outside
