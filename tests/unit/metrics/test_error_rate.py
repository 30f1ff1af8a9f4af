"""ErrorRateStats (WER/CER against hand-counted edits, report order, shard merging), MetricStats, SI-SNR."""
from __future__ import annotations

import io
import multiprocessing
import os

import pytest
import torch

from speechkit.errors import DataError, DistributedError
from speechkit.metrics import ErrorRateStats, MetricStats, RunningAverage, align, si_snr, si_snr_improvement
from speechkit.metrics.gather import merge_by_id

# (reference, hypothesis, substitutions, deletions, insertions), counted by hand.
EXAMPLES = {
    "a": ("THE CAT SAT ON THE MAT", "THE CAT SAT ON THE MAT", 0, 0, 0),
    "b": ("THE CAT SAT ON THE MAT", "THE BAT SAT ON MAT", 1, 1, 0),
    "c": ("HELLO WORLD", "HELLO BIG WIDE WORLD", 0, 0, 2),
    "d": ("ONE TWO THREE", "", 0, 3, 0),
    "e": ("GOOD MORNING", "GOOD EVENING SIR", 1, 0, 1),
}


def filled(cer=False, ids=None):
    stats = ErrorRateStats(cer=cer)
    ids = sorted(EXAMPLES) if ids is None else ids
    stats.append(ids, [EXAMPLES[i][1] for i in ids], [EXAMPLES[i][0] for i in ids])
    return stats


def test_wer_summary_matches_hand_counted_edits():
    summary = filled().summarize()
    assert summary["substitutions"] == 2 and summary["deletions"] == 4 and summary["insertions"] == 3
    assert summary["num_edits"] == 9 and summary["num_scored_tokens"] == 6 + 6 + 2 + 3 + 2
    assert summary["WER"] == pytest.approx(100.0 * 9 / 19) and summary["error_rate"] == summary["WER"]
    assert summary["num_erroneous_sents"] == 4 and summary["num_scored_sents"] == 5
    assert summary["SER"] == pytest.approx(80.0)
    assert summary["num_absent_sents"] == 0 and summary["num_ref_sents"] == 5
    expected_keys = {"WER", "SER", "num_edits", "num_scored_tokens", "num_erroneous_sents",
                     "num_scored_sents", "num_absent_sents", "num_ref_sents", "insertions", "deletions",
                     "substitutions", "error_rate"}
    assert set(summary) == expected_keys
    assert filled().summarize("deletions") == 4
    with pytest.raises(KeyError, match="unknown summary field"):
        filled().summarize("accuracy")


def test_cer_counts_characters_including_spaces():
    stats = ErrorRateStats(cer=True)
    stats.append(["x", "y"], ["HELO WORLD", "AB"], ["HELLO WORLD", "A B"])
    summary = stats.summarize()
    # "HELLO WORLD" (11 chars) -> one L deleted; "A B" (3 chars) -> the space deleted.
    assert summary["deletions"] == 2 and summary["num_scored_tokens"] == 14
    assert summary["WER"] == pytest.approx(100.0 * 2 / 14)


def test_token_lists_absent_hypotheses_and_bad_input():
    stats = ErrorRateStats()
    stats.append([1, 2], [["▁HE", "LLO"], None], [["▁HE", "LO"], ["▁A"]])
    summary = stats.summarize()
    assert summary["substitutions"] == 1 and summary["num_scored_sents"] == 1
    assert summary["num_absent_sents"] == 1 and summary["num_ref_sents"] == 2
    assert align(["A", "B"], []) == [("D", "A", "<eps>"), ("D", "B", "<eps>")]
    assert align([], ["A"]) == [("I", "<eps>", "A")]
    with pytest.raises(DataError, match="must match"):
        stats.append(["u1", "u2"], ["A"], ["A", "B"])
    with pytest.raises(DataError, match="'u3'"):
        stats.append(["u3"], [42], ["A"])
    with pytest.raises(DataError, match="appended twice"):
        stats.append([1], ["OTHER WORDS"], ["SOMETHING"])


def test_report_lists_worst_utterances_first_with_alignments(tmp_path):
    stats = filled()
    stats.summarize()
    path = tmp_path / "wer.txt"
    stats.write_stats(str(path))
    text = path.read_text()
    assert text.startswith("%WER 47.37 [ 9 / 19, 3 ins, 4 del, 2 sub ]\n%SER 80.00 [ 4 / 5 ]\n")
    order = [line.split(",")[0] for line in text.splitlines() if line[:2] in {"a,", "b,", "c,", "d,", "e,"}]
    # Per-utterance rates: d 100%, c 100% (2 edits / 2), e 100%, b 33%, a 0%; ties by edits, then id.
    assert order == ["d", "c", "e", "b", "a"]
    block = text.split("b, %WER 33.33 [ 2 / 6, 0 ins, 1 del, 1 sub ]\n")[1].splitlines()[:3]
    assert [cell.strip() for cell in block[0].split(";")] == ["THE", "CAT", "SAT", "ON", "THE", "MAT"]
    assert [cell.strip() for cell in block[1].split(";")] == ["=", "S", "=", "=", "D", "="]
    assert [cell.strip() for cell in block[2].split(";")] == ["THE", "BAT", "SAT", "ON", "<eps>", "MAT"]
    stream = io.StringIO()
    stats.write_stats(stream)
    assert stream.getvalue() == text


def test_merged_shards_equal_one_process_even_with_duplicated_items():
    single = filled()
    # Two "ranks": disjoint shards plus one item both scored (a sampler padding its shard).
    rank0, rank1 = filled(ids=["a", "c", "e"]), filled(ids=["b", "d", "a"])
    merged = merge_by_id([rank0.scores, rank1.scores])
    assert list(merged) == sorted(EXAMPLES)
    assert merged == merge_by_id([single.scores])
    rank0._merged = merged
    assert rank0.report() == (single.summarize() and single.report())
    conflicting = ErrorRateStats()
    conflicting.append(["a"], ["SOMETHING ELSE"], [EXAMPLES["a"][0]])
    with pytest.raises(DistributedError, match="'a'"):
        merge_by_id([rank0.scores, conflicting.scores])


def _gather_worker(rank, world, init_file, out_dir):
    import torch.distributed as torch_dist

    torch_dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    shard = ["a", "c", "e"] if rank == 0 else ["b", "d", "a"]
    stats = filled(ids=shard)
    summary = stats.summarize()
    with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as handle:
        handle.write(repr(sorted(summary.items())) + "\n" + stats.report())
    torch_dist.destroy_process_group()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_summarize_gathers_across_real_processes(tmp_path):
    # Forked workers (torch already imported) start in well under a second; spawn would re-import torch.
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_gather_worker, args=(rank, 2, str(tmp_path / "init"), str(tmp_path)))
               for rank in (0, 1)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    single = filled()
    expected = repr(sorted(single.summarize().items())) + "\n" + single.report()
    for rank in (0, 1):
        assert (tmp_path / f"rank{rank}.txt").read_text() == expected


def test_normalizer_scores_normalised_text_and_the_report_says_how():
    from speechkit.data.text_policy import TextNormalizer

    normalize = TextNormalizer(case="upper")
    stats = ErrorRateStats(normalizer=normalize)
    stats.append(["u1", "u2"], ["nine, ten!", ["Tok", "en"]], ["NINE TEN", ["TOK", "EN"]])
    summary = stats.summarize()
    assert summary["num_edits"] == 2  # token lists are scored as given: "Tok" != "TOK", "en" != "EN"
    assert stats.scores["u1"]["num_edits"] == 0
    assert f"Text normalised before scoring: {normalize.describe()}.\n" in stats.report()
    assert "Text scored as given (no normaliser).\n" in filled().report()
    cer = ErrorRateStats(cer=True, normalizer=_lower)
    cer.append(["x"], ["AB"], ["ab"])
    assert cer.summarize("WER") == 0.0
    assert f"Text normalised before scoring: {__name__}._lower." in cer.report()


def _lower(text: str) -> str:
    return text.lower()


def _write_before_summarize_worker(rank, world, init_file, out_dir):
    import torch.distributed as torch_dist

    torch_dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    stats = filled(ids=["a", "c", "e"] if rank == 0 else ["b", "d"])
    try:
        stats.write_stats(os.path.join(out_dir, f"early{rank}.txt"))
    except DataError as error:
        message = str(error)
    stats.summarize()
    stats.write_stats(os.path.join(out_dir, f"rank{rank}.txt"))
    with open(os.path.join(out_dir, f"error{rank}.txt"), "w") as handle:
        handle.write(message)
    torch_dist.destroy_process_group()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_write_stats_before_summarize_refuses_under_ddp(tmp_path):
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_write_before_summarize_worker,
                               args=(rank, 2, str(tmp_path / "init"), str(tmp_path))) for rank in (0, 1)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    single = filled()
    single.summarize()
    for rank in (0, 1):
        assert not (tmp_path / f"early{rank}.txt").exists()
        assert "call summarize() on every process first" in (tmp_path / f"error{rank}.txt").read_text()
        assert (tmp_path / f"rank{rank}.txt").read_text() == single.report()


def test_metric_stats_and_running_average():
    stats = MetricStats(metric=lambda estimate, target: abs(estimate - target))
    stats.append(["x", "y", "z"], [1.0, 2.0, 5.0], [1.5, 2.0, 3.0])
    summary = stats.summarize()
    assert summary["average"] == pytest.approx(2.5 / 3) and summary["max_id"] == "z"
    assert summary["min_id"] == "y" and summary["count"] == 3
    batched = MetricStats(metric=lambda e, t: (e - t).abs().sum(-1), batch_eval=True)
    batched.append(["p", "q"], torch.ones(2, 3), torch.zeros(2, 3))
    assert batched.summarize("average") == pytest.approx(3.0)
    with pytest.raises(DataError, match="2 scores for 3 ids"):
        batched.append(["p", "q", "r"], torch.ones(2, 3), torch.zeros(2, 3))
    average = RunningAverage()
    average.update(2.0, count=3)
    average.update(torch.tensor(6.0), count=1)
    assert average.value == pytest.approx(3.0)
    restored = RunningAverage()
    restored.load_state_dict(average.state_dict())
    assert restored.value == average.value


def test_si_snr_known_values_and_padding():
    target = torch.randn(2, 4000)
    assert float(si_snr(3.0 * target, target)[0]) > 60.0  # scale does not matter
    noise = torch.randn(2, 4000)
    noise = noise - (noise * target).sum(1, keepdim=True) / (target ** 2).sum(1, keepdim=True) * target
    noise = noise / noise.norm(dim=1, keepdim=True) * target.norm(dim=1, keepdim=True) / 10.0  # 20 dB
    torch.testing.assert_close(si_snr(target + noise, target), torch.full((2,), 20.0), atol=0.05, rtol=0)
    padded_est, padded_ref = torch.randn(2, 5000), torch.randn(2, 5000)
    padded_est[:, :4000], padded_ref[:, :4000] = target + noise, target
    lengths = torch.tensor([4000, 4000])
    torch.testing.assert_close(si_snr(padded_est, padded_ref, lengths), si_snr(target + noise, target),
                               atol=1e-3, rtol=0)
    improvement = si_snr_improvement(target + noise, target + 3 * noise, target)
    assert torch.all(improvement > 9.0)


def test_transcript_error_rates_score_words_and_characters_on_normalised_text(tmp_path):
    from speechkit.data.text_policy import TextNormalizer
    from speechkit.metrics import TranscriptErrorRates

    rates = TranscriptErrorRates(normalizer=TextNormalizer(case="upper"))
    rates.append(["u1", "u2"], ["nine, ten", "a cab"], ["NINE TEN", "A CAT"])
    summary = rates.summarize()
    assert summary["WER"] == pytest.approx(25.0) and summary["CER"] == pytest.approx(100 / 13)
    rates.write_stats(tmp_path / "wer.txt")
    assert "%WER 25.00" in (tmp_path / "wer.txt").read_text()
