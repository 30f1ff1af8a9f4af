"""The CTC prefix beam search fed chunk by chunk (a stream) keeps its beams and LM states between chunks:
for any split of the frames its hypotheses and scores are exactly those of the search over the whole
utterance, with or without an LM (recurrent or not), a lexicon and blank skipping."""

from __future__ import annotations

import random

import pytest
import torch

from speechkit.decoding import CTCPrefixBeamSearch, CTCPrefixBeamStream, Lexicon, ctc_prefix_beam_search
from speechkit.errors import HparamsError
from speechkit.models import LSTMLanguageModel, TransformerLanguageModel


def splits(frames: int) -> list:
    """Chunkings of ``frames``: one frame at a time, odd sizes, random sizes (with empty chunks), whole."""
    rng = random.Random(frames)
    random_sizes = [rng.choice([0, 1, 2, 5, 9]) for _ in range(frames)]
    return [[1], [3, 7], random_sizes, [frames]]


def chunked(log_probs: torch.Tensor, sizes: list) -> list:
    pieces, start, turn = [], 0, 0
    while start < log_probs.shape[0]:
        size = sizes[turn % len(sizes)]
        pieces.append(log_probs[start:start + size])
        start, turn = start + size, turn + 1
    return pieces


def lm_of(kind: str):
    torch.manual_seed(3)
    if kind == "lstm":
        lm = LSTMLanguageModel(vocab_size=7, embedding_dim=8, hidden_size=16, num_layers=2)
    else:
        lm = TransformerLanguageModel(vocab_size=7, d_model=16, num_heads=2, num_layers=1, ffn_dim=32)
    with torch.no_grad():
        lm.output.bias[3] += 2.0  # an LM with a preference, so fusion changes the search
    return lm.eval()


@pytest.mark.parametrize("setting", ["plain", "lstm", "transformer", "lexicon", "blank_skip"])
def test_streamed_search_equals_the_whole_utterance_search_exactly(setting):
    torch.manual_seed(11)
    frames = 40
    log_probs = (torch.randn(frames, 7) * 2.5).log_softmax(-1)
    log_probs[::3, 0] += 6.0  # blank-dominated frames, some skipped with blank_skip_threshold
    log_probs = log_probs.log_softmax(-1)
    options = dict(beam_size=5)
    if setting in ("lstm", "transformer"):
        options.update(lm=lm_of(setting), lm_weight=0.7, bos_index=6, eos_index=6, length_bonus=0.5)
    if setting == "lexicon":
        options.update(lexicon=Lexicon([(1, 2), (1, 3, 4), (1, 5)], word_start=[1]))
    if setting == "blank_skip":
        options.update(blank_skip_threshold=0.99, lm=lm_of("lstm"), lm_weight=0.5, bos_index=6, eos_index=6)
    whole = ctc_prefix_beam_search(log_probs[None], torch.tensor([frames]), return_nbest=True, **options)[0]
    assert whole[0][0]  # something was said
    search = CTCPrefixBeamSearch(**options)
    for sizes in splits(frames):
        stream = search.stream()
        for piece in chunked(log_probs, sizes):
            stream.accept(piece)
        assert stream.frames == frames
        assert stream.nbest() == whole  # the same hypotheses, bit-for-bit the same scores
        assert stream.finish() == whole[0][0] == search(log_probs[None], torch.tensor([frames]))[0]


def test_the_beams_of_a_stream_so_far_are_those_of_the_utterance_cut_there():
    lm = lm_of("lstm")
    log_probs = (torch.randn(30, 7) * 2.5).log_softmax(-1)
    options = dict(beam_size=4, lm=lm, lm_weight=0.5, bos_index=6, eos_index=6)
    stream = CTCPrefixBeamStream(**options)
    for cut in (7, 19, 30):
        stream.accept(log_probs[stream.frames:cut].numpy())  # arrays too
        expected = ctc_prefix_beam_search(log_probs[None, :cut], torch.tensor([cut]), return_nbest=True,
                                          **options)[0]
        assert stream.nbest() == expected  # asking for the n-best does not disturb the search


def test_stream_misuse_is_refused():
    stream = CTCPrefixBeamStream(beam_size=3)
    with pytest.raises(HparamsError, match=r"\(frames, vocab\) log-probs, got shape \(1, 4, 5\)"):
        stream.accept(torch.zeros(1, 4, 5))
    assert stream.finish() == []  # no frames: nothing said
    with pytest.raises(HparamsError, match="finished"):
        stream.accept(torch.zeros(2, 5))
    with pytest.raises(HparamsError, match="finished already"):
        stream.finish()
    with pytest.raises(HparamsError, match="bos_index"):
        CTCPrefixBeamSearch(lm=lm_of("lstm"), lm_weight=0.5).stream()


@pytest.mark.parametrize("kind", ["lstm", "transformer"])
def test_a_long_search_forgets_what_left_the_beam(monkeypatch, kind):
    """Past PRUNE_ABOVE fused scores the search keeps only the beam's prefixes and their parents: memory
    stays bounded over a long stream, the result is the unbounded search's (LM scores of a prefix scored
    again equal up to rounding), and a stream still equals the whole-utterance search exactly."""
    import speechkit.decoding.ctc as ctc

    torch.manual_seed(2)
    frames = 160
    log_probs = (torch.randn(frames, 7) * 2.5).log_softmax(-1)
    options = dict(beam_size=4, lm=lm_of(kind), lm_weight=0.7, bos_index=6, eos_index=6, length_bonus=0.5)
    unbounded = ctc_prefix_beam_search(log_probs[None], torch.tensor([frames]), return_nbest=True,
                                       **options)[0]
    monkeypatch.setattr(ctc, "PRUNE_ABOVE", 40)
    whole = ctc_prefix_beam_search(log_probs[None], torch.tensor([frames]), return_nbest=True, **options)[0]
    assert [tokens for tokens, _ in whole] == [tokens for tokens, _ in unbounded]
    assert [score for _, score in whole] == pytest.approx([score for _, score in unbounded], abs=1e-4)
    for sizes in ([1], [13, 2]):
        stream = CTCPrefixBeamSearch(**options).stream()
        for piece in chunked(log_probs, sizes):
            stream.accept(piece)
            beams = stream._beams
            assert len(beams.fused) <= 40 + 4 * 7 and len(beams.lm_scores.cache) <= 2 * 4 + 40
        assert stream.nbest() == whole
        live_states = [state for state in stream._beams.lm_scores.states if state is not None]
        assert len(live_states) <= 2 * 4  # at most one LM state array per kept prefix
