"""The separation recipe with ``held_out_engine``: test_engine mixtures pair a voice of the engine training
never heard with a test voice, and ``--test_set test_engine`` scores them into their own report."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.recipes.recipe_helpers import run_script, separation_args, write_speaker_corpus

pytestmark = pytest.mark.slow

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "SynthSpeech" / "separation"


def test_engine_mixtures_are_written_and_scored_on_their_own(tmp_path):
    corpus = write_speaker_corpus(tmp_path / "corpus", engine_speakers=("x", "y"))
    output = tmp_path / "run"
    args = separation_args(corpus, output, "--held_out_engine", "festival", "--num_test_engine_mixtures", "6")
    run_script(RECIPE / "train.py", args, timeout=600)
    assert (output / "separation_test.txt").read_text().startswith("mixtures: 7")
    run_script(RECIPE / "train.py", [*args, "--test_only", "--test_set", "test_engine"], timeout=600)
    assert (output / "separation_test_engine.txt").read_text().startswith("mixtures: 6")
    mixtures = json.loads((corpus / "mixtures-2spk-8000" / "test_engine.json").read_text())
    pairs = [(row["s1_spk"], row["s2_spk"]) for row in mixtures.values()]
    assert len(pairs) == 6 and all(first in "xy" and second in "ghixy" and first != second
                                   for first, second in pairs)
    assert any(second in "ghi" for _, second in pairs)

