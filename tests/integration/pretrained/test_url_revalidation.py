"""A model fetched from a URL follows the server: cached files are revalidated (ETag), refreshed on request
(force_download, --refresh), and served from the cache offline or when the server cannot be reached."""
from __future__ import annotations

import pytest
import torch

from speechkit.cli import main as speechkit_main
from speechkit.errors import FetchError
from speechkit.pretrained import EncoderASR
from speechkit.pretrained.loading import save_weights
from speechkit.pretrained.sources.fetching import fetch

from .conftest import FileServer


def model_yaml(rate: int) -> bytes:
    return (f"sample_rate: {rate}\nlin: !new:torch.nn.Linear [2, 2]\nmodules: {{lin: !ref <lin>}}\n"
            "encoder_pipeline: [lin]\ntokenizer: !new:speechkit.data.encoders.CTCLabelEncoder\n"
            "pretrainer: !new:speechkit.pretrained.Pretrainer\n  loadables: {lin: !ref <lin>}\n"
            "  paths: {lin: lin.ckpt}\n").encode()


def serve_model(server, tmp_path, rate=16000, bias=0.0):
    linear = torch.nn.Linear(2, 2)
    torch.nn.init.constant_(linear.bias, bias)
    save_weights(linear.state_dict(), tmp_path / "lin.ckpt")
    server.files["/m/hyperparams.yaml"] = model_yaml(rate)
    server.files["/m/lin.ckpt"] = (tmp_path / "lin.ckpt").read_bytes()


def test_a_changed_file_on_the_server_is_seen_and_an_unchanged_one_not_downloaded(file_server, tmp_path):
    serve_model(file_server, tmp_path, rate=16000, bias=0.0)
    url = f"{file_server.url}/m"
    assert EncoderASR.from_hparams(url, savedir=tmp_path / "s").sample_rate == 16000
    # Unchanged: each file costs one conditional request answered 304.
    assert EncoderASR.from_hparams(url, savedir=tmp_path / "s").sample_rate == 16000
    assert file_server.not_modified["/m/hyperparams.yaml"] == 1
    assert file_server.not_modified["/m/lin.ckpt"] == 1
    # Changed on the server: the next load sees the new YAML and the new weights.
    serve_model(file_server, tmp_path, rate=8000, bias=1.0)
    asr = EncoderASR.from_hparams(url, savedir=tmp_path / "s")
    assert asr.sample_rate == 8000 and torch.equal(asr.mods["lin"].bias, torch.ones(2))
    assert file_server.gets("/m/hyperparams.yaml") == 3
    assert file_server.not_modified["/m/hyperparams.yaml"] == 1


def test_offline_serves_the_cache_without_asking(file_server, tmp_path, monkeypatch):
    serve_model(file_server, tmp_path)
    url = f"{file_server.url}/m"
    EncoderASR.from_hparams(url, savedir=tmp_path / "s")
    serve_model(file_server, tmp_path, rate=8000)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert EncoderASR.from_hparams(url, savedir=tmp_path / "s").sample_rate == 16000
    assert file_server.gets("/m/hyperparams.yaml") == 1


def test_force_download_and_refresh_download_again(file_server, tmp_path, capsys):
    serve_model(file_server, tmp_path)
    url = f"{file_server.url}/m"
    EncoderASR.from_hparams(url, savedir=tmp_path / "s")
    EncoderASR.from_hparams(url, savedir=tmp_path / "s", force_download=True)
    assert file_server.gets("/m/lin.ckpt") == 2 and file_server.not_modified["/m/lin.ckpt"] == 0
    refresh = ["fetch", url, "--savedir", str(tmp_path / "f"), "--refresh"]
    assert speechkit_main(refresh) == 0, capsys.readouterr()
    assert file_server.gets("/m/lin.ckpt") == 3 and file_server.not_modified["/m/lin.ckpt"] == 0
    assert speechkit_main(["fetch", url, "--savedir", str(tmp_path / "f")]) == 0
    assert file_server.not_modified["/m/lin.ckpt"] == 1


def test_a_server_without_validators_is_downloaded_again(file_server, tmp_path):
    file_server.validators = False
    file_server.files["/v/a.bin"] = b"first"
    assert fetch("a.bin", f"{file_server.url}/v", tmp_path / "s").read_bytes() == b"first"
    file_server.files["/v/a.bin"] = b"second"
    assert fetch("a.bin", f"{file_server.url}/v", tmp_path / "s").read_bytes() == b"second"


def test_sha256_pins_the_cached_file_without_asking(file_server, tmp_path):
    import hashlib

    file_server.files["/p/a.bin"] = b"pinned"
    digest = hashlib.sha256(b"pinned").hexdigest()
    fetch("a.bin", f"{file_server.url}/p", tmp_path / "s", sha256=digest)
    fetch("a.bin", f"{file_server.url}/p", tmp_path / "s", sha256=digest)
    assert file_server.gets("/p/a.bin") == 1


def test_an_unreachable_server_leaves_the_cached_copy_in_use(tmp_path, caplog):
    with FileServer() as server:
        server.files["/d/a.bin"] = b"kept"
        url = f"{server.url}/d"
        fetch("a.bin", url, tmp_path / "s")
    with caplog.at_level("WARNING"):
        assert fetch("a.bin", url, tmp_path / "s").read_bytes() == b"kept"
    assert "cannot revalidate 'a.bin'" in caplog.text and "using the cached copy" in caplog.text


def test_a_file_removed_from_the_server_is_an_error(file_server, tmp_path):
    file_server.files["/r/a.bin"] = b"gone soon"
    fetch("a.bin", f"{file_server.url}/r", tmp_path / "s")
    del file_server.files["/r/a.bin"]
    with pytest.raises(FetchError, match=r"'a.bin'.*HTTP 404"):
        fetch("a.bin", f"{file_server.url}/r", tmp_path / "s")
