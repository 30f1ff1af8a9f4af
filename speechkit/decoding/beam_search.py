"""Attention beam search with CTC prefix scoring and language-model shallow fusion, batched.

The score of a hypothesis ``y`` is::

    (1 - ctc_weight) * log P_att(y | x) + ctc_weight * log P_ctc-prefix(y | x) + lm_weight * log P_lm(y)
    + length_bonus * |y|

accumulated token by token. All utterances of a batch are searched together (one decoder call per step for
every hypothesis), but each utterance keeps its own beam, its own finished list and its own stopping rule, so
its result is the one it would get alone (docs/design.md, contract 2).

Example:
    >>> from speechkit.models import TransformerDecoder
    >>> decoder = TransformerDecoder(vocab_size=8, d_model=16, num_heads=2, num_layers=1, ffn_dim=32).eval()
    >>> search = AttentionBeamSearch(decoder, bos_index=7, eos_index=7, beam_size=3, ctc_weight=0.0)
    >>> hyps = search(torch.randn(2, 10, 16), torch.tensor([10, 6]))
    >>> len(hyps)
    2
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from speechkit.decoding.ctc_prefix_score import CTCPrefixScorer
from speechkit.errors import HparamsError
from speechkit.nn.masks import check_lengths


class AttentionBeamSearch:
    """Label-synchronous beam search over a :class:`~speechkit.models.TransformerDecoder`.

    Args:
        decoder: has ``score_next(prefixes (n, length), memory, memory_lengths) -> (n, vocab)`` log-probs.
        bos_index: first token of every prefix.
        eos_index: token that ends a hypothesis (may equal ``bos_index``).
        beam_size: hypotheses kept per utterance.
        ctc_weight: weight of the CTC prefix score (0 disables it; then ``ctc_log_probs`` may be omitted).
        blank_index: CTC blank id, never emitted.
        lm: optional language model with ``initial_state()``, ``score_next(prefixes, state)`` and
            ``select_state(state, indices)`` (see :mod:`speechkit.models.language_models`).
        lm_weight: shallow-fusion weight of the LM.
        max_length_ratio: at most ``max(1, int(ratio * encoder frames))`` tokens per utterance.
        length_bonus: added per emitted token (counters the bias toward short outputs).
        candidates_per_hypothesis: tokens scored by CTC per hypothesis (default ``ceil(1.5 * beam_size)``),
            pre-selected by the attention (+ LM) scores.
    """

    def __init__(
        self,
        decoder,
        bos_index: int,
        eos_index: int,
        beam_size: int = 10,
        ctc_weight: float = 0.3,
        blank_index: Optional[int] = 0,
        lm=None,
        lm_weight: float = 0.0,
        max_length_ratio: float = 1.0,
        length_bonus: float = 0.0,
        candidates_per_hypothesis: Optional[int] = None,
    ):
        if not 0.0 <= ctc_weight <= 1.0:
            raise HparamsError(f"ctc_weight must lie in [0, 1], got {ctc_weight}")
        if beam_size < 1:
            raise HparamsError(f"beam_size must be at least 1, got {beam_size}")
        if lm_weight and lm is None:
            raise HparamsError(f"lm_weight is {lm_weight} but no lm was given")
        self.decoder = decoder
        self.bos_index = bos_index
        self.eos_index = eos_index
        self.beam_size = beam_size
        self.ctc_weight = ctc_weight
        self.blank_index = blank_index
        self.lm = lm
        self.lm_weight = lm_weight
        self.max_length_ratio = max_length_ratio
        self.length_bonus = length_bonus
        self.candidates = candidates_per_hypothesis or math.ceil(1.5 * beam_size)

    def __call__(
        self,
        memory: torch.Tensor,
        memory_lengths: torch.Tensor,
        ctc_log_probs: Optional[torch.Tensor] = None,
    ) -> list[list[int]]:
        """Best hypothesis per utterance (token ids without bos/eos)."""
        return [nbest[0][0] for nbest in self.search(memory, memory_lengths, ctc_log_probs)]

    @torch.no_grad()
    def search(
        self,
        memory: torch.Tensor,
        memory_lengths: torch.Tensor,
        ctc_log_probs: Optional[torch.Tensor] = None,
    ) -> list[list[tuple[list[int], float]]]:
        """N-best lists per utterance: ``(tokens, score)`` best first.

        Args:
            memory: ``(batch, frames, d_model)`` encoder output.
            memory_lengths: ``(batch,)`` valid frames.
            ctc_log_probs: ``(batch, frames, vocab)`` CTC log-probs of the same frames (needed when
                ``ctc_weight > 0``).
        """
        batch, frames, _ = memory.shape
        check_lengths(memory_lengths, frames, batch, "beam search memory lengths")
        if self.ctc_weight > 0 and ctc_log_probs is None:
            raise HparamsError(f"ctc_weight is {self.ctc_weight} but no ctc_log_probs were given")
        beam, device = self.beam_size, memory.device
        hyps = batch * beam
        item_index = torch.arange(batch, device=device).repeat_interleave(beam)
        hyp_memory, hyp_memory_lengths = memory[item_index], memory_lengths[item_index]
        tokens = torch.full((hyps, 1), self.bos_index, dtype=torch.long, device=device)
        scores = torch.full((batch, beam), float("-inf"), device=device)
        scores[:, 0] = 0.0  # one live hypothesis (the empty prefix) per utterance at the start
        scorer, ctc_state = None, None
        if self.ctc_weight > 0:
            scorer = CTCPrefixScorer(ctc_log_probs, memory_lengths, self.blank_index, self.eos_index)
            ctc_state = scorer.initial_state(item_index)
        lm_state = self.lm.initial_state() if self.lm is not None else None
        max_tokens = [max(1, int(self.max_length_ratio * n)) for n in memory_lengths.tolist()]
        finished: list[list[tuple[list[int], float]]] = [[] for _ in range(batch)]
        done = [False] * batch

        for step in range(max(max_tokens) + 1):
            att = self.decoder.score_next(tokens, hyp_memory, hyp_memory_lengths).float()
            preselect = att.clone()
            lm_scores = None
            if self.lm is not None:
                lm_scores, new_lm_state = self.lm.score_next(tokens, lm_state)
                preselect = preselect + self.lm_weight * lm_scores.float()
            preselect = self._forbid_tokens(preselect, step, max_tokens, item_index)
            k = min(self.candidates, preselect.shape[1])
            candidates = preselect.topk(k, dim=1).indices  # (hyps, k)
            cand_scores = (1.0 - self.ctc_weight) * att.gather(1, candidates)
            forbidden = preselect.gather(1, candidates) == float("-inf")
            if lm_scores is not None:
                cand_scores = cand_scores + self.lm_weight * lm_scores.float().gather(1, candidates)
            if scorer is not None:
                ctc_psi, extended = scorer.score(ctc_state, candidates)
                cand_scores = cand_scores + self.ctc_weight * (ctc_psi - ctc_state.log_psi.unsqueeze(1))
            cand_scores = cand_scores + self.length_bonus * (candidates != self.eos_index)
            total = (scores.view(hyps, 1) + cand_scores).masked_fill(forbidden, float("-inf"))
            total = torch.nan_to_num(total, nan=float("-inf"))  # (-inf) - (-inf) for impossible prefixes
            top_values, top_flat = total.view(batch, beam * k).topk(min(2 * beam, beam * k), dim=1)

            source = torch.zeros(hyps, dtype=torch.long)
            chosen = torch.zeros(hyps, dtype=torch.long)
            new_scores = torch.full((batch, beam), float("-inf"))
            values, flat = top_values.cpu().tolist(), top_flat.cpu()
            candidates_cpu, tokens_cpu = candidates.cpu(), tokens.cpu()
            for b in range(batch):
                source[b * beam : (b + 1) * beam] = b * beam  # dead slots point inside their own utterance
                if done[b]:
                    continue
                kept = 0
                for rank, value in enumerate(values[b]):
                    if value == float("-inf"):
                        break
                    hyp = b * beam + int(flat[b, rank]) // k
                    cand = int(flat[b, rank]) % k
                    token = int(candidates_cpu[hyp, cand])
                    if token == self.eos_index:
                        if rank < beam:
                            finished[b].append((tokens_cpu[hyp, 1:].tolist(), value))
                    elif kept < beam:
                        source[b * beam + kept], chosen[b * beam + kept] = hyp, cand
                        new_scores[b, kept] = value
                        kept += 1
                best_running = new_scores[b, 0].item()
                best_finished = max((s for _, s in finished[b]), default=float("-inf"))
                done[b] = (
                    len(finished[b]) >= beam
                    or kept == 0
                    or step >= max_tokens[b]
                    # Scores only decrease without a length bonus: nothing running can overtake.
                    or (self.length_bonus <= 0 and best_finished >= best_running)
                )
                if done[b]:
                    new_scores[b] = float("-inf")
            if all(done):
                break
            source, chosen = source.to(device), chosen.to(device)
            new_tokens = candidates[source, chosen]
            tokens = torch.cat([tokens[source], new_tokens.unsqueeze(1)], dim=1)
            scores = new_scores.to(device)
            if scorer is not None:
                ctc_state = scorer.select(ctc_state, ctc_psi, extended, source, chosen, new_tokens)
            if self.lm is not None:
                lm_state = self.lm.select_state(new_lm_state, source)

        results = []
        for b in range(batch):
            nbest = sorted(finished[b], key=lambda item: -item[1])
            results.append(nbest if nbest else [([], float("-inf"))])
        return results

    def _forbid_tokens(
        self, scores: torch.Tensor, step: int, max_tokens: list[int], item_index: torch.Tensor
    ) -> torch.Tensor:
        """Never emit blank or bos; force eos once an utterance reached its maximum length."""
        if self.blank_index is not None and self.blank_index != self.eos_index:
            scores[:, self.blank_index] = float("-inf")
        if self.bos_index != self.eos_index:
            scores[:, self.bos_index] = float("-inf")
        at_limit = torch.tensor([step >= n for n in max_tokens], device=scores.device)[item_index]
        if bool(at_limit.any()):
            eos_scores = scores[:, self.eos_index].clone()
            scores[at_limit] = float("-inf")
            scores[:, self.eos_index] = eos_scores
        return scores
