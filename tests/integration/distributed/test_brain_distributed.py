"""speechkit.Brain under several processes: training covers every item, evaluation equals one process exactly,
and a rank that raises mid-epoch stops every rank."""
from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "scripts" / "tiny_train.py"


def write_hparams(folder: Path, **values) -> Path:
    hparams = {"output_folder": str(folder / "out"), "n_train": 14, "n_test": 9, "epochs": 2, "batch_size": 2,
               "mode": "fit", "noprogressbar": True, **values}
    path = folder / "hp.yaml"
    path.write_text("".join(f"{key}: {json.dumps(value)}\n" for key, value in hparams.items()))
    return path


def test_torchrun_training_sees_every_item_once_per_epoch(tmp_path, processes, make_env, torchrun_exe):
    hparams = write_hparams(tmp_path)
    group = processes()
    group.start([torchrun_exe, "--standalone", "--nproc_per_node=2", str(SCRIPT), str(hparams)], make_env())
    [(code, output, _)] = group.wait()
    assert code == 0, output
    out = tmp_path / "out"
    assert (out / "done.2").exists()
    for epoch in (1, 2):
        per_rank = [Path(p).read_text().split() for p in sorted(out.glob(f"seen/epoch{epoch}.rank*.txt"))]
        assert len(per_rank) == 2 and len(per_rank[0]) == len(per_rank[1]) == 7  # equal batches per rank
        assert collections.Counter(per_rank[0] + per_rank[1]) == collections.Counter(
            f"tr{i:03d}" for i in range(14))


def test_torchrun_dynamic_batches_are_full_equal_in_count_and_cover_every_item(tmp_path, processes, make_env,
                                                                              torchrun_exe):
    # 40 items of 1-5 s in batches of at most 12 padded seconds, dealt to 3 ranks in steps of neighbouring
    # lengths (docs/batching.md, Dynamic batching)
    hparams = write_hparams(tmp_path, n_train=40, dynamic_batching={"max_batch_length": 12.0})
    group = processes()
    group.start([torchrun_exe, "--standalone", "--nproc_per_node=3", str(SCRIPT), str(hparams)], make_env())
    [(code, output, _)] = group.wait()
    assert code == 0, output
    out = tmp_path / "out"
    durations = {f"tr{i:03d}": float(1 + (i * 7) % 5) for i in range(40)}
    for epoch in (1, 2):
        files = sorted(out.glob(f"seen/epoch{epoch}.rank*.txt"))
        per_rank = [path.read_text().splitlines() for path in files]
        assert len(per_rank) == 3 and len({len(batches) for batches in per_rank}) == 1  # one batch a line
        batches = [line.split() for batches in per_rank for line in batches]
        assert collections.Counter(sum(batches, [])) == collections.Counter(list(durations))
        assert all(len(batch) * max(durations[name] for name in batch) <= 12.0 for batch in batches)


def test_brain_rank_raising_mid_epoch_stops_every_rank(tmp_path, processes, make_env, get_port):
    hparams = write_hparams(tmp_path, fail_rank=1, fail_step=2, step_sleep=0.3, n_train=60)
    env = make_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=get_port())
    group = processes(timeout=90)
    for worker_id in (0, 1):
        group.start([sys.executable, str(SCRIPT), "--worker-id", str(worker_id), "--num-workers", "2", "--",
                     str(hparams)], env)
    (code0, out0, secs0), (code1, out1, _) = group.wait()
    assert code1 != 0 and "injected failure at step 2" in out1
    assert code0 != 0 and "rank 1 failed" in out0, out0
    assert secs0 < 60


def _error_rate_stats_available() -> bool:
    try:
        from speechkit.metrics import ErrorRateStats  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _error_rate_stats_available(), reason="waits on speechkit.metrics.ErrorRateStats")
def test_two_workers_evaluate_an_odd_test_set_exactly_like_one(tmp_path, processes, make_env, torchrun_exe):
    results = {}
    for label, workers, batch_size in (("one", 1, 1), ("two", 2, 2)):
        folder = tmp_path / label
        folder.mkdir()
        hparams = write_hparams(folder, mode="evaluate", n_test=9, batch_size=batch_size)
        group = processes()
        if workers == 1:
            group.start([sys.executable, str(SCRIPT), str(hparams)], make_env())
        else:
            group.start([torchrun_exe, "--standalone", f"--nproc_per_node={workers}", str(SCRIPT),
                         str(hparams)], make_env())
        [(code, output, _)] = group.wait()
        assert code == 0, output
        results[label] = (json.loads((folder / "out" / "eval.json").read_text()),
                          (folder / "out" / "wer.txt").read_text())
    (one, one_report), (two, two_report) = results["one"], results["two"]
    assert two["world_size"] == 2
    assert one["summary"] == two["summary"]  # WER and every count, exactly
    assert 0 < one["summary"]["WER"] < 100  # the test 'decoder' makes some errors, not only errors
    assert one_report == two_report  # the per-utterance report, byte for byte
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-6)  # float sums in another order
    assert "te008" in one_report and "te000" in one_report
