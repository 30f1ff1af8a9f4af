"""Fixtures shared by the diarization tests."""
from __future__ import annotations

import pytest

from tests.unit.diarization.tone_speakers import write_tone_rows


@pytest.fixture(scope="module")
def tone_rows(tmp_path_factory):
    """Utterances of four tone 'speakers' (one pitch and timbre each)."""
    return write_tone_rows(tmp_path_factory.mktemp("tones"))
