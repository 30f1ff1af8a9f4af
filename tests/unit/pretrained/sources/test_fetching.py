"""fetch() argument handling and source resolution (no network)."""
from __future__ import annotations

import pytest

from speechkit.errors import FetchError
from speechkit.pretrained.sources.fetching import FetchFrom, FetchSource, as_strategy, fetch, resolve_source


def test_resolve_source_kinds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_source("https://h/x").kind is FetchFrom.URL
    assert resolve_source("http://h/x").kind is FetchFrom.URL
    assert resolve_source("org/model").kind is FetchFrom.HUGGING_FACE
    (tmp_path / "org" / "model").mkdir(parents=True)
    assert resolve_source("org/model").kind is FetchFrom.LOCAL  # an existing folder wins
    assert resolve_source("./relative").kind is FetchFrom.LOCAL
    assert resolve_source(tmp_path).kind is FetchFrom.LOCAL
    forced = FetchSource(FetchFrom.HUGGING_FACE, "org/model")
    assert resolve_source(forced) is forced
    assert FetchSource("HUGGING_FACE", "x").kind is FetchFrom.HUGGING_FACE


def test_bad_arguments_raise_fetch_errors(tmp_path):
    (tmp_path / "w.ckpt").write_bytes(b"w")
    with pytest.raises(FetchError, match="unknown fetch strategy 'hardlink'"):
        fetch("w.ckpt", str(tmp_path), tmp_path / "s", strategy="hardlink")
    with pytest.raises(FetchError, match="savedir is required"):
        fetch("w.ckpt", str(tmp_path), None)
    with pytest.raises(FetchError, match=r"sha256.*expected 0+"):
        fetch("w.ckpt", str(tmp_path), tmp_path / "s", sha256="0" * 64)
    assert as_strategy("in-place").value == "in_place"


def test_missing_local_repo_like_name_hints_at_fetch_source(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "model").mkdir(parents=True)
    with pytest.raises(FetchError, match=r"'w\.ckpt'.*FetchSource\('huggingface', 'org/model'\)"):
        fetch("w.ckpt", "org/model", tmp_path / "s")
