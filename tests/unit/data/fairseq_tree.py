"""A folder of FLACs with known sample counts, for the fairseq manifest tests (library and command)."""
from __future__ import annotations

import pytest
import torch

from speechkit.data import audio


@pytest.fixture
def tree(tmp_path):
    """Three FLAC files in two speaker folders, with known sample counts."""
    root = tmp_path / "corpus"
    sizes = {"s1/u1.flac": 1600, "s1/u2.flac": 3203, "s2/u3.flac": 800}
    for relative, samples in sizes.items():
        audio.write(root / relative, torch.zeros(samples), 16000)
    return root, sizes
