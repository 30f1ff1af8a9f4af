"""fetch() against real servers: URLs, a Hub-compatible endpoint, local folders, offline, failures."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import time

import pytest

from speechkit.errors import FetchError
from speechkit.pretrained.sources.fetching import FetchFrom, FetchSource, fetch, url_cache_path

PAYLOAD = bytes(range(256)) * 64  # 16 KiB


def test_url_fetch_symlinks_cached_download_and_downloads_once(file_server, tmp_path):
    file_server.files["/models/asr/model.ckpt"] = PAYLOAD
    source = f"{file_server.url}/models/asr"
    first = fetch("model.ckpt", source, tmp_path / "a")
    second = fetch("model.ckpt", source, tmp_path / "b")
    assert first.read_bytes() == PAYLOAD and second.read_bytes() == PAYLOAD
    assert first.is_symlink() and os.path.realpath(first) == os.path.realpath(second)
    # The second fetch revalidated the cached copy: one conditional request answered 304, no body sent.
    assert file_server.gets("/models/asr/model.ckpt") == 2
    assert file_server.not_modified["/models/asr/model.ckpt"] == 1


def test_url_fetch_checks_sha256(file_server, tmp_path):
    file_server.files["/m/w.bin"] = PAYLOAD
    good = hashlib.sha256(PAYLOAD).hexdigest()
    with pytest.raises(FetchError, match=r"w\.bin.*sha256"):
        fetch("w.bin", f"{file_server.url}/m", tmp_path / "s", sha256="0" * 64)
    assert not url_cache_path(f"{file_server.url}/m/w.bin", "w.bin").exists()
    assert fetch("w.bin", f"{file_server.url}/m", tmp_path / "s", sha256=good).read_bytes() == PAYLOAD


def test_url_missing_file_names_file_and_url(file_server, tmp_path):
    with pytest.raises(FetchError, match=r"'nothere\.ckpt'.*404"):
        fetch("nothere.ckpt", f"{file_server.url}/m", tmp_path / "s")


def _cut_download(file_server, tmp_path, path="/m/big.ckpt", data=PAYLOAD, cut=5000):
    """A fetch of ``path`` whose connection drops after ``cut`` bytes; returns the cache path."""
    file_server.files[path] = data
    file_server.drop_after[path] = cut
    cut_message = r"big\.ckpt.*interrupted after 5000 of 16384 bytes; the next fetch resumes"
    with pytest.raises(FetchError, match=cut_message):
        fetch("big.ckpt", f"{file_server.url}/m", tmp_path / "s")
    del file_server.drop_after[path]
    return url_cache_path(f"{file_server.url}{path}", "big.ckpt")


def test_dropped_connection_leaves_nothing_taken_as_complete_and_resumes(file_server, tmp_path):
    cached = _cut_download(file_server, tmp_path)
    assert not cached.exists() and not (tmp_path / "s" / "big.ckpt").exists()
    assert (cached.parent / ".big.ckpt.part").stat().st_size == 5000
    # The next attempt asks for the missing bytes only, and ends with the exact file and no leftovers.
    good = hashlib.sha256(PAYLOAD).hexdigest()
    assert fetch("big.ckpt", f"{file_server.url}/m", tmp_path / "s", sha256=good).read_bytes() == PAYLOAD
    assert file_server.range_requests == [None, "bytes=5000-"]
    leftovers = sorted(p.name for p in cached.parent.iterdir() if not p.name.endswith(".lock"))
    assert leftovers == [".big.ckpt.validator.json", "big.ckpt"]  # the file and its ETag, nothing else


def test_resume_restarts_when_the_file_changed_or_ranges_are_ignored(file_server, tmp_path):
    cached = _cut_download(file_server, tmp_path)
    changed = PAYLOAD[::-1]
    file_server.files["/m/big.ckpt"] = changed  # new ETag: If-Range makes the server send all of it
    assert fetch("big.ckpt", f"{file_server.url}/m", tmp_path / "s").read_bytes() == changed
    assert file_server.range_requests[-1] == "bytes=5000-"
    cached.unlink()
    _cut_download(file_server, tmp_path, data=PAYLOAD)
    file_server.ranges = False  # answers 200 with the whole file to a range request
    assert fetch("big.ckpt", f"{file_server.url}/m", tmp_path / "s2").read_bytes() == PAYLOAD


def test_resumed_download_with_a_wrong_sha256_is_removed(file_server, tmp_path):
    cached = _cut_download(file_server, tmp_path)
    with pytest.raises(FetchError, match=r"big\.ckpt.*sha256 [0-9a-f]{64} does not match"):
        fetch("big.ckpt", f"{file_server.url}/m", tmp_path / "s", sha256="0" * 64)
    assert not [p for p in cached.parent.iterdir() if not p.name.endswith(".lock")]
    assert fetch("big.ckpt", f"{file_server.url}/m", tmp_path / "s").read_bytes() == PAYLOAD


def test_hub_download_cut_mid_file_resumes_to_the_exact_file(hub_server, tmp_path):
    data = PAYLOAD * 4
    hub_server.repos["org/asr"] = {"main": {"model.ckpt": data}}
    hub_server.drops_left, hub_server.drop_after = 1, 10000
    path = fetch("model.ckpt", "org/asr", tmp_path / "s")
    assert path.read_bytes() == data
    commit = hub_server.commit_of("org/asr", "main")
    assert hub_server.gets("/org/asr/resolve/main/model.ckpt") + hub_server.gets(
        f"/org/asr/resolve/{commit}/model.ckpt") == 2  # the cut one, then the resumed rest
    blobs = list((tmp_path / "hf-cache").glob("models--org--asr/blobs/*"))
    assert [b.name.endswith(".incomplete") for b in blobs] == [False]


def test_hub_fetch_with_revision(hub_server, tmp_path):
    hub_server.repos["org/asr"] = {"main": {"model.ckpt": b"new"}, "v1": {"model.ckpt": b"old"}}
    assert fetch("model.ckpt", "org/asr", tmp_path / "main").read_bytes() == b"new"
    assert fetch("model.ckpt", "org/asr", tmp_path / "v1", revision="v1").read_bytes() == b"old"
    commit = hub_server.commit_of("org/asr", "v1")
    assert fetch("model.ckpt", "org/asr", tmp_path / "c", revision=commit).read_bytes() == b"old"
    with pytest.raises(FetchError, match=r"'absent\.ckpt'.*org/asr.*no such file"):
        fetch("absent.ckpt", "org/asr", tmp_path / "x")


def test_hub_offline_serves_cache_or_names_missing_file(hub_server, tmp_path, monkeypatch):
    hub_server.repos["org/asr"] = {"main": {"model.ckpt": PAYLOAD, "other.ckpt": b"x"}}
    fetch("model.ckpt", "org/asr", tmp_path / "online")
    gets_before = sum(hub_server.counts.values())
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert fetch("model.ckpt", "org/asr", tmp_path / "offline").read_bytes() == PAYLOAD
    with pytest.raises(FetchError, match=r"offline.*'other\.ckpt'.*Hugging Face repo 'org/asr'"):
        fetch("other.ckpt", "org/asr", tmp_path / "offline")
    assert sum(hub_server.counts.values()) == gets_before  # offline means no request at all


def test_url_offline_serves_cache_or_names_missing_file(file_server, tmp_path):
    file_server.files["/m/a.ckpt"] = b"a"
    fetch("a.ckpt", f"{file_server.url}/m", tmp_path / "s")
    assert fetch("a.ckpt", f"{file_server.url}/m", tmp_path / "t", allow_network=False).read_bytes() == b"a"
    with pytest.raises(FetchError, match=r"offline.*'b\.ckpt'.*/m/b\.ckpt"):
        fetch("b.ckpt", f"{file_server.url}/m", tmp_path / "t", allow_network=False)
    assert file_server.gets("/m/a.ckpt") == 1


def test_name_collision_resolved_by_fetch_source(hub_server, tmp_path, monkeypatch):
    hub_server.repos["org/asr"] = {"main": {"model.ckpt": b"from-hub"}}
    local = tmp_path / "org" / "asr"
    local.mkdir(parents=True)
    (local / "model.ckpt").write_bytes(b"from-disk")
    monkeypatch.chdir(tmp_path)  # now "org/asr" names both an existing folder and a repo
    assert fetch("model.ckpt", "org/asr", tmp_path / "guess").read_bytes() == b"from-disk"
    forced = FetchSource(FetchFrom.HUGGING_FACE, "org/asr")
    assert fetch("model.ckpt", forced, tmp_path / "hub").read_bytes() == b"from-hub"
    assert fetch("model.ckpt", FetchSource("local", "org/asr"), tmp_path / "loc").read_bytes() == b"from-disk"


def test_local_strategies_and_copy_fallback(tmp_path, monkeypatch):
    source = tmp_path / "model"
    source.mkdir()
    (source / "w.ckpt").write_bytes(b"w")
    linked = fetch("w.ckpt", str(source), tmp_path / "link")
    assert linked.is_symlink() and linked.read_bytes() == b"w"
    copied = fetch("w.ckpt", str(source), tmp_path / "copy", strategy="copy")
    assert not copied.is_symlink() and copied.read_bytes() == b"w"
    in_place = fetch("w.ckpt", str(source), None, strategy="in_place")
    assert in_place == source / "w.ckpt"

    def refuse(*args, **kwargs):
        raise OSError(95, "Operation not supported")

    monkeypatch.setattr(os, "symlink", refuse)  # a file system that refuses links
    fallback = fetch("w.ckpt", str(source), tmp_path / "nolinks")
    assert not fallback.is_symlink() and fallback.read_bytes() == b"w"


def test_symlink_chains_resolve_to_real_file_and_refetch_repoints(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "w.ckpt").write_bytes(b"1")
    alias = tmp_path / "alias"
    alias.symlink_to(real)
    out = fetch("w.ckpt", str(alias), tmp_path / "save")
    assert os.readlink(out) == str(real / "w.ckpt")
    other = tmp_path / "other"
    other.mkdir()
    (other / "w.ckpt").write_bytes(b"2")
    assert fetch("w.ckpt", str(other), tmp_path / "save").read_bytes() == b"2"
    # Fetching a file into its own folder leaves it alone rather than linking it to itself.
    assert fetch("w.ckpt", str(other), other).read_bytes() == b"2" and not (other / "w.ckpt").is_symlink()


def test_local_missing_file_names_file_and_folder(tmp_path):
    with pytest.raises(FetchError, match=r"'x\.ckpt'.*local folder"):
        fetch("x.ckpt", str(tmp_path), tmp_path / "s")


@pytest.mark.parametrize("kind", ["url", "hub"])
def test_two_processes_fetching_at_once_download_once(kind, file_server, hub_server, tmp_path):
    data = PAYLOAD * 8  # 128 KiB, served slowly so that both processes overlap
    if kind == "url":
        file_server.files["/m/shared.ckpt"] = data
        file_server.delay_s = 0.01
        source, counted = f"{file_server.url}/m", "/m/shared.ckpt"
    else:
        hub_server.repos["org/shared"] = {"main": {"shared.ckpt": data}}
        hub_server.delay_s = 0.01
        source = "org/shared"
        counted = f"/org/shared/resolve/{hub_server.commit_of('org/shared', 'main')}/shared.ckpt"
    # Both processes start fetching at the same moment (a start line), so the download of one overlaps the
    # other's attempt: the second must wait on the lock and reuse the file.
    script = textwrap.dedent(f"""
        import pathlib, sys, time
        from speechkit.pretrained.sources.fetching import fetch
        pathlib.Path(sys.argv[2]).touch()
        while not pathlib.Path({str(tmp_path / "go")!r}).exists():
            time.sleep(0.005)
        path = fetch("shared.ckpt", {source!r}, sys.argv[1])
        assert path.stat().st_size == {len(data)}
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / f"rank{i}"),
                               str(tmp_path / f"ready{i}")], env=os.environ.copy()) for i in range(2)]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready{i}").exists() for i in range(2)) and time.monotonic() < deadline:
        time.sleep(0.01)
    (tmp_path / "go").touch()
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    main_gets = file_server.gets(counted) if kind == "url" else hub_server.gets(counted) + hub_server.gets(
        "/org/shared/resolve/main/shared.ckpt")
    assert main_gets == 1
