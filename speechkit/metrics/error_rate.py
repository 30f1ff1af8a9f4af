"""Word and character error rates on jiwer, per utterance and summarized, with a worst-first report.

Example:
    >>> stats = ErrorRateStats()
    >>> stats.append(["utt1", "utt2"], ["THE CAT SAT", "HELLO"], ["THE CAT SAT DOWN", "HELLO WORLD"])
    >>> summary = stats.summarize()
    >>> summary["WER"], summary["num_edits"], summary["deletions"]
    (33.333333333333336, 2, 2)

``predict`` and ``target`` items are strings (split on whitespace) or token lists. With ``cer=True`` each
item is spelled out as characters, spaces included, and the ``WER`` key holds the character error rate.

With a ``normalizer`` (e.g. :class:`speechkit.data.text_policy.TextNormalizer`, the one the recipe trains
with), string references and hypotheses are normalised before scoring and the report says how::

    stats = ErrorRateStats(normalizer=TextNormalizer(case="upper"))
    stats.append(["u1"], ["nine, ten"], ["NINE TEN"])  # 0 % WER: case and punctuation are not errors

In a distributed evaluation every process appends its own utterances; ``summarize`` gathers them all (a
collective: call it on every process), drops repeated ids and orders by id, so the summary is exactly that
of one process over the whole set. ``write_stats`` then writes the merged report without communicating (it
refuses to run under DDP before ``summarize``: the report would hold this process's utterances only).
"""
from __future__ import annotations

import io
import os
from typing import Optional, Union

import jiwer

from speechkit.errors import DataError
from speechkit.metrics.gather import gather_by_id, merge_by_id, process_group_running

EPS = "<eps>"
_OPS = {"equal": "=", "substitute": "S", "delete": "D", "insert": "I"}


def _as_tokens(item, cer: bool, what: str, utt_id) -> list:
    if isinstance(item, str):
        words = item.split()
    elif isinstance(item, (list, tuple)):
        words = [str(token) for token in item]
    else:
        raise DataError(f"utterance {utt_id!r}: {what} must be a string or a list of tokens, "
                        f"got {type(item).__name__}")
    return list(" ".join(words)) if cer else words


def align(reference: list, hypothesis: list) -> list:
    """Minimum-edit alignment as (op, ref_token, hyp_token) triples; op is one of ``= S D I``.

    Example:
        >>> align(["A", "B", "C", "D"], ["A", "C", "D", "E"])
        [('=', 'A', 'A'), ('D', 'B', '<eps>'), ('=', 'C', 'C'), ('=', 'D', 'D'), ('I', '<eps>', 'E')]
    """
    if not reference and not hypothesis:
        return []
    if not reference:
        return [("I", EPS, token) for token in hypothesis]
    # jiwer aligns words; map tokens to plain numbered words so any token (even one with spaces) works.
    vocabulary: dict = {}
    ref_words = " ".join(f"w{vocabulary.setdefault(t, len(vocabulary))}" for t in reference)
    hyp_words = " ".join(f"w{vocabulary.setdefault(t, len(vocabulary))}" for t in hypothesis)
    output = jiwer.process_words(ref_words, hyp_words)
    triples = []
    for chunk in output.alignments[0]:
        op = _OPS[chunk.type]
        refs = reference[chunk.ref_start_idx:chunk.ref_end_idx]
        hyps = hypothesis[chunk.hyp_start_idx:chunk.hyp_end_idx]
        if op == "D":
            triples.extend((op, r, EPS) for r in refs)
        elif op == "I":
            triples.extend((op, EPS, h) for h in hyps)
        else:
            triples.extend((op, r, h) for r, h in zip(refs, hyps))
    return triples


def score_utterance(reference: list, hypothesis: Optional[list]) -> dict:
    """Edit counts and alignment of one utterance (``hypothesis`` None: absent, not scored)."""
    if hypothesis is None:
        return {"scored": False, "num_ref_tokens": len(reference), "ref": reference, "hyp": None,
                "insertions": 0, "deletions": 0, "substitutions": 0, "num_edits": 0, "alignment": []}
    alignment = align(reference, hypothesis)
    counts = {op: sum(1 for triple in alignment if triple[0] == op) for op in "SDI"}
    return {"scored": True, "num_ref_tokens": len(reference), "ref": reference, "hyp": hypothesis,
            "insertions": counts["I"], "deletions": counts["D"], "substitutions": counts["S"],
            "num_edits": counts["I"] + counts["D"] + counts["S"], "alignment": alignment}


def summarize_scores(scores: dict) -> dict:
    """Totals over per-utterance scores (absent utterances are counted, not scored)."""
    scored = [s for s in scores.values() if s["scored"]]
    num_edits = sum(s["num_edits"] for s in scored)
    num_tokens = sum(s["num_ref_tokens"] for s in scored)
    erroneous = sum(1 for s in scored if s["num_edits"] > 0)
    wer = 100.0 * num_edits / num_tokens if num_tokens else (0.0 if num_edits == 0 else float("inf"))
    return {
        "WER": wer,
        "SER": 100.0 * erroneous / len(scored) if scored else 0.0,
        "num_edits": num_edits,
        "num_scored_tokens": num_tokens,
        "num_erroneous_sents": erroneous,
        "num_scored_sents": len(scored),
        "num_absent_sents": len(scores) - len(scored),
        "num_ref_sents": len(scores),
        "insertions": sum(s["insertions"] for s in scored),
        "deletions": sum(s["deletions"] for s in scored),
        "substitutions": sum(s["substitutions"] for s in scored),
        "error_rate": wer,
    }


class ErrorRateStats:
    """Collects per-utterance edit counts; summarizes WER/CER across every process; writes a report.

    Args:
        cer: score characters (spaces included) instead of words.
        normalizer: a function ``str -> str`` applied to string references and hypotheses before scoring
            (token lists are scored as given); its ``describe()`` line, if it has one, goes into the report.
    """

    def __init__(self, cer: bool = False, normalizer=None):
        self.cer = cer
        self.normalizer = normalizer
        self.clear()

    def clear(self) -> None:
        """Forget every appended utterance (call at the start of each stage)."""
        self.scores: dict = {}
        self._merged: Optional[dict] = None
        self.summary: dict = {}

    def append(self, ids, predict, target) -> None:
        """Score a batch: ``ids`` (list), ``predict`` and ``target`` (lists of strings or of token lists).

        A ``predict`` item of None marks an absent hypothesis (counted in ``num_absent_sents``). Raises
        DataError naming the id when the lengths disagree or an id is appended twice with other text.
        """
        ids, predict, target = list(ids), list(predict), list(target)
        if not len(ids) == len(predict) == len(target):
            raise DataError(f"append got {len(ids)} ids, {len(predict)} predictions and {len(target)} "
                            f"targets; they must match (first id: {ids[0] if ids else None!r})")
        for utt_id, hyp, ref in zip(ids, predict, target):
            ref, hyp = self._normalized(ref), self._normalized(hyp)
            reference = _as_tokens(ref, self.cer, "target", utt_id)
            hypothesis = None if hyp is None else _as_tokens(hyp, self.cer, "prediction", utt_id)
            score = score_utterance(reference, hypothesis)
            if utt_id in self.scores and self.scores[utt_id] != score:
                raise DataError(f"utterance {utt_id!r} was appended twice with different text")
            self.scores[utt_id] = score
        self._merged = None

    def _normalized(self, item):
        return self.normalizer(item) if self.normalizer is not None and isinstance(item, str) else item

    def describe_text(self) -> str:
        """How the text was prepared for scoring (a line of the report)."""
        if self.normalizer is None:
            return "Text scored as given (no normaliser)."
        describe = getattr(self.normalizer, "describe", None)
        how = describe() if callable(describe) else _function_name(self.normalizer)
        return f"Text normalised before scoring: {how}."

    def summarize(self, field: Optional[str] = None) -> Union[dict, float, int]:
        """The summary over every process's utterances (collective when distributed), or one ``field`` of it.

        Keys: WER, SER, num_edits, num_scored_tokens, num_erroneous_sents, num_scored_sents,
        num_absent_sents, num_ref_sents, insertions, deletions, substitutions, error_rate (= WER).
        """
        self._merged = gather_by_id(self.scores, "score")
        self.summary = summarize_scores(self._merged)
        if field is None:
            return dict(self.summary)
        if field not in self.summary:
            raise KeyError(f"unknown summary field {field!r}; known: {', '.join(self.summary)}")
        return self.summary[field]

    def merged_scores(self) -> dict:
        """Per-utterance scores ordered by id: every process's after :meth:`summarize`, else this one's."""
        return self._merged if self._merged is not None else merge_by_id([self.scores], "score")

    def write_stats(self, path_or_stream) -> None:
        """Write the summary and every utterance's alignment, worst utterances first. No communication:
        call :meth:`summarize` on every process first, then this on the main process only.

        Raises:
            DataError: under DDP before :meth:`summarize` (the report would miss the other processes' items).
        """
        if self._merged is None and process_group_running():
            raise DataError("ErrorRateStats.write_stats before summarize() in a distributed run would write "
                            "this process's utterances only: call summarize() on every process first")
        if isinstance(path_or_stream, (str, os.PathLike)):
            with open(path_or_stream, "w", encoding="utf-8") as handle:
                self._write(handle)
        else:
            self._write(path_or_stream)

    def report(self) -> str:
        """The text :meth:`write_stats` writes."""
        buffer = io.StringIO()
        self._write(buffer)
        return buffer.getvalue()

    def _write(self, out) -> None:
        scores = self.merged_scores()
        summary = summarize_scores(scores)
        unit = "CER" if self.cer else "WER"
        out.write(f"%{unit} {summary['WER']:.2f} {_counts(summary, 'num_scored_tokens')}\n")
        out.write(f"%SER {summary['SER']:.2f} [ {summary['num_erroneous_sents']} / "
                  f"{summary['num_scored_sents']} ]\n")
        out.write(f"Scored {summary['num_scored_sents']} sentences, "
                  f"{summary['num_absent_sents']} not present in hyp.\n")
        out.write(self.describe_text() + "\n")
        out.write(_RULE + f"ALIGNMENTS (worst first)\n\nFormat:\n<utterance-id>, %{unit} DETAILS\n"
                  + _format_alignment([("I", EPS, "and"), ("S", "reference", "hypothesis"), ("=", "on", "on"),
                                       ("=", "the", "the"), ("S", "first", "third"), ("D", "line", EPS)]))
        out.write(_RULE)
        for utt_id in worst_first(scores):
            score = scores[utt_id]
            if not score["scored"]:
                out.write(f"{utt_id}, absent: no hypothesis\n" + _RULE)
                continue
            rate = 100.0 * score["num_edits"] / max(score["num_ref_tokens"], 1)
            out.write(f"{utt_id}, %{unit} {rate:.2f} {_counts(score, 'num_ref_tokens')}\n")
            out.write(_format_alignment(score["alignment"]) + _RULE)


_RULE = "=" * 80 + "\n"


class TranscriptErrorRates:
    """The WER and CER of one evaluation stage's transcripts, both on text normalised by ``normalizer``.

    Example:
        >>> rates = TranscriptErrorRates()
        >>> rates.append(["u1"], ["HELLO THERE"], ["HELLO WORLD"])
        >>> rates.summarize()
        {'WER': 50.0, 'CER': 45.45454545454545}
    """

    def __init__(self, normalizer=None):
        self.words = ErrorRateStats(normalizer=normalizer)
        self.characters = ErrorRateStats(cer=True, normalizer=normalizer)

    def append(self, ids, predict, target) -> None:
        """Score a batch (see :meth:`ErrorRateStats.append`)."""
        ids, predict, target = list(ids), list(predict), list(target)
        self.words.append(ids, predict, target)
        self.characters.append(ids, predict, target)

    def summarize(self) -> dict:
        """``{"WER": ..., "CER": ...}`` over every process's utterances (a collective under DDP)."""
        return {"WER": self.words.summarize("error_rate"), "CER": self.characters.summarize("error_rate")}

    def write_stats(self, path_or_stream) -> None:
        """The word-level report (after :meth:`summarize` under DDP)."""
        self.words.write_stats(path_or_stream)


def _function_name(function) -> str:
    name = getattr(function, "__qualname__", None) or repr(function)
    module = getattr(function, "__module__", None)
    return f"{module}.{name}" if module else name


def _counts(stats: dict, tokens_key: str) -> str:
    return (f"[ {stats['num_edits']} / {stats[tokens_key]}, {stats['insertions']} ins, "
            f"{stats['deletions']} del, {stats['substitutions']} sub ]")


def worst_first(scores: dict) -> list:
    """Ids ordered by per-utterance error rate, then edit count (both descending), then id."""
    def badness(item):
        utt_id, score = item
        rate = score["num_edits"] / max(score["num_ref_tokens"], 1) if score["scored"] else float("inf")
        return (-rate, -score["num_edits"], str(utt_id))

    return [utt_id for utt_id, _ in sorted(scores.items(), key=badness)]


def _format_alignment(alignment: list) -> str:
    """Three aligned rows (reference, operations, hypothesis), columns separated by ' ; '."""
    if not alignment:
        return "\n\n\n"
    widths = [max(len(op), len(ref), len(hyp)) for op, ref, hyp in alignment]
    rows = ([ref for _, ref, _ in alignment], [op for op, _, _ in alignment],
            [hyp for _, _, hyp in alignment])
    return "".join(" ; ".join(cell.center(w) for cell, w in zip(row, widths)).rstrip() + "\n"
                   for row in rows)
