"""fetch() tells "the source has no such file" (FetchNotFoundError) from every other failure, online and,
from what the cache recorded, offline: local folders, URLs (a real server) and a Hub-compatible endpoint."""
from __future__ import annotations

import pytest

from speechkit.errors import FetchError, FetchNotFoundError
from speechkit.pretrained.sources.fetching import absence_marker, fetch, url_cache_path


def test_local_missing_file_is_not_found(tmp_path):
    with pytest.raises(FetchNotFoundError, match=r"'x\.ckpt'.*local folder"):
        fetch("x.ckpt", str(tmp_path), tmp_path / "s")


@pytest.mark.parametrize("status", [404, 410])
def test_url_not_found_is_recorded_for_offline_and_cleared_by_a_download(file_server, tmp_path, status):
    file_server.statuses["/m/a.ckpt"] = status
    source = f"{file_server.url}/m"
    with pytest.raises(FetchNotFoundError, match=rf"'a\.ckpt'.*HTTP {status}"):
        fetch("a.ckpt", source, tmp_path / "s")
    marker = absence_marker(url_cache_path(f"{source}/a.ckpt", "a.ckpt"))
    assert marker.is_file()
    requests = sum(file_server.counts.values())
    with pytest.raises(FetchNotFoundError, match=r"offline.*'a\.ckpt'.*not on the server when last asked"):
        fetch("a.ckpt", source, tmp_path / "s", allow_network=False)
    assert sum(file_server.counts.values()) == requests
    # The file appears: online it is downloaded and the record of its absence goes.
    del file_server.statuses["/m/a.ckpt"]
    file_server.files["/m/a.ckpt"] = b"now here"
    assert fetch("a.ckpt", source, tmp_path / "s").read_bytes() == b"now here"
    assert not marker.exists()
    assert fetch("a.ckpt", source, tmp_path / "t", allow_network=False).read_bytes() == b"now here"


@pytest.mark.parametrize("status", [403, 500, 503])
def test_url_other_errors_are_not_not_found(file_server, tmp_path, status):
    file_server.statuses["/m/a.ckpt"] = status
    with pytest.raises(FetchError, match=rf"HTTP {status}") as error:
        fetch("a.ckpt", f"{file_server.url}/m", tmp_path / "s")
    assert not isinstance(error.value, FetchNotFoundError)
    assert not absence_marker(url_cache_path(f"{file_server.url}/m/a.ckpt", "a.ckpt")).exists()
    # Offline, a file never fetched is merely not cached: whether the server has it is unknown.
    with pytest.raises(FetchError, match="is not in the cache") as error:
        fetch("a.ckpt", f"{file_server.url}/m", tmp_path / "s", allow_network=False)
    assert not isinstance(error.value, FetchNotFoundError)


def test_url_over_the_size_limit_is_not_not_found(file_server, tmp_path):
    file_server.files["/m/a.ckpt"] = b"x" * 5000
    with pytest.raises(FetchError, match="limit of 100") as error:
        fetch("a.ckpt", f"{file_server.url}/m", tmp_path / "s", max_bytes=100)
    assert not isinstance(error.value, FetchNotFoundError)


def test_hub_missing_entry_is_not_found_online_and_offline(hub_server, tmp_path):
    hub_server.repos["org/asr"] = {"main": {"model.ckpt": b"w"}}
    with pytest.raises(FetchNotFoundError, match=r"'absent\.ckpt'.*the repo has no such file"):
        fetch("absent.ckpt", "org/asr", tmp_path / "s")
    fetch("model.ckpt", "org/asr", tmp_path / "s")
    requests = sum(hub_server.counts.values())
    with pytest.raises(FetchNotFoundError, match=r"offline.*'absent\.ckpt'.*not in the repo when last asked"):
        fetch("absent.ckpt", "org/asr", tmp_path / "s", allow_network=False)
    # A file never asked for is merely not cached, and a missing repo is no answer about a file.
    with pytest.raises(FetchError, match="is not in the cache") as error:
        fetch("never.ckpt", "org/asr", tmp_path / "s", allow_network=False)
    assert not isinstance(error.value, FetchNotFoundError)
    assert sum(hub_server.counts.values()) == requests
    with pytest.raises(FetchError, match="no such repo") as error:
        fetch("model.ckpt", "org/other", tmp_path / "s")
    assert not isinstance(error.value, FetchNotFoundError)
