"""A separator, a features model and a manifest, for the audio job tests (library and command)."""
from __future__ import annotations

import pytest

from tests.helpers.job_models import write_features_model, write_manifest, write_separation_model

ITEMS = 7  # not a multiple of the batch sizes the tests use


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("audio-job-files")
    return {"separator": write_separation_model(folder / "separator"),
            "features": write_features_model(folder / "features"),
            "manifest": write_manifest(folder / "data", count=ITEMS, max_words=3)}
