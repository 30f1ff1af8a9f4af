"""Shared test configuration: fixtures every area may use."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
# The tests' models are tiny: one thread per process is faster than several, and the multi-process tests
# (which inherit this) would otherwise oversubscribe the cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def _deterministic_torch():
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    yield
