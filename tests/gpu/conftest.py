"""Tests of the CUDA paths. Each one is skipped, with its reason, where no CUDA device is visible (CI);
``benchmarks/gpu_suite.sh`` runs them on a GPU machine."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.processes import clean_env

HAS_CUDA = torch.cuda.is_available()
GPUS = torch.cuda.device_count() if HAS_CUDA else 0
SCRIPTS = Path(__file__).resolve().parents[1] / "integration" / "distributed" / "scripts"


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (run benchmarks/gpu_suite.sh on a GPU machine)")
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(skip)


@pytest.fixture
def gpu_env():
    """``gpu_env(**extra)``: a clean environment for worker processes that keeps the visible GPUs."""

    def make(**extra) -> dict:
        env = clean_env(**extra)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if "CUDA_VISIBLE_DEVICES" not in extra:
            if visible is None:
                env.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                env["CUDA_VISIBLE_DEVICES"] = visible
        return env

    return make


@pytest.fixture
def plain_worker() -> list:
    """The command prefix of the plain torch worker that every launcher test starts."""
    return [sys.executable, str(SCRIPTS / "plain_worker.py")]
