"""transformers-format wav2vec 2.0 folders through speechkit's fetching: a Hub repo served over real HTTP,
the pytorch_model.bin fallback, offline reuse of the cache, a CTC head, and every bad folder."""
from __future__ import annotations

import io
import json

import pytest
import torch
from safetensors.torch import load_file

from speechkit.errors import CheckpointError, FetchError
from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model, Wav2Vec2Pretraining
from speechkit.pretrained.huggingface.wav2vec2 import export_wav2vec2, load_wav2vec2

CONFIG = Wav2Vec2Config(conv_channels=(16, 16), conv_kernels=(10, 3), conv_strides=(5, 2), d_model=16,
                        num_layers=1, num_heads=2, ffn_dim=16, pos_conv_kernel=4, pos_conv_groups=2,
                        codebook_groups=2, codebook_entries=4, codevector_dim=8, final_dim=8)


class Payload:
    """A pickled object that is not a tensor: weights_only loading must refuse it."""


def folder_files(model, tmp_path, **options) -> dict:
    export_wav2vec2(model, tmp_path / "export", **options)
    return {name: (tmp_path / "export" / name).read_bytes() for name in ("config.json", "model.safetensors")}


def as_bin(safetensors_bytes: bytes, tmp_path) -> bytes:
    (tmp_path / "w.safetensors").write_bytes(safetensors_bytes)
    buffer = io.BytesIO()
    torch.save(load_file(tmp_path / "w.safetensors"), buffer)
    return buffer.getvalue()


def test_hub_repo_with_pytorch_model_bin_loads_and_then_works_offline(hub_server, tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = Wav2Vec2Pretraining(CONFIG).eval()
    files = folder_files(model, tmp_path)
    weights = as_bin(files["model.safetensors"], tmp_path)
    repo = {"config.json": files["config.json"], "pytorch_model.bin": weights}
    hub_server.repos["org/w2v"] = {"main": repo}
    loaded, extra = load_wav2vec2("org/w2v", savedir=tmp_path / "save")
    assert isinstance(loaded, Wav2Vec2Pretraining) and extra == {}
    assert (tmp_path / "save" / "config.json").exists()
    wav = torch.randn(1, 1200)
    with torch.no_grad():
        expected = model.wav2vec2(wav, torch.tensor([1200])).output
        torch.testing.assert_close(loaded.eval().wav2vec2(wav, torch.tensor([1200])).output, expected)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    requests = sum(hub_server.counts.values())
    again, _ = load_wav2vec2("org/w2v", savedir=tmp_path / "offline")
    assert sum(hub_server.counts.values()) == requests  # served from the cache
    assert torch.equal(again.state_dict()["project_q.weight"], model.state_dict()["project_q.weight"])


def test_ctc_folder_gives_the_encoder_and_the_head(tmp_path):
    torch.manual_seed(1)
    encoder = Wav2Vec2Model(CONFIG)
    head = {"lm_head.weight": torch.randn(5, 16), "lm_head.bias": torch.randn(5)}
    export_wav2vec2(encoder, tmp_path / "ctc", extra=head)
    config = json.loads((tmp_path / "ctc" / "config.json").read_text())
    assert config["architectures"] == ["Wav2Vec2ForCTC"] and config["vocab_size"] == 5
    loaded, extra = load_wav2vec2(tmp_path / "ctc")
    assert isinstance(loaded, Wav2Vec2Model) and sorted(extra) == ["lm_head.bias", "lm_head.weight"]
    assert torch.equal(extra["lm_head.weight"], head["lm_head.weight"])
    for name, tensor in encoder.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name


def test_bad_folders_raise_naming_the_file(tmp_path):
    torch.manual_seed(2)
    files = folder_files(Wav2Vec2Model(CONFIG), tmp_path)
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "config.json").write_bytes(files["config.json"])
    with pytest.raises(FetchError, match="no model.safetensors or pytorch_model.bin"):
        load_wav2vec2(folder)
    torch.save({"weights": [1, 2]}, folder / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=r"pytorch_model.bin: does not fit"):
        load_wav2vec2(folder)
    torch.save({"x": Payload()}, folder / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=r"pytorch_model.bin: cannot be loaded as weights"):
        load_wav2vec2(folder)
    (folder / "model.safetensors").write_bytes(files["model.safetensors"])
    config = json.loads(files["config.json"])
    (folder / "config.json").write_text(json.dumps({**config, "hidden_size": 32}))
    with pytest.raises(CheckpointError, match=r"wrong shape"):
        load_wav2vec2(folder)
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "hubert"}))
    with pytest.raises(CheckpointError, match=r"config.json: model_type 'hubert' is not wav2vec2"):
        load_wav2vec2(folder)
    (folder / "config.json").write_text(json.dumps({**config, "feat_extract_activation": "relu"}))
    with pytest.raises(CheckpointError, match=r"feat_extract_activation='relu' is not supported"):
        load_wav2vec2(folder)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"config.json: not a readable JSON config"):
        load_wav2vec2(folder)


def test_older_files_with_weight_g_and_weight_v_load(tmp_path):
    from safetensors.torch import save_file

    torch.manual_seed(3)
    model = Wav2Vec2Model(CONFIG)
    export_wav2vec2(model, tmp_path / "old")
    tensors = load_file(tmp_path / "old" / "model.safetensors")
    old_names = {"parametrizations.weight.original0": "weight_g",
                 "parametrizations.weight.original1": "weight_v"}
    renamed = {}
    for key, tensor in tensors.items():
        for new, old in old_names.items():
            key = key.replace(new, old)
        renamed[key] = tensor
    assert "encoder.pos_conv_embed.conv.weight_g" in renamed
    save_file(renamed, tmp_path / "old" / "model.safetensors")
    loaded, _ = load_wav2vec2(tmp_path / "old")
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
