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
