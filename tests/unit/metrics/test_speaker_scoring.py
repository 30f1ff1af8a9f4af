"""Cosine scoring, AS-norm against its formula, and VerificationStats: the same summary from two real
processes (each embedding a shard, one item on both) as from one."""
from __future__ import annotations

import multiprocessing
import os

import pytest
import torch
import torch.nn.functional as F

from speechkit.data.trials import make_trials
from speechkit.errors import DataError
from speechkit.metrics.speaker_scoring import VerificationStats, as_norm, cosine_scores, format_summary

ROWS = {f"{spk}-{i}": {"spk": spk, "engine": "ab"[s % 2]} for s, spk in enumerate("pqrst") for i in range(4)}


def _embeddings():
    generator = torch.Generator().manual_seed(0)
    centres = torch.randn(5, 8, generator=generator)
    return {utt_id: centres["pqrst".index(utt_id[0])] + 0.6 * torch.randn(8, generator=generator)
            for utt_id in sorted(ROWS)}


def test_as_norm_follows_its_formula():
    generator = torch.Generator().manual_seed(1)
    enrol, test, cohort = (torch.randn(n, 6, generator=generator) for n in (3, 3, 10))
    scores = cosine_scores(enrol, test)
    torch.testing.assert_close(scores, F.cosine_similarity(enrol, test))
    got = as_norm(scores, enrol, test, cohort, top_k=4)
    for i in range(3):
        e = (F.normalize(enrol[i], dim=0) @ F.normalize(cohort, dim=1).T).topk(4).values
        t = (F.normalize(test[i], dim=0) @ F.normalize(cohort, dim=1).T).topk(4).values
        expected = 0.5 * ((scores[i] - e.mean()) / e.std() + (scores[i] - t.mean()) / t.std())
        torch.testing.assert_close(got[i], expected)
    with pytest.raises(DataError, match="cohort"):
        as_norm(scores, enrol, test, cohort[:1])


def _summary(shard_ids, trials, cohort):
    stats = VerificationStats(top_k=3)
    embeddings = _embeddings()
    stats.append(shard_ids, torch.stack([embeddings[i] for i in shard_ids]))
    return stats.summarize(trials, cohort)


def _worker(rank, init_file, out_dir):
    import torch.distributed as torch_dist

    torch_dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    ids = sorted(ROWS)
    shard = ids[: len(ids) // 2 + 1] if rank == 0 else ids[len(ids) // 2:]
    trials = make_trials({k: v for k, v in ROWS.items() if not k.startswith("t")}, seed=0)
    summary = _summary(shard, trials, [i for i in ids if i.startswith("t")])
    with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as handle:
        handle.write(repr(sorted(summary.items())))
    torch_dist.destroy_process_group()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_two_processes_report_what_one_does(tmp_path):
    ids = sorted(ROWS)
    trials = make_trials({k: v for k, v in ROWS.items() if not k.startswith("t")}, seed=0)
    single = _summary(ids, trials, [i for i in ids if i.startswith("t")])
    assert {"same_engine_eer", "cross_engine_eer"} <= set(single) and "EER" in format_summary(single)
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_worker, args=(rank, str(tmp_path / "init"), str(tmp_path)))
               for rank in (0, 1)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    for rank in (0, 1):
        assert (tmp_path / f"rank{rank}.txt").read_text() == repr(sorted(single.items()))


def test_missing_embeddings_are_named():
    stats = VerificationStats()
    stats.append(["p-0"], torch.randn(1, 8))
    with pytest.raises(DataError, match="no embedding"):
        stats.summarize(make_trials(ROWS, seed=0))
