"""CTC decoding: greedy (best path) and prefix beam search, with absolute frame lengths.

Each item is decoded from its own valid frames only, so results never depend on batch composition. The
prefix beam search also takes an utterance's scores chunk by chunk (:class:`CTCPrefixBeamStream`, from
``CTCPrefixBeamSearch.stream()``), with exactly the result of the search over the whole utterance.

Example:
    >>> probs = [[0.1, 0.8, 0.1], [0.1, 0.8, 0.1], [0.9, 0.05, 0.05], [0.1, 0.1, 0.8]]
    >>> log_probs = torch.tensor([probs]).log()
    >>> ctc_greedy_decode(log_probs, torch.tensor([4]))
    [[1, 2]]
    >>> ctc_prefix_beam_search(log_probs, torch.tensor([4]), beam_size=4)
    [[1, 2]]
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch

from speechkit.decoding.lexicon import Lexicon
from speechkit.errors import HparamsError
from speechkit.nn.masks import check_lengths, length_mask


def ctc_greedy_decode(
    log_probs: torch.Tensor, lengths: torch.Tensor, blank_index: int = 0
) -> list[list[int]]:
    """Best-path decoding: argmax per frame, merge repeats, drop blanks.

    Args:
        log_probs: ``(batch, frames, vocab)`` (log-)probabilities (any monotonic score works).
        lengths: ``(batch,)`` valid frames per item.
        blank_index: the blank id.

    Returns:
        One list of token ids per item.
    """
    batch, frames, _ = log_probs.shape
    check_lengths(lengths, frames, batch, "CTC decoding lengths")
    best = log_probs.argmax(dim=-1)
    previous = torch.nn.functional.pad(best[:, :-1], (1, 0), value=blank_index)
    keep = (best != blank_index) & (best != previous) & length_mask(lengths, frames)
    best, keep = best.cpu(), keep.cpu()
    return [best[i][keep[i]].tolist() for i in range(batch)]


def _logaddexp(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


class PrefixLanguageModelScores:
    """Next-token LM log-probabilities per prefix, each prefix scored once, in batched LM calls.

    A recurrent LM (one whose ``score_next`` returns a state) extends each prefix from its parent's state,
    one token per call, so a hypothesis of n tokens costs n LM steps instead of n^2/2; an LM without a state
    (``None``, e.g. the Transformer LM) rescans each prefix, batched by length.

    Args:
        lm: a language model with ``score_next(prefixes (n, length), state) -> (log_probs (n, vocab), state)``
            and ``select_state(state, indices)`` (see :mod:`speechkit.models.language_models`), in the mode
            the caller wants (usually eval).
        bos_index: token put before every prefix.
    """

    def __init__(self, lm, bos_index: int):
        self.lm = lm
        self.bos_index = bos_index
        self.cache: dict[tuple[int, ...], np.ndarray] = {}
        # prefix -> (index into self.states, row): where the LM state after the prefix is kept
        self.state_rows: dict[tuple[int, ...], tuple[int, int]] = {}
        self.states: list = []
        self.stateless = False
        parameter = next(iter(lm.parameters()), None)
        self.device = parameter.device if parameter is not None else torch.device("cpu")

    def ensure(self, prefixes) -> None:
        """Compute the scores of the prefixes not seen yet (and of any missing ancestor), shortest first."""
        missing: set[tuple[int, ...]] = set()
        for prefix in prefixes:
            while prefix not in self.cache and prefix not in missing:
                missing.add(prefix)
                if not prefix:
                    break
                prefix = prefix[:-1]
        by_length: dict[int, list[tuple[int, ...]]] = {}
        for prefix in sorted(missing):
            by_length.setdefault(len(prefix), []).append(prefix)
        for length in sorted(by_length):
            if length == 0 or self.stateless:
                self._score_whole(by_length[length])
            else:
                self._score_extensions(by_length[length])

    def __getitem__(self, prefix: tuple[int, ...]) -> np.ndarray:
        return self.cache[prefix]

    def keep_only(self, prefixes: set) -> None:
        """Forget the scores and LM states of every prefix but ``prefixes`` (a long search's memory stays
        bounded; a forgotten prefix is scored again from its parent's state if it is ever needed)."""
        self.cache = {p: v for p, v in self.cache.items() if p in prefixes}
        self.state_rows = {p: where for p, where in self.state_rows.items() if p in prefixes}
        used = {index for index, _ in self.state_rows.values()}
        self.states = [state if index in used else None for index, state in enumerate(self.states)]

    def _store(self, group: list[tuple[int, ...]], log_probs: torch.Tensor, state) -> None:
        if state is None:
            self.stateless = True
        else:
            self.states.append(state)
            for row, prefix in enumerate(group):
                self.state_rows[prefix] = (len(self.states) - 1, row)
        for prefix, scores in zip(group, log_probs.float().cpu().numpy()):
            self.cache[prefix] = scores

    def _score_whole(self, group: list[tuple[int, ...]]) -> None:
        inputs = torch.tensor([(self.bos_index,) + p for p in group], dtype=torch.long, device=self.device)
        with torch.no_grad():
            self._store(group, *self.lm.score_next(inputs, None))

    def _score_extensions(self, group: list[tuple[int, ...]]) -> None:
        by_parent_state: dict[int, list[tuple[int, ...]]] = {}
        for prefix in group:
            by_parent_state.setdefault(self.state_rows[prefix[:-1]][0], []).append(prefix)
        for index, members in by_parent_state.items():
            rows = torch.tensor([self.state_rows[p[:-1]][1] for p in members], device=self.device)
            state = self.lm.select_state(self.states[index], rows)
            last_tokens = torch.tensor([[p[-1]] for p in members], dtype=torch.long, device=self.device)
            with torch.no_grad():
                self._store(members, *self.lm.score_next(last_tokens, state))


#: Fused scores kept by a prefix beam search before it forgets those of prefixes that left the beam (their
#: number grows with every frame; a prefix tuple's size with the transcript).
PRUNE_ABOVE = 4096


class _PrefixBeams:
    """Prefix beam search over one utterance's ``(frames, vocab)`` log-probs, taken a block of frames at a
    time: the beams, their fused LM scores and (with a lexicon) their unfinished words stay between blocks,
    so any split of the frames gives the search of the whole utterance, exactly.

    The score is the CTC log-probability of the prefix (all alignments), plus ``lm_weight`` times its LM
    log-probability (ending with ``eos_index`` at the end) and ``length_bonus`` per token. With a
    ``lexicon``, extensions that leave it are never made, and finished hypotheses come before unfinished ones.
    """

    def __init__(self, beam_size: int, blank_index: int, token_beam: int, blank_skip: Optional[float],
                 lm_scores: Optional[PrefixLanguageModelScores] = None, lm_weight: float = 0.0,
                 eos_index: Optional[int] = None, length_bonus: float = 0.0,
                 lexicon: Optional[Lexicon] = None):
        self.beam_size, self.blank_index, self.token_beam = beam_size, blank_index, token_beam
        self.blank_skip, self.lm_scores, self.lm_weight = blank_skip, lm_scores, lm_weight
        self.eos_index, self.length_bonus, self.lexicon = eos_index, length_bonus, lexicon
        # prefix -> (log P(prefix, path ends in blank), log P(prefix, path ends in a label))
        self.beam: dict[tuple[int, ...], tuple[float, float]] = {(): (0.0, -math.inf)}
        # prefix -> weighted LM log-probability of its tokens plus the length bonus (0 without an LM)
        self.fused: dict[tuple[int, ...], float] = {(): 0.0}
        # prefix -> its unfinished last word (None: outside the lexicon); only used with a lexicon
        self.partial_word: dict[tuple[int, ...], Optional[tuple[int, ...]]] = {(): ()}
        self.frames = 0

    def _in_lexicon(self, prefix: tuple[int, ...], token: int) -> bool:
        extended = prefix + (token,)
        if extended not in self.partial_word:
            self.partial_word[extended] = self.lexicon.extend(self.partial_word[prefix], token)
        return self.partial_word[extended] is not None

    def _extension_score(self, prefix: tuple[int, ...], token: int) -> float:
        lm_part = self.lm_weight * float(self.lm_scores[prefix][token]) if self.lm_scores is not None else 0.0
        return self.fused[prefix] + lm_part + self.length_bonus

    def advance(self, frames: np.ndarray) -> None:
        """Extend the beams over ``frames`` ``(n, vocab)``, the utterance's next log-probs."""
        neg_inf, blank_index, lm_scores, fused = -math.inf, self.blank_index, self.lm_scores, self.fused
        beam = self.beam
        for frame in frames:
            blank_logp = float(frame[blank_index])
            if self.blank_skip is not None and blank_logp > self.blank_skip:
                # A near-certain blank only merges the two path endings of each prefix.
                beam = {p: (_logaddexp(b, nb) + blank_logp, neg_inf) for p, (b, nb) in beam.items()}
                continue
            if lm_scores is not None:
                lm_scores.ensure(beam)
            candidates = np.argpartition(-frame, min(self.token_beam, frame.shape[0] - 1))[:self.token_beam]
            next_beam: dict[tuple[int, ...], list[float]] = {}

            def add(prefix, blank_part, label_part, _next=next_beam):
                entry = _next.setdefault(prefix, [neg_inf, neg_inf])
                entry[0] = _logaddexp(entry[0], blank_part)
                entry[1] = _logaddexp(entry[1], label_part)

            for prefix, (p_blank, p_label) in beam.items():
                total = _logaddexp(p_blank, p_label)
                add(prefix, total + blank_logp, neg_inf)
                last = prefix[-1] if prefix else None
                for token in candidates:
                    token = int(token)
                    if token == blank_index:
                        continue
                    token_logp = float(frame[token])
                    if token == last:
                        # Repeating the label without a blank in between stays on the same prefix...
                        add(prefix, neg_inf, p_label + token_logp)
                    if self.lexicon is not None and not self._in_lexicon(prefix, token):
                        continue
                    extended = prefix + (token,)
                    if extended not in fused:
                        fused[extended] = self._extension_score(prefix, token)
                    # ...while a repeat after a blank, or any other label, starts a new occurrence.
                    add(extended, neg_inf, (p_blank if token == last else total) + token_logp)

            def rank(item, _fused=fused):
                prefix, (b, nb) = item
                return (-(_logaddexp(b, nb) + _fused[prefix]), prefix)

            scored = sorted(next_beam.items(), key=rank)[:self.beam_size]
            # Impossible prefixes (e.g. a repeat with no frame left for the blank between) leave the beam.
            beam = {prefix: (b, nb) for prefix, (b, nb) in scored if max(b, nb) > neg_inf}
            beam = beam or {(): (neg_inf, neg_inf)}
            if len(fused) > PRUNE_ABOVE:
                self._forget_all_but(beam)
                fused = self.fused
        self.beam = beam
        self.frames += len(frames)

    def _forget_all_but(self, beam: dict) -> None:
        """Drop what no later frame reads: the fused scores, words and LM entries of prefixes other than the
        beam's and their parents'. A prefix that comes back into the beam gets them again from its parent
        (its LM scores in another LM batch, so equal up to float rounding); this happens at the same frames
        for any split into chunks, so a stream's search stays exactly the whole utterance's."""
        keep = set(beam) | {prefix[:-1] for prefix in beam if prefix} | {()}  # () restarts an emptied beam
        self.fused = {p: v for p, v in self.fused.items() if p in keep}
        self.partial_word = {p: v for p, v in self.partial_word.items() if p in keep}
        if self.lm_scores is not None:
            self.lm_scores.keep_only(keep)

    def nbest(self) -> list[tuple[tuple[int, ...], float]]:
        """(prefix, score) of the beams as if the utterance ended now (the LM's end token scored), best
        first; the beams are left as they are."""
        beam, fused = self.beam, self.fused
        if self.lm_scores is not None and self.eos_index is not None:
            self.lm_scores.ensure(beam)
            ends = {p: self.lm_weight * float(self.lm_scores[p][self.eos_index]) for p in beam}
        else:
            ends = dict.fromkeys(beam, 0.0)
        results = [(p, _logaddexp(b, nb) + fused[p] + ends[p]) for p, (b, nb) in beam.items()]
        if self.lexicon is not None:
            finished = [r for r in results if self.lexicon.is_complete(self.partial_word[r[0]])]
            results = finished or results
        return sorted(results, key=lambda item: (-item[1], item[0]))


def _check_lm(lm, lm_weight: float, bos_index: Optional[int]) -> None:
    if lm is not None and bos_index is None:
        raise HparamsError("CTC beam search with an LM needs bos_index (the LM's start token)")
    if lm is None and lm_weight:
        raise HparamsError(f"lm_weight is {lm_weight} but no lm was given")


def _prefix_beams(beam_size: int = 10, blank_index: int = 0, token_beam: Optional[int] = None,
                  blank_skip_threshold: Optional[float] = None, lm=None, lm_weight: float = 0.0,
                  bos_index: Optional[int] = None, eos_index: Optional[int] = None, length_bonus: float = 0.0,
                  lexicon: Optional[Lexicon] = None) -> _PrefixBeams:
    """The search state of one utterance for :func:`ctc_prefix_beam_search`'s arguments (checked here)."""
    _check_lm(lm, lm_weight, bos_index)
    token_beam = token_beam or beam_size
    threshold = None if blank_skip_threshold is None else math.log(blank_skip_threshold)
    # One LM cache per utterance: its LM calls never depend on the other items of a batch.
    lm_scores = PrefixLanguageModelScores(lm, bos_index) if lm is not None else None
    return _PrefixBeams(beam_size, blank_index, token_beam + 1, threshold, lm_scores, lm_weight, eos_index,
                        length_bonus, lexicon)


def ctc_prefix_beam_search(
    log_probs: torch.Tensor,
    lengths: torch.Tensor,
    beam_size: int = 10,
    blank_index: int = 0,
    token_beam: Optional[int] = None,
    blank_skip_threshold: Optional[float] = None,
    return_nbest: bool = False,
    lm=None,
    lm_weight: float = 0.0,
    bos_index: Optional[int] = None,
    eos_index: Optional[int] = None,
    length_bonus: float = 0.0,
    lexicon: Optional[Lexicon] = None,
):
    """CTC prefix beam search, optionally with language-model shallow fusion and a closed vocabulary.

    Keeps the ``beam_size`` prefixes with the highest score: CTC log-probability of the prefix (summed over
    alignments) + ``lm_weight`` * LM log-probability + ``length_bonus`` * number of tokens.

    Args:
        log_probs: ``(batch, frames, vocab)`` log-probabilities.
        lengths: ``(batch,)`` valid frames per item.
        beam_size: prefixes kept after each frame.
        blank_index: the blank id.
        token_beam: labels tried per frame (the most likely ones; default ``beam_size``, plus the blank).
        blank_skip_threshold: frames whose blank probability exceeds this (e.g. 0.999) only merge paths,
            which is faster and nearly exact; ``None`` disables it.
        return_nbest: return, per item, ``(tokens, score)`` best first.
        lm: optional language model over the same token ids (``score_next`` interface of
            :mod:`speechkit.models.language_models`); needs ``bos_index``.
        lm_weight: shallow-fusion weight.
        bos_index: LM start token.
        eos_index: LM end token, scored once at the end of each hypothesis (skipped when ``None``).
        length_bonus: added per emitted token (balances the LM's preference for short outputs).
        lexicon: a :class:`~speechkit.decoding.lexicon.Lexicon`: hypotheses only spell its words (those that
            end inside an unfinished word are returned only when no hypothesis is finished).

    Returns:
        ``list[list[int]]`` (best hypothesis per item) or, with ``return_nbest``,
        ``list[list[(list[int], float)]]``.

    Raises:
        HparamsError: an LM without ``bos_index``, or ``lm_weight`` without an LM.
    """
    batch, frames, _ = log_probs.shape
    check_lengths(lengths, frames, batch, "CTC decoding lengths")
    options = dict(beam_size=beam_size, blank_index=blank_index, token_beam=token_beam,
                   blank_skip_threshold=blank_skip_threshold, lm=lm, lm_weight=lm_weight, bos_index=bos_index,
                   eos_index=eos_index, length_bonus=length_bonus, lexicon=lexicon)
    _check_lm(lm, lm_weight, bos_index)
    array = log_probs.detach().float().cpu().numpy()
    outputs = []
    for i, length in enumerate(lengths.tolist()):
        search = _prefix_beams(**options)
        search.advance(array[i, :length])
        nbest = search.nbest()
        outputs.append([(list(p), s) for p, s in nbest] if return_nbest else list(nbest[0][0]))
    return outputs


class CTCPrefixBeamSearch:
    """:func:`ctc_prefix_beam_search` with its settings bound, for YAML.

    Example (hyperpyyaml)::

        ctc_search: !new:speechkit.decoding.CTCPrefixBeamSearch
            beam_size: 10
            lm: !ref <lm>
            lm_weight: 0.5
            bos_index: !ref <bos_index>
            eos_index: !ref <eos_index>

    Then ``hyps = ctc_search(log_probs, lengths)``.
    """

    def __init__(self, beam_size: int = 10, blank_index: int = 0, **options):
        self.beam_size = beam_size
        self.blank_index = blank_index
        self.options = options

    def __call__(self, log_probs: torch.Tensor, lengths: torch.Tensor):
        return ctc_prefix_beam_search(log_probs, lengths, self.beam_size, self.blank_index, **self.options)

    def with_lexicon(self, lexicon: Optional[Lexicon]) -> CTCPrefixBeamSearch:
        """The same search spelling only the words of ``lexicon`` (a closed vocabulary; None: any word)."""
        return CTCPrefixBeamSearch(self.beam_size, self.blank_index, **{**self.options, "lexicon": lexicon})

    def stream(self) -> CTCPrefixBeamStream:
        """The same search over one utterance whose scores arrive chunk by chunk
        (:class:`CTCPrefixBeamStream`)."""
        options = {k: v for k, v in self.options.items() if k != "return_nbest"}
        return CTCPrefixBeamStream(beam_size=self.beam_size, blank_index=self.blank_index, **options)


class CTCPrefixBeamStream:
    """:func:`ctc_prefix_beam_search` of one utterance whose CTC scores arrive a chunk at a time.

    The prefix beams, their LM scores and the LM states carry over from chunk to chunk, so each chunk's
    frames are searched once, when they arrive, and :meth:`finish` only scores the end (the LM's end token):
    for any split of the frames the hypotheses and scores are exactly those of the search over the whole
    utterance. Arguments: those of :func:`ctc_prefix_beam_search` (``return_nbest`` aside).

    Example:
        >>> log_probs = torch.randn(1, 12, 5).log_softmax(-1)
        >>> search = CTCPrefixBeamSearch(beam_size=4)
        >>> stream = search.stream()
        >>> for chunk in log_probs[0].split(5):          # (frames, vocab) pieces
        ...     stream.accept(chunk)
        >>> stream.finish() == search(log_probs, torch.tensor([12]))[0]
        True
    """

    def __init__(self, **options):
        self._beams = _prefix_beams(**options)
        self.finished = False

    @property
    def frames(self) -> int:
        """Frames searched so far."""
        return self._beams.frames

    def accept(self, log_probs) -> None:
        """Search the next ``(frames, vocab)`` log-probabilities (a tensor or an array)."""
        if self.finished:
            raise HparamsError("this beam search stream has finished; start another with stream()")
        if isinstance(log_probs, torch.Tensor):
            log_probs = log_probs.detach().float().cpu().numpy()
        log_probs = np.asarray(log_probs, dtype=np.float32)
        if log_probs.ndim != 2:
            raise HparamsError(f"a beam search stream takes (frames, vocab) log-probs, got shape "
                               f"{log_probs.shape}")
        self._beams.advance(log_probs)

    def nbest(self) -> list[tuple[list[int], float]]:
        """``(tokens, score)`` best first, as if the utterance ended now (the search goes on)."""
        return [(list(prefix), score) for prefix, score in self._beams.nbest()]

    def finish(self) -> list[int]:
        """End the utterance: the best hypothesis's token ids."""
        if self.finished:
            raise HparamsError("this beam search stream has finished already")
        self.finished = True
        return self.nbest()[0][0]
