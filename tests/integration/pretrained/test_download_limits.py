"""A download has a total time limit (a server dripping bytes never stalls, yet stops), and follows a redirect
only to another http(s) URL; real servers on 127.0.0.1."""
from __future__ import annotations

import time

import pytest

from speechkit.errors import FetchError
from speechkit.pretrained.sources.fetching import fetch
from speechkit.pretrained.sources.limits import SourceLimits


def test_a_dripping_server_stops_at_the_download_time_limit(file_server, tmp_path):
    file_server.drip_s["/drip/model.ckpt"] = 0.2  # one byte every 0.2 s: never silent for the stall timeout
    started = time.monotonic()
    with pytest.raises(FetchError) as error:
        fetch("model.ckpt", f"{file_server.url}/drip", tmp_path / "save", cache_dir=tmp_path / "cache",
              stall_timeout_s=1.0, download_timeout_s=1.5)
    assert time.monotonic() - started < 10
    message = str(error.value)
    assert "'model.ckpt' from URL" in message and "longer than its limit of 1.5 s" in message, message
    assert not (tmp_path / "save" / "model.ckpt").exists()
    assert SourceLimits().download_timeout_s == 4 * 3600.0  # the default, documented in docs/pretrained.md


@pytest.mark.parametrize("target", ["ftp://127.0.0.1/secret.bin", "file:///etc/passwd"])
def test_a_redirect_to_another_scheme_is_refused(file_server, tmp_path, target):
    file_server.redirects["/m/model.ckpt"] = target
    with pytest.raises(FetchError) as error:
        fetch("model.ckpt", f"{file_server.url}/m", tmp_path / "save", cache_dir=tmp_path / "cache")
    message = str(error.value)
    assert "'model.ckpt' from URL" in message and "redirected to" in message, message
    assert "only http and https are followed" in message, message
    assert not (tmp_path / "save" / "model.ckpt").exists()


def test_a_redirect_to_http_is_followed(file_server, tmp_path):
    file_server.files["/real/model.ckpt"] = b"weights"
    file_server.redirects["/m/model.ckpt"] = f"{file_server.url}/real/model.ckpt"
    path = fetch("model.ckpt", f"{file_server.url}/m", tmp_path / "save", cache_dir=tmp_path / "cache")
    assert path.read_bytes() == b"weights"
