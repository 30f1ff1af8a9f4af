"""Fixtures of the recipe smoke tests."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.recipes.recipe_helpers import write_corpus


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    """36 tone-and-noise utterances in the built-in corpus layout (24 train, 4 valid, 12 test)."""
    return write_corpus(tmp_path_factory.mktemp("corpus"))
