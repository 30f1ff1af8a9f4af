"""The ledger (flush policy, torn lines, redo, one process per shard) and the atomic outputs."""
from __future__ import annotations

import json

import pytest

from speechkit.errors import JobError
from speechkit.jobs import ledger as ledger_module
from speechkit.jobs.ledger import Ledger, ledger_path, read_ledger
from speechkit.jobs.outputs import file_digest, output_is_intact, output_name, write_atomic


def _rows(path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rows_are_appended_every_n_items_and_on_close(tmp_path):
    path = ledger_path(tmp_path, 1, 4)
    assert path.name == "shard-00001-of-00004.jsonl"
    with Ledger(path, flush_every=3, flush_seconds=1e9) as ledger:
        assert ledger.open_run() == 1
        ledger.record("a", {"text": "x"})
        ledger.record("b", {"text": "y"})
        assert [r.get("id") for r in _rows(path)] == [None]  # only the run row so far
        ledger.record("c", {"text": "z"})
        assert [r.get("id") for r in _rows(path)] == [None, "a", "b", "c"]
        ledger.record("d", {"text": "w"})
    assert [r.get("id") for r in _rows(path)] == [None, "a", "b", "c", "d"]
    assert read_ledger(path).records["d"]["text"] == "w"


def test_rows_are_appended_when_the_flush_interval_has_passed(tmp_path, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(ledger_module.time, "monotonic", lambda: now[0])
    path = tmp_path / "l.jsonl"
    with Ledger(path, flush_every=1000, flush_seconds=30.0) as ledger:
        ledger.open_run()
        ledger.record("a", {})
        now[0] += 29.0
        ledger.record("b", {})
        assert len(_rows(path)) == 1
        now[0] += 1.5
        ledger.record("c", {})
        assert [r.get("id") for r in _rows(path)] == [None, "a", "b", "c"]


def test_a_torn_last_line_is_ignored_then_cut_by_the_next_run(tmp_path):
    path = tmp_path / "l.jsonl"
    with Ledger(path, flush_every=1) as ledger:
        ledger.open_run()
        ledger.record("a", {})
    with open(path, "a") as handle:
        handle.write('{"id": "b", "ru')  # a kill in the middle of a write
    contents = read_ledger(path)
    assert list(contents.records) == ["a"] and len(contents.runs) == 1
    with Ledger(path, flush_every=1) as ledger:
        assert ledger.open_run() == 2 and set(ledger.done) == {"a"}
        ledger.record("b", {})
    assert [(r.get("id"), r["run"]) for r in _rows(path)] == [(None, 1), ("a", 1), (None, 2), ("b", 2)]


def test_a_damaged_middle_line_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text('{"run": 1, "started": 0}\nnot json\n{"id": "a", "run": 1}\n')
    with pytest.raises(JobError, match=r"l\.jsonl, line 2: not a ledger row"):
        read_ledger(path)


def test_redo_rows_and_duplicates(tmp_path):
    path = tmp_path / "l.jsonl"
    with Ledger(path, flush_every=1) as ledger:
        ledger.open_run()
        ledger.record("a", {"n": 1})
        ledger.record("b", {"n": 1})
        ledger.redo(["a"])
        assert "a" not in ledger.done
        ledger.record("a", {"n": 2})
    contents = read_ledger(path)
    assert contents.duplicates == [] and contents.records["a"]["n"] == 2
    with open(path, "a") as handle:  # recorded again without a redo: done twice
        handle.write(json.dumps({"id": "b", "run": 1}) + "\n")
    assert read_ledger(path).duplicates == ["b"]


def test_one_process_per_shard(tmp_path):
    path = tmp_path / "l.jsonl"
    first = Ledger(path)
    first.open_run()
    with pytest.raises(JobError, match=r"l\.lock: this shard is being run by pid \d+"):
        Ledger(path).open_run()
    first.close()
    second = Ledger(path)
    assert second.open_run() == 2  # released by close (and by the kernel when a process dies)
    second.close()


def test_bad_flush_settings():
    with pytest.raises(JobError, match="flush_every must be >= 1"):
        Ledger("x", flush_every=0)


@pytest.mark.parametrize("item_id", ["../../etc/passwd", "a/b", "/abs", ".hidden", "x" * 300, "sp ace"])
def test_output_names_never_leave_the_output_folder(item_id):
    name = output_name(item_id, ".npy")
    parts = name.split("/")
    assert parts[0] == "outputs" and len(parts) == 3 and not parts[2].startswith(".")
    assert len(parts[2]) < 150 and name.endswith(".npy")


def test_output_names_of_different_ids_differ():
    ids = ["a/b", "a_b", "a b", "A_b", "x" * 300, "x" * 301]
    assert len({output_name(i, ".npy") for i in ids}) == len(ids)
    assert output_name("utt1", ".flac") == "outputs/1a/utt1.flac"


def test_atomic_write_leaves_nothing_on_failure_and_records_size_and_checksum(tmp_path):
    target = tmp_path / "outputs" / "ab" / "x.bin"

    def failing(path):
        path.write_bytes(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_atomic(target, failing)
    assert list(target.parent.iterdir()) == []
    info = write_atomic(target, lambda path: path.write_bytes(b"whole"))
    assert info == file_digest(target) and info["bytes"] == 5
    record = {"output": "outputs/ab/x.bin", **info}
    assert output_is_intact(tmp_path, record, verify=True)
    target.write_bytes(b"WHOLE")  # same size, other bytes: only a checksum sees it
    assert output_is_intact(tmp_path, record) and not output_is_intact(tmp_path, record, verify=True)
    target.write_bytes(b"who")
    assert not output_is_intact(tmp_path, record)
    target.unlink()
    assert not output_is_intact(tmp_path, record)
