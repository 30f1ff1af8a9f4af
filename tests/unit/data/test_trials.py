"""Trial lists: labels, kinds, no repeated pair, the file round trip and malformed files."""
from __future__ import annotations

import pytest

from speechkit.data.trials import make_trials, read_trials, write_trials
from speechkit.errors import DataError

ROWS = {f"{spk}-{i}": {"spk": spk, "engine": engine} for spk, engine in
        (("a", "flite"), ("b", "flite"), ("c", "espeak"), ("d", "espeak")) for i in range(5)}


def test_trials_are_labelled_by_speaker_and_engine():
    trials = make_trials(ROWS, targets_per_utt=2, nontargets_per_utt=4, seed=1)
    for trial in trials:
        same = ROWS[trial.enrol]["spk"] == ROWS[trial.test]["spk"]
        assert trial.label == int(same)
        if not same:
            same_engine = ROWS[trial.enrol]["engine"] == ROWS[trial.test]["engine"]
            assert trial.kind == ("same_engine" if same_engine else "cross_engine")
    pairs = [frozenset((t.enrol, t.test)) for t in trials]
    assert len(pairs) == len(set(pairs)) and all(len(p) == 2 for p in pairs)
    kinds = {k: sum(t.kind == k for t in trials) for k in ("target", "same_engine", "cross_engine")}
    assert all(count > 10 for count in kinds.values())
    assert make_trials(ROWS, seed=1) == make_trials(ROWS, seed=1)


def test_round_trip_and_bad_files(tmp_path):
    trials = make_trials(ROWS, seed=0)
    path = write_trials(trials, str(tmp_path / "trials.txt"))
    assert read_trials(path, set(ROWS)) == trials
    (tmp_path / "vox.txt").write_text("1 a-0 a-1\n0 a-0 c-1\n")
    assert [t.kind for t in read_trials(str(tmp_path / "vox.txt"))] == ["target", "nontarget"]
    (tmp_path / "bad.txt").write_text("1 a-0 a-1 target\n2 a-0 b-1\n")
    with pytest.raises(DataError, match="bad.txt, line 2"):
        read_trials(str(tmp_path / "bad.txt"))
    (tmp_path / "z.txt").write_text("0 zz a-0\n")
    with pytest.raises(DataError, match="line 1: utterance 'zz'"):
        read_trials(str(tmp_path / "z.txt"), set(ROWS))
    with pytest.raises(DataError, match="two speakers"):
        make_trials({"x": {"spk": "a"}, "y": {"spk": "a"}})


def test_rows_sharing_a_recording_are_never_paired():
    # Strings of two speakers cut from 4 takes each: a and b share take "a1", so do c and d ("b1", as a list).
    rows = {"a": {"spk": "x", "sources": "x0 x1"}, "b": {"spk": "x", "sources": "x1 x2"},
            "c": {"spk": "x", "sources": "x3"}, "d": {"spk": "y", "sources": ["y0", "y1"]},
            "e": {"spk": "y", "sources": ["y1"]}, "f": {"spk": "y", "sources": "y2 y3"}}
    trials = make_trials(rows, targets_per_utt=5, nontargets_per_utt=5, seed=0, source_key="sources")
    pairs = {frozenset((t.enrol, t.test)) for t in trials}
    assert frozenset("ab") not in pairs and frozenset("de") not in pairs
    # Every other pair of the speaker is a target, every cross-speaker pair a non-target.
    assert {p for p in pairs if len({rows[u]["spk"] for u in p}) == 1} == {
        frozenset("ac"), frozenset("bc"), frozenset("df"), frozenset("ef")}
    assert sum(t.label == 0 for t in trials) == 9
    assert frozenset("ab") in {frozenset((t.enrol, t.test)) for t in make_trials(rows, 5, 5, seed=0)}


@pytest.mark.parametrize("value", [None, "", [], [3], {"x": 1}])
def test_rows_without_usable_sources_are_refused_by_id(value):
    rows = {"a": {"spk": "x", "sources": "x0"}, "b": {"spk": "y", "sources": value}}
    if value is None:
        del rows["b"]["sources"]
    with pytest.raises(DataError, match="item 'b': 'sources' must name the recordings"):
        make_trials(rows, source_key="sources")
