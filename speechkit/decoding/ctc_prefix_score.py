"""CTC prefix scores for label-synchronous (attention) beam search, vectorized over hypotheses and tokens.

For a prefix ``h`` the score is ``log P_ctc(h...)``: the probability that the CTC output starts with ``h``,
summed over all alignments (Watanabe et al., 2017, "Hybrid CTC/attention"). Each beam step extends every
hypothesis by a few candidate tokens; this module computes the extended prefixes' scores with one pass over
time for all hypotheses and candidates at once.

Frames past an utterance's length are rewritten as "blank with probability 1", which leaves every prefix
probability unchanged; hence items of different lengths share one batched pass and each gets exactly the
scores it would get alone.

Example:
    >>> log_probs = torch.randn(1, 6, 4).log_softmax(-1)
    >>> scorer = CTCPrefixScorer(log_probs, torch.tensor([6]), blank_index=0, eos_index=3)
    >>> state = scorer.initial_state(torch.tensor([0]))
    >>> scores, extended = scorer.score(state, torch.tensor([[1, 2, 3]]))
    >>> scores.shape
    torch.Size([1, 3])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from speechkit.nn.masks import check_lengths, length_mask


@dataclass
class CTCPrefixState:
    """Forward variables of the current prefixes.

    Attributes:
        log_r: ``(frames, 2, n)`` log-probabilities of the prefix with its last frame a label (index 0) or a
            blank (index 1).
        log_psi: ``(n,)`` prefix scores.
        last_token: ``(n,)`` last label of each prefix (-1 when empty).
        item_index: ``(n,)`` which utterance of the batch each hypothesis belongs to.
        prefix_length: number of labels in every prefix (beam search keeps them aligned).
    """

    log_r: torch.Tensor
    log_psi: torch.Tensor
    last_token: torch.Tensor
    item_index: torch.Tensor
    prefix_length: int


class CTCPrefixScorer:
    """Prefix scoring over a batch of CTC posteriors.

    Args:
        log_probs: ``(batch, frames, vocab)`` CTC log-probabilities.
        lengths: ``(batch,)`` valid frames.
        blank_index: the blank id.
        eos_index: the end-of-sentence id: its score is the probability of the whole prefix being the output.
    """

    def __init__(self, log_probs: torch.Tensor, lengths: torch.Tensor, blank_index: int, eos_index: int):
        batch, frames, _ = log_probs.shape
        check_lengths(lengths, frames, batch, "CTC prefix scorer lengths")
        padding = ~length_mask(lengths, frames)
        x = log_probs.detach().float().masked_fill(padding.unsqueeze(-1), float("-inf"))
        x[..., blank_index] = x[..., blank_index].masked_fill(padding, 0.0)
        self.x = x
        self.blank_index = blank_index
        self.eos_index = eos_index

    def initial_state(self, item_index: torch.Tensor) -> CTCPrefixState:
        """State of the empty prefix for hypotheses belonging to ``item_index`` ``(n,)``."""
        blank = self.x[item_index, :, self.blank_index].transpose(0, 1)  # (frames, n)
        log_r = torch.stack([torch.full_like(blank, float("-inf")), blank.cumsum(0)], dim=1)
        zeros = torch.zeros(item_index.shape[0], device=self.x.device)
        last = torch.full_like(item_index, -1)
        return CTCPrefixState(log_r, zeros, last, item_index, 0)

    def score(self, state: CTCPrefixState, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores ``(n, k)`` of each prefix extended by each candidate ``(n, k)`` (no blanks among them).

        Returns the scores and the extended forward variables ``(frames, 2, n, k)`` for :meth:`select`.
        """
        frames = self.x.shape[1]
        x = self.x[state.item_index]  # (n, frames, vocab)
        x_labels = x.gather(2, candidates.unsqueeze(1).expand(-1, frames, -1)).permute(1, 0, 2)
        x_blank = x[:, :, self.blank_index].transpose(0, 1).unsqueeze(-1)  # (frames, n, 1)
        prefix_total = torch.logaddexp(state.log_r[:, 0], state.log_r[:, 1])  # (frames, n)
        # A repeated label needs a blank in between, so only blank-ending paths of the prefix can extend it.
        repeated = (candidates == state.last_token.unsqueeze(1)).unsqueeze(0)
        phi = torch.where(repeated, state.log_r[:, 1].unsqueeze(-1), prefix_total.unsqueeze(-1))
        log_r = torch.full((frames, 2) + tuple(candidates.shape), float("-inf"), device=x.device)
        start = max(state.prefix_length, 1)
        if state.prefix_length == 0:
            log_r[0, 0] = x_labels[0]
        for t in range(start, frames):
            log_r[t, 0] = torch.logaddexp(log_r[t - 1, 0], phi[t - 1]) + x_labels[t]
            log_r[t, 1] = torch.logaddexp(log_r[t - 1, 0], log_r[t - 1, 1]) + x_blank[t]
        log_psi = torch.logsumexp(
            torch.cat(
                [log_r[start - 1, 0].unsqueeze(0), phi[start - 1 : frames - 1] + x_labels[start:]], 0
            ),
            0,
        )
        # Ending the sentence: the whole prefix must be the complete CTC output (padding frames are blanks).
        is_eos = candidates == self.eos_index
        log_psi = torch.where(is_eos, prefix_total[-1].unsqueeze(-1).expand_as(log_psi), log_psi)
        return log_psi, log_r

    def select(
        self,
        state: CTCPrefixState,
        log_psi: torch.Tensor,
        extended_log_r: torch.Tensor,
        hypothesis: torch.Tensor,
        candidate: torch.Tensor,
        token: torch.Tensor,
    ) -> CTCPrefixState:
        """State of the new hypotheses: prefix ``hypothesis[i]`` extended by candidate ``candidate[i]``."""
        log_r = extended_log_r[:, :, hypothesis, candidate]
        return CTCPrefixState(
            log_r,
            log_psi[hypothesis, candidate],
            token,
            state.item_index[hypothesis],
            state.prefix_length + 1,
        )
