"""tools/error_by_speaking_rate.py: groups a real ErrorRateStats report by speaking rate, names bad input."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from speechkit.metrics import ErrorRateStats
from tests.helpers.scripts import load_script

TOOL = Path(__file__).parents[2] / "tools" / "error_by_speaking_rate.py"


def load_tool():
    return load_script(TOOL)


def test_groups_are_ordered_by_rate_and_count_each_utterance_once(tmp_path, capsys):
    # Fast utterances (short durations) lose words, slow ones are right.
    stats = ErrorRateStats()
    references = {"slow-1": "A B C D", "slow-2": "E F G H", "fast-1": "I J K L", "fast-2": "M N O P"}
    hypotheses = {"slow-1": "A B C D", "slow-2": "E F G H", "fast-1": "I J", "fast-2": "M X O P"}
    stats.append(list(references), [hypotheses[i] for i in references], list(references.values()))
    stats.summarize()
    stats.write_stats(tmp_path / "wer.txt")
    manifest = {uid: {"duration": 4.0 if uid.startswith("slow") else 0.5, "text": text}
                for uid, text in references.items()}
    (tmp_path / "test.json").write_text(json.dumps(manifest))
    assert load_tool().main([str(tmp_path / "wer.txt"), str(tmp_path / "test.json"), "--groups", "2"]) == 0
    rows = [line.split("|") for line in capsys.readouterr().out.splitlines()[1:]]
    assert [(r[1].strip(), r[2].strip(), r[3].strip(), r[5].strip(), r[6].strip()) for r in rows] == [
        ("2", "8", "0.0", "0", "0"),     # slow: 7 chars / 4 s
        ("2", "8", "37.5", "2", "1"),    # fast: 2 deletions + 1 substitution in 8 words
    ]


def test_ids_missing_from_the_manifest_are_named(tmp_path):
    stats = ErrorRateStats()
    stats.append(["utt-1"], ["A"], ["A"])
    stats.summarize()
    stats.write_stats(tmp_path / "wer.txt")
    (tmp_path / "test.json").write_text(json.dumps({"other": {"duration": 1.0, "text": "A"}}))
    with pytest.raises(SystemExit, match="'utt-1'"):
        load_tool().main([str(tmp_path / "wer.txt"), str(tmp_path / "test.json")])
    (tmp_path / "empty.txt").write_text("no report here\n")
    with pytest.raises(SystemExit, match="empty.txt: no per-utterance lines"):
        load_tool().main([str(tmp_path / "empty.txt"), str(tmp_path / "test.json")])
