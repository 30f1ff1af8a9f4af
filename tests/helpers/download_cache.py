"""An autouse fixture for tests that fetch models: each test gets its own download cache, and requests to
the local test servers never go through a proxy set in the environment."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(monkeypatch, tmp_path):
    """Keep every test's downloads inside its tmp_path and away from any proxy."""
    monkeypatch.setenv("SPEECHKIT_CACHE", str(tmp_path / "speechkit-cache"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
