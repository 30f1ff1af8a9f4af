"""Greedy and beam search over a Whisper decoder with its key/value cache, token for token as the reference.

Both take the encoder states of a batch and the prompt (the same first tokens for every item, see
:meth:`WhisperGenerationConfig.initial_tokens`), apply :class:`TokenRules` to each step's scores, and stop at
``<|endoftext|>`` or after ``max_length`` tokens in all (prompt included). Each returns, per item, the
generated tokens (prompt and end of text left out) and the sum of their log-probabilities (greedy: of the
tokens taken, at temperature 1; beam: the finished beam's length-normalised score).

Example:
    >>> result = greedy_search(model.decoder, states, prompt, rules, 50257, 50257, 448)  # doctest: +SKIP
    >>> result.tokens[0]                                                                  # doctest: +SKIP
    [50364, 440, 1029, 50414]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from speechkit.models.whisper.rules import TokenRules

NEG = -1.0e9


@dataclass
class SearchResult:
    """Per item: ``tokens`` (list of ids), ``scores`` (list of float; None when greedy search was asked for
    no log-probabilities), and for temperature fallback the per-step log-probability of each token taken
    (``token_log_probs``, greedy and sampling only) and whether it ended with ``<|endoftext|>``
    (``ended``)."""

    tokens: list
    scores: list
    token_log_probs: Optional[list] = None
    ended: Optional[list] = None


@torch.no_grad()
def greedy_search(decoder, states: torch.Tensor, prompt: list, rules: TokenRules, eos: int, pad: int,
                  max_length: int, temperature: float = 0.0,
                  generator: Optional[torch.Generator] = None, log_probs: bool = True) -> SearchResult:
    """Take the best token at every step (or sample one at ``temperature`` > 0).

    Arguments:
        decoder: a :class:`WhisperDecoder`.
        states: (batch, frames, d_model) encoder states.
        prompt: the first tokens: one list for every item, or one list per item (of one length).
        max_length: most tokens in all, prompt included.
        log_probs: compute each taken token's log-probability (a log-softmax over the vocabulary per
            step); without, ``scores`` and ``token_log_probs`` are None (plain greedy needs only the
            argmax of the scores).
    """
    batch = states.shape[0]
    tokens = _prompt_rows(prompt, batch, states.device)
    cache = decoder.new_cache(states, capacity=max_length)
    logits = decoder.step(tokens, cache)
    finished = torch.zeros(batch, dtype=torch.bool, device=states.device)
    taken_log_probs = []
    while tokens.shape[1] < max_length:
        scores = rules(logits.float(), tokens)
        if temperature > 0:
            scores = scores / temperature
            chosen = torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=generator)[:, 0]
        else:
            chosen = scores.argmax(dim=-1)
        if log_probs:
            taken_log_probs.append(torch.log_softmax(scores, dim=-1).gather(1, chosen[:, None])[:, 0])
        chosen = torch.where(finished, torch.full_like(chosen, pad), chosen)
        tokens = torch.cat([tokens, chosen[:, None]], dim=1)
        finished |= chosen == eos
        if bool(finished.all()) or tokens.shape[1] >= max_length:
            break
        logits = decoder.step(chosen[:, None], cache)
    return _greedy_result(tokens[:, _prompt_rows(prompt, batch, states.device).shape[1]:],
                          taken_log_probs if log_probs else None, eos)


def _prompt_rows(prompt, batch: int, device) -> torch.Tensor:
    """(batch, length) int64 prompt rows from one list (every item) or one list per item (same length)."""
    rows = torch.as_tensor(prompt, dtype=torch.long, device=device)
    return rows.expand(batch, -1).contiguous() if rows.dim() == 1 else rows


def _greedy_result(generated: torch.Tensor, taken_log_probs: Optional[list], eos: int) -> SearchResult:
    if taken_log_probs is None:
        rows = [row[:row.index(eos)] if eos in row else row for row in generated.tolist()]
        return SearchResult(rows, None, None, [len(row) < generated.shape[1] for row in rows])
    log_probs = torch.stack(taken_log_probs, dim=1) if taken_log_probs else generated.new_zeros(
        generated.shape, dtype=torch.float)
    out_tokens, out_scores, per_token, ended = [], [], [], []
    for row, row_log_probs in zip(generated.tolist(), log_probs):
        stop = row.index(eos) if eos in row else len(row)
        out_tokens.append(row[:stop])
        ended.append(stop < len(row))
        kept = row_log_probs[:min(stop + 1, len(row))]  # the end-of-text token counts, as in the reference
        per_token.append(kept.tolist())
        out_scores.append(float(kept.sum()))
    return SearchResult(out_tokens, out_scores, per_token, ended)


@torch.no_grad()
def beam_search(decoder, states: torch.Tensor, prompt: list, rules: TokenRules, eos: int, pad: int,
                max_length: int, beam_size: int, length_penalty: float = 1.0,
                early_stopping=False) -> SearchResult:
    """Beam search of ``beam_size`` beams per item, as the reference's: the 2 x ``beam_size`` best
    continuations of all beams are kept each step; those ending (end of text, or the length limit) among the
    ``beam_size`` best become finished hypotheses scored by log-probability / generated length **
    ``length_penalty``; the search stops when no running beam can beat the worst of ``beam_size`` finished
    ones (measured at the current length), or at ``max_length``."""
    batch, beams = states.shape[0], beam_size
    device = states.device
    prompt_rows = _prompt_rows(prompt, batch, device)
    prompt_length = prompt_rows.shape[1]
    keep = 2 * beams
    states = states.repeat_interleave(beams, dim=0)
    running = torch.full((batch, beams, max_length), pad, dtype=torch.long, device=device)
    running[:, :, :prompt_length] = prompt_rows[:, None, :]
    finished_sequences = running.clone()
    running_scores = torch.zeros(batch, beams, device=device)
    running_scores[:, 1:] = NEG
    finished_scores = torch.full((batch, beams), NEG, device=device)
    is_finished = torch.zeros(batch, beams, dtype=torch.bool, device=device)
    can_improve = torch.ones(batch, 1, dtype=torch.bool, device=device)
    in_top = torch.arange(keep, device=device) < beams
    batch_offset = torch.arange(batch, device=device)[:, None] * beams
    cache = decoder.new_cache(states, capacity=max_length)
    logits = decoder.step(running[:, :, :prompt_length].reshape(batch * beams, -1), cache)
    length = prompt_length
    while True:
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        log_probs = rules(log_probs, running[:, :, :length].reshape(batch * beams, -1))
        vocab = log_probs.shape[-1]
        totals = (log_probs.view(batch, beams, vocab) + running_scores[:, :, None]).view(batch, -1)
        top_scores, top_index = torch.topk(totals, keep)
        source = top_index // vocab
        candidates = torch.gather(running, 1, source[:, :, None].expand(-1, -1, max_length)).clone()
        candidates[:, :, length] = top_index % vocab
        ends = (candidates[:, :, length] == eos) | (length + 1 >= max_length)

        alive_scores = top_scores + ends.float() * NEG
        chosen = torch.topk(alive_scores, beams).indices
        running = torch.gather(candidates, 1, chosen[:, :, None].expand(-1, -1, max_length))
        running_scores = torch.gather(alive_scores, 1, chosen)
        running_source = torch.gather(source, 1, chosen)

        just_finished = ends & in_top[None, :]
        normalised = top_scores / ((length + 1 - prompt_length) ** length_penalty)
        if early_stopping is True:
            normalised = normalised + (is_finished.all(dim=1, keepdim=True)).float() * NEG
        normalised = normalised + (~can_improve).float() * NEG + (~just_finished).float() * NEG
        merged_scores = torch.cat([finished_scores, normalised], dim=1)
        best = torch.topk(merged_scores, beams).indices
        finished_sequences = torch.gather(torch.cat([finished_sequences, candidates], dim=1), 1,
                                          best[:, :, None].expand(-1, -1, max_length))
        finished_scores = torch.gather(merged_scores, 1, best)
        is_finished = torch.gather(torch.cat([is_finished, just_finished], dim=1), 1, best)

        cache.reorder((running_source + batch_offset).reshape(-1))
        length += 1
        if early_stopping == "never" and length_penalty > 0.0:
            best_length = max_length - prompt_length
        else:
            best_length = length - prompt_length
        best_running = running_scores[:, :1] / (best_length ** length_penalty)
        worst_finished = torch.where(is_finished, finished_scores.amin(dim=1, keepdim=True),
                                     torch.full_like(finished_scores, NEG))
        can_improve = can_improve & (best_running > worst_finished).any(dim=-1, keepdim=True)
        go_on = bool(can_improve.any()) and not (early_stopping is True and bool(is_finished.all())) \
            and not bool(ends.all())
        if not go_on:
            break
        logits = decoder.step(running[:, :, length - 1].reshape(-1, 1), cache)
    out_tokens, out_scores = [], []
    for row, score in zip(finished_sequences[:, 0, prompt_length:].tolist(), finished_scores[:, 0].tolist()):
        stop = row.index(eos) if eos in row else len(row)
        out_tokens.append(row[:stop])
        out_scores.append(score)
    return SearchResult(out_tokens, out_scores)
