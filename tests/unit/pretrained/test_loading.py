"""Safe weight loading and the Pretrainer's key reports."""
from __future__ import annotations

import collections
import pickle

import pytest
import torch

from speechkit.errors import CheckpointError, FetchError
from speechkit.pretrained import FetchSource, Pretrainer
from speechkit.pretrained.loading import load_weights, save_weights


class Evil:
    def __reduce__(self):
        return (print, ("pickled code ran",))


@pytest.mark.parametrize("suffix", [".safetensors", ".ckpt"])
def test_weights_round_trip(tmp_path, suffix):
    layer = torch.nn.Linear(3, 2)
    save_weights(layer.state_dict(), tmp_path / f"w{suffix}")
    loaded = load_weights(tmp_path / f"w{suffix}")
    assert set(loaded) == {"weight", "bias"} and torch.equal(loaded["weight"], layer.weight.detach())


def test_pickled_code_is_refused_naming_file(tmp_path, capsys):
    path = tmp_path / "evil.ckpt"
    torch.save({"weight": torch.zeros(1), "x": Evil()}, path)
    with pytest.raises(CheckpointError, match=r"evil\.ckpt.*weights"):
        load_weights(path)
    assert "pickled code ran" not in capsys.readouterr().out
    (tmp_path / "plain.pkl").write_bytes(pickle.dumps(Evil()))
    with pytest.raises(CheckpointError, match=r"plain\.pkl"):
        load_weights(tmp_path / "plain.pkl")
    with pytest.raises(CheckpointError, match=r"missing\.ckpt.*not found"):
        load_weights(tmp_path / "missing.ckpt")


def _model(out=2):
    layers = collections.OrderedDict(enc=torch.nn.Linear(4, 3), out=torch.nn.Linear(3, out))
    return torch.nn.Sequential(layers)


def test_pretrainer_strict_and_partial_loading(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    trained = _model(out=5)
    state = dict(trained.state_dict(), extra=torch.zeros(1))
    save_weights(state, source / "model.ckpt")

    strict = Pretrainer(tmp_path / "collect", {"model": _model(out=2)}, {"model": str(source / "model.ckpt")})
    strict.collect_files()
    with pytest.raises(CheckpointError) as info:
        strict.load_collected()
    assert "model.ckpt" in str(info.value) and "mismatched keys: out.bias, out.weight" in str(info.value)
    assert "unexpected keys: extra" in str(info.value)

    target = _model(out=2)
    partial = Pretrainer(tmp_path / "collect", {"model": target}, {"model": str(source / "model.ckpt")})
    partial.collect_files()
    report = partial.load_collected(partial=["model"])["model"]
    assert report.mismatched == ["out.bias", "out.weight"] and report.unexpected == ["extra"]
    assert report.missing == []
    assert torch.equal(target.enc.weight, trained.enc.weight)
    assert not torch.equal(target.out.weight[:2], trained.out.weight[:2])


def test_pretrainer_default_source_bare_names_and_errors(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    layer = torch.nn.Linear(2, 2)
    save_weights(layer.state_dict(), source / "enc.safetensors")
    save_weights(layer.state_dict(), source / "dec.ckpt")
    enc, dec = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    pretrainer = Pretrainer(tmp_path / "c", {"enc": enc, "dec": dec}, {"enc": "enc.safetensors"})
    paths = pretrainer.collect_files(default_source=str(source))
    assert paths["dec"].name == "dec.ckpt"  # no path: <name>.ckpt in the default source
    pretrainer.load_collected()
    assert torch.equal(enc.weight, layer.weight) and torch.equal(dec.bias, layer.bias)
    with pytest.raises(FetchError, match=r"name no loadable"):
        Pretrainer(tmp_path / "c", {"enc": enc}, {"encoder": "x.ckpt"})
    with pytest.raises(FetchError, match="collect_files"):
        Pretrainer(tmp_path / "c", {"enc": enc}).load_collected()


def test_fetch_source_paths_and_kind_parsing(tmp_path):
    pretrainer = Pretrainer(tmp_path, {"a": None, "b": None, "c": None},
                            {"a": FetchSource("huggingface", "org/repo/sub/w.ckpt"),
                             "b": "https://host/models/x/w.ckpt", "c": "w.ckpt"})
    assert pretrainer.locate("a") == (FetchSource("huggingface", "org/repo"), "sub/w.ckpt")
    assert pretrainer.locate("b") == ("https://host/models/x", "w.ckpt")
    assert pretrainer.locate("c", default_source="org/m") == ("org/m", "w.ckpt")
    pretrainer.add_paths({"a": "org/repo/sub/w.ckpt"})  # no such local folder: a Hub repo's subfolder
    assert pretrainer.locate("a") == ("org/repo", "sub/w.ckpt")
    local = tmp_path / "org" / "repo" / "sub"
    local.mkdir(parents=True)
    pretrainer.add_paths({"a": f"{local}/w.ckpt"})
    assert pretrainer.locate("a") == (str(local), "w.ckpt")
    with pytest.raises(FetchError, match="unknown kind 'ftp'"):
        FetchSource("ftp", "x")


def test_declared_files_reads_the_pretrainer_without_building(tmp_path):
    from speechkit.pretrained.pretrainer import declared_files

    text = """\
enc: !new:does.not.Exist
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables: {enc: !ref <enc>, lm: !ref <enc>, tok: !ref <enc>, dec: !ref <enc>}
  paths:
    enc: enc.safetensors
    lm: !new:speechkit.pretrained.FetchSource [huggingface, org/lm/lm.ckpt]
    tok: !new:speechkit.pretrained.FetchSource {kind: url, path: "https://h/t/tok.model"}
"""
    assert declared_files(text) == {"enc": "enc.safetensors",
                                    "lm": FetchSource("huggingface", "org/lm/lm.ckpt"),
                                    "tok": FetchSource("url", "https://h/t/tok.model"), "dec": "dec.ckpt"}
    assert declared_files("a: 1\n") == {}
    with pytest.raises(FetchError, match=r"m\.yaml, line 4.*'enc' must be a plain string"):
        declared_files("x: 1\npretrainer: !new:speechkit.pretrained.Pretrainer\n  paths:\n"
                       "    enc: !ref <x>/enc.ckpt\n", "m.yaml")


def test_a_language_model_loads_when_its_file_exists_and_a_missing_one_fails_only_when_used(tmp_path):
    from speechkit.errors import HparamsError
    from speechkit.pretrained.loading import load_language_model

    lm, path = torch.nn.Linear(2, 2), tmp_path / "lm.ckpt"
    assert not load_language_model(lm, str(path), lm_weight=0.0)
    assert not load_language_model(lm, str(path), lm_weight=0.5, learns=True)  # this run trains it
    with pytest.raises(HparamsError, match="lm_weight is 0.5 but lm_checkpoint=.*lm.ckpt does not exist"):
        load_language_model(lm, str(path), lm_weight=0.5)
    save_weights({"weight": torch.ones(2, 2), "bias": torch.zeros(2)}, path)
    assert load_language_model(lm, str(path), lm_weight=0.5) and torch.equal(lm.weight, torch.ones(2, 2))


def test_the_best_checkpoint_of_another_run_is_loaded_by_its_key(tmp_path):
    from speechkit.checkpoints import Checkpointer
    from speechkit.pretrained.loading import load_best_checkpoint

    saved = torch.nn.Linear(3, 2)
    checkpointer = Checkpointer(tmp_path / "save", {"separator": saved})
    checkpointer.save_checkpoint(meta={"loss": 1.0})
    best = {key: value.clone() for key, value in saved.state_dict().items()}
    with torch.no_grad():
        saved.weight.add_(1.0)
    checkpointer.save_checkpoint(meta={"loss": 2.0})  # newer, worse
    separator, other = torch.nn.Linear(3, 2), torch.nn.Linear(1, 1)
    before = other.weight.detach().clone()
    loaded = load_best_checkpoint({"separator": separator, "lm": other}, tmp_path / "save", "loss")
    assert loaded == ["separator"]
    assert torch.equal(separator.weight, best["weight"]) and torch.equal(other.weight, before)
    with pytest.raises(CheckpointError, match=r"holds none of \['encoder'\]"):
        load_best_checkpoint({"encoder": torch.nn.Linear(3, 2)}, tmp_path / "save", "loss")
    with pytest.raises(CheckpointError, match="no checkpoint with the key 'WER' to start from"):
        load_best_checkpoint({"separator": separator}, tmp_path / "save", "WER")
    with pytest.raises(CheckpointError, match=r"separator\.ckpt: does not fit"):
        load_best_checkpoint({"separator": torch.nn.Linear(4, 2)}, tmp_path / "save", "loss")
