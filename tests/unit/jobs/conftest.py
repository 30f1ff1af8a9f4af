"""A tiny exact ASR model folder and a 23-item manifest (not a multiple of any batch size the tests use)."""
from __future__ import annotations

import pytest

from tests.helpers.job_models import write_manifest, write_model


@pytest.fixture(scope="module")
def job_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("job-files")
    return write_model(folder / "model"), write_manifest(folder / "data", count=23)
