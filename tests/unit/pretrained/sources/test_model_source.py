"""ModelSource: a model folder's source and fetch settings resolved once; the Pretrainer fetching by it."""
from __future__ import annotations

import dataclasses
import functools
import http.server
import threading

import pytest
import torch

from speechkit.errors import FetchError, UnsafeSourceError
from speechkit.pretrained import Pretrainer
from speechkit.pretrained.loading import save_weights
from speechkit.pretrained.sources.fetching import FetchFrom, FetchStrategy
from speechkit.pretrained.sources.limits import DEFAULT_LIMITS, SourceLimits
from speechkit.pretrained.sources.model_source import ModelSource


@pytest.fixture()
def file_server(tmp_path):
    """A real HTTP server on 127.0.0.1 serving ``tmp_path / "served"``; yields (folder, base URL)."""
    folder = tmp_path / "served"
    folder.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=folder))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_remote_folder_lands_in_the_cache_and_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("SPEECHKIT_CACHE", str(tmp_path / "cache"))
    model = ModelSource.resolve("org/asr-ctc", revision="v1", allow_network=False)
    assert model.source.kind is FetchFrom.HUGGING_FACE and not model.local and not model.trusted
    assert model.savedir == tmp_path / "cache" / "models" / "org--asr-ctc"
    assert model.strategy is FetchStrategy.SYMLINK and model.limits is DEFAULT_LIMITS
    options = model.file_options()
    assert options["max_bytes"] == DEFAULT_LIMITS.max_file_bytes and options["revision"] == "v1"
    assert options["stall_timeout_s"] == DEFAULT_LIMITS.stall_timeout_s and options["allow_network"] is False
    assert model.describe("hyperparams.yaml") == "hyperparams.yaml from Hugging Face repo 'org/asr-ctc' " \
                                                 "(revision v1)"


def test_a_local_folder_is_read_in_place_unbounded_and_trusted(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    model = ModelSource.resolve(str(folder), strategy="copy", trust_remote_code=False)
    assert model.local and model.trusted and model.savedir is None
    assert model.strategy is FetchStrategy.IN_PLACE
    assert "max_bytes" not in model.file_options() and "stall_timeout_s" not in model.file_options()
    # A save folder that is the source folder itself is read in place too; another one gets the strategy.
    assert ModelSource.resolve(str(folder), folder, strategy="copy").strategy is FetchStrategy.IN_PLACE
    elsewhere = ModelSource.resolve(str(folder), tmp_path / "copies", strategy="copy")
    assert elsewhere.strategy is FetchStrategy.COPY and elsewhere.savedir == tmp_path / "copies"


def test_it_is_frozen_and_built_from_keyword_arguments_as_flags_give_them(tmp_path):
    flags = {"source": "https://example.org/m", "savedir": str(tmp_path), "strategy": "copy",
             "revision": None, "allow_network": True, "cache_dir": None, "force_download": True,
             "trust_remote_code": False, "allow": ["collections.Counter"], "limits": SourceLimits()}
    model = ModelSource(**flags)
    assert model.source.kind is FetchFrom.URL and model.strategy is FetchStrategy.COPY
    assert model.allow == ("collections.Counter",) and model.savedir == tmp_path
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.revision = "main"
    assert dataclasses.replace(model, force_download=False).force_download is False


def test_fetch_brings_a_local_file_into_the_save_folder(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "hyperparams.yaml").write_text("sample_rate: 16000\n")
    model = ModelSource(str(folder), tmp_path / "saved", "copy")
    path = model.fetch("hyperparams.yaml")
    assert path == tmp_path / "saved" / "hyperparams.yaml" and not path.is_symlink()
    assert path.read_text() == "sample_rate: 16000\n"


def test_the_pretrainer_fetches_a_remote_folder_within_its_bounds(tmp_path, file_server):
    served, url = file_server
    save_weights(torch.nn.Linear(4, 4).state_dict(), served / "enc.ckpt")
    size = (served / "enc.ckpt").stat().st_size
    cache = tmp_path / "cache"

    def pretrainer():
        return Pretrainer(tmp_path / "ignored", {"enc": torch.nn.Linear(4, 4)}, {"enc": "enc.ckpt"})

    bounded = ModelSource(url, tmp_path / "small", cache_dir=cache,
                          limits=SourceLimits(max_file_bytes=size - 1))
    with pytest.raises(FetchError, match="enc.ckpt"):
        pretrainer().collect_model_files(bounded, bounded.savedir, "hyperparams.yaml")
    model = ModelSource(url, tmp_path / "large", cache_dir=cache, limits=SourceLimits(max_file_bytes=size))
    loader = pretrainer()
    collected = loader.collect_model_files(model, model.savedir, "hyperparams.yaml")
    assert collected["enc"] == tmp_path / "large" / "enc.ckpt" and loader.collect_in == tmp_path / "large"
    assert loader.load_collected()["enc"].complete


def test_an_untrusted_remote_folder_may_not_name_files_of_this_machine(tmp_path, file_server):
    _, url = file_server
    secret = tmp_path / "secret.ckpt"
    save_weights(torch.nn.Linear(4, 4).state_dict(), secret)
    loader = Pretrainer(tmp_path / "c", {"enc": torch.nn.Linear(4, 4)}, {"enc": str(secret)})
    with pytest.raises(UnsafeSourceError, match="remote.yaml: the pretrainer path of 'enc' names a file"):
        loader.collect_model_files(ModelSource(url, tmp_path / "c"), tmp_path / "c", "remote.yaml")
    trusted = ModelSource(url, tmp_path / "c", trust_remote_code=True)
    assert loader.collect_model_files(trusted, tmp_path / "c", "remote.yaml")["enc"].name == "secret.ckpt"
