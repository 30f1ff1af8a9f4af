"""The reference's rules on next-token scores: suppressed tokens, tokens suppressed at the first step, and
the timestamp rules, applied to a whole batch at once (no loop over items).

Timestamp rules, as the reference applies them after the prompt:

- ``<|notimestamps|>`` is never generated;
- timestamps come in pairs: after a lone timestamp the next token is a timestamp or end of text, after a
  pair it is text;
- timestamps never go back (and after a pair, the next start is strictly later);
- the first token is a timestamp, at most ``max_initial_timestamp_index`` steps from ``<|0.00|>``;
- when the timestamps together are more likely than any single text token, a timestamp is taken.

Example:
    >>> rules = TokenRules(vocab_size=10, suppress=[3], begin_suppress=[4], prompt_length=2)
    >>> rules(torch.zeros(1, 10), torch.tensor([[0, 1]]))[0, 3:5]
    tensor([-inf, -inf])
"""
from __future__ import annotations

from typing import Optional

import torch


class TokenRules:
    """Callable ``(scores (batch, vocab), tokens (batch, length)) -> scores`` with the rules applied.

    Arguments:
        vocab_size: the scores' last dimension.
        suppress: ids never generated (``suppress_tokens``).
        begin_suppress: ids not generated as the first token after the prompt (``begin_suppress_tokens``).
        prompt_length: tokens before the first generated one.
        timestamp_begin: id of ``<|0.00|>``, or None without timestamp rules.
        no_timestamps: id of ``<|notimestamps|>`` (with ``timestamp_begin``).
        eos: id of ``<|endoftext|>``; every id below it is text.
        max_initial_timestamp_index: see the module docstring (None: no bound).
    """

    def __init__(self, vocab_size: int, suppress=(), begin_suppress=(), prompt_length: int = 0,
                 timestamp_begin: Optional[int] = None, no_timestamps: Optional[int] = None, eos: int = 0,
                 max_initial_timestamp_index: Optional[int] = None, device=None):
        ids = torch.arange(vocab_size, device=device)
        self.suppress = torch.isin(ids, torch.tensor(list(suppress), dtype=torch.long, device=device))
        self.begin_suppress = torch.isin(ids, torch.tensor(list(begin_suppress), dtype=torch.long,
                                                           device=device))
        self.prompt_length = prompt_length
        self.timestamp_begin, self.no_timestamps, self.eos = timestamp_begin, no_timestamps, eos
        self.max_initial = max_initial_timestamp_index
        self.ids = ids
        if timestamp_begin is not None:
            self.is_timestamp = ids >= timestamp_begin
            self.is_before_eos = ids < eos

    def __call__(self, scores: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        inf = float("-inf")
        first_step = tokens.shape[1] == self.prompt_length
        if first_step:
            scores = scores.masked_fill(self.begin_suppress, inf)
        scores = scores.masked_fill(self.suppress, inf)
        if self.timestamp_begin is not None:
            scores = self._timestamps(scores, tokens, first_step)
        return scores

    def _timestamps(self, scores: torch.Tensor, tokens: torch.Tensor, first_step: bool) -> torch.Tensor:
        inf = float("-inf")
        begin = self.timestamp_begin
        scores = scores.clone()
        scores[:, self.no_timestamps] = inf
        generated = tokens[:, self.prompt_length:]
        count = generated.shape[1]
        if count >= 1:
            last_is_time = generated[:, -1] >= begin
            penultimate_is_time = (generated[:, -2] >= begin) if count >= 2 else torch.ones_like(last_is_time)
            no_more_times = last_is_time & penultimate_is_time
            no_text = last_is_time & ~penultimate_is_time
            scores.masked_fill_(no_more_times[:, None] & self.is_timestamp, inf)
            scores.masked_fill_(no_text[:, None] & self.is_before_eos, inf)
            # The latest timestamp (timestamps never decrease, so the largest); begin - 1 when there is none.
            latest = torch.where(generated >= begin, generated, torch.full_like(generated, begin - 1)).amax(1)
            has_time = latest >= begin
            floor = torch.where(has_time & ~(last_is_time & ~penultimate_is_time), latest + 1, latest)
            floor = torch.where(has_time, floor, torch.full_like(floor, begin))
        else:
            floor = torch.full((tokens.shape[0],), begin, dtype=torch.long, device=tokens.device)
        scores.masked_fill_(self.is_timestamp & (self.ids < floor[:, None]), inf)
        if first_step:
            scores[:, :begin] = inf
            if self.max_initial is not None:
                scores[:, begin + self.max_initial + 1:] = inf
        log_probs = torch.log_softmax(scores.float(), dim=-1)
        timestamp_mass = log_probs[:, begin:].logsumexp(dim=-1)
        best_text = log_probs[:, :begin].amax(dim=-1)
        scores[:, :begin].masked_fill_((timestamp_mass > best_text)[:, None], inf)
        return scores
