"""Shared test configuration: fixtures every area may use."""
from __future__ import annotations

import os

import pytest

# Tests run on CPU and must not pick up a user's GPU settings or network.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


@pytest.fixture(autouse=True)
def _deterministic_torch():
    import torch

    torch.manual_seed(0)
    yield
