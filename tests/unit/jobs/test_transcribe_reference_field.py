"""The transcribe task scores against the field speechkit's manifests write (text), else words, or the one
named; without references in every row it writes transcripts and no WER."""
from __future__ import annotations

import pytest

from speechkit.jobs.tasks import TranscribeTask

RECORDS = {"a": {"text": "HELLO WORLD"}, "b": {"text": "GOOD MORNING"}}


@pytest.mark.parametrize("field", ["text", "words"])
def test_the_reference_field_is_found_without_being_named(tmp_path, field):
    fields = {"a": {field: "HELLO WORLD"}, "b": {field: "GOOD EVENING"}}
    summary = TranscribeTask().merge(tmp_path, RECORDS, fields)
    assert summary["WER"] == 25.0 and summary["num_scored_tokens"] == 4
    assert field in TranscribeTask().keep_fields


def test_a_named_field_is_the_only_one_used_and_missing_references_give_no_wer(tmp_path):
    fields = {"a": {"text": "HELLO WORLD", "ref": "HELLO"}, "b": {"text": "GOOD MORNING", "ref": "GOOD"}}
    assert TranscribeTask(text_field="ref").merge(tmp_path, RECORDS, fields)["WER"] == 100.0
    assert "WER" not in TranscribeTask().merge(tmp_path, RECORDS, {"a": {"text": "HELLO"}, "b": {}})
    assert (tmp_path / "transcripts.txt").read_text().splitlines() == ["a\tHELLO WORLD", "b\tGOOD MORNING"]
