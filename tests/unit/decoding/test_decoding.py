"""Decoders: exactness against brute force, batch invariance, a trained tiny CTC model, beam search scores."""

from __future__ import annotations

import math

import pytest
import torch

from speechkit.decoding import (
    AttentionBeamSearch,
    CTCPrefixBeamSearch,
    CTCPrefixScorer,
    ctc_greedy_decode,
    ctc_prefix_beam_search,
)
from speechkit.decoding.ctc import PrefixLanguageModelScores
from speechkit.errors import DataError, HparamsError
from speechkit.models import (
    ConformerEncoder,
    CTCHead,
    LSTMLanguageModel,
    TransformerDecoder,
    TransformerLanguageModel,
)
from speechkit.nn import ctc_loss
from tests.helpers.batch_invariance import assert_batch_invariant
from tests.helpers.ctc_paths import brute_force_labelings


def edit_distance(a, b):
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def test_greedy_merges_repeats_drops_blanks_and_respects_lengths():
    best = torch.tensor([[1, 1, 0, 1, 2, 2, 0, 3, 3]])
    log_probs = torch.nn.functional.one_hot(best, 4).float().log()
    assert ctc_greedy_decode(log_probs, torch.tensor([9])) == [[1, 1, 2, 3]]
    assert ctc_greedy_decode(log_probs, torch.tensor([5])) == [[1, 1, 2]]
    assert ctc_greedy_decode(log_probs, torch.tensor([0])) == [[]]
    with pytest.raises(DataError, match="CTC decoding lengths"):
        ctc_greedy_decode(log_probs, torch.tensor([10]))


def test_ctc_decoders_are_batch_invariant():
    items = [torch.randn(n, 6).log_softmax(-1) for n in (12, 3, 20, 7)]
    greedy = assert_batch_invariant(ctc_greedy_decode, items)
    beam = assert_batch_invariant(lambda x, n: ctc_prefix_beam_search(x, n, beam_size=4), items)
    assert len(greedy) == len(beam) == 4


def test_prefix_beam_search_finds_the_exact_best_labeling():
    torch.manual_seed(3)
    for _ in range(3):
        log_probs = (torch.randn(5, 3) * 2).log_softmax(-1)
        exact = brute_force_labelings(log_probs)
        nbest = ctc_prefix_beam_search(log_probs[None], torch.tensor([5]), beam_size=50, return_nbest=True)[
            0
        ]
        best_label, best_score = max(exact.items(), key=lambda item: item[1])
        assert tuple(nbest[0][0]) == best_label
        assert nbest[0][1] == pytest.approx(best_score, abs=1e-5)
        for tokens, score in nbest:
            assert score == pytest.approx(exact[tuple(tokens)], abs=1e-5)


def test_ctc_prefix_scorer_matches_brute_force_and_ctc_loss():
    torch.manual_seed(4)
    log_probs = (torch.randn(1, 5, 3) * 2).log_softmax(-1)
    exact = brute_force_labelings(log_probs[0])
    eos = 3  # outside the CTC vocabulary: only used as the "end" candidate
    padded = torch.cat([log_probs, torch.full((1, 5, 1), -math.inf)], dim=-1)
    scorer = CTCPrefixScorer(padded, torch.tensor([5]), blank_index=0, eos_index=eos)
    state = scorer.initial_state(torch.tensor([0]))
    prefix = []
    for token in (2, 1, 1):
        scores, extended = scorer.score(state, torch.tensor([[1, 2, eos]]))
        ends = sum(math.exp(v) for label, v in exact.items() if label == tuple(prefix))
        assert scores[0, 2].item() == pytest.approx(math.log(ends) if ends else -math.inf, abs=1e-5)
        for j, candidate in enumerate((1, 2)):
            starts = [
                v for label, v in exact.items() if label[: len(prefix) + 1] == tuple(prefix + [candidate])
            ]
            expected = torch.logsumexp(torch.tensor(starts), 0).item() if starts else -math.inf
            assert scores[0, j].item() == pytest.approx(expected, abs=1e-5)
        j = (1, 2).index(token)
        state = scorer.select(
            state, scores, extended, torch.tensor([0]), torch.tensor([j]), torch.tensor([token])
        )
        prefix.append(token)
    final, _ = scorer.score(state, torch.tensor([[eos]]))
    reference = -ctc_loss(
        log_probs, torch.tensor([prefix]), torch.tensor([5]), torch.tensor([3]), zero_infinity=False
    )
    assert final.item() == pytest.approx(reference.item(), abs=1e-4)


def synthetic_ctc_task(num_utterances, prototypes, generator):
    """Token sequences rendered as noisy copies of each token's prototype vector, held for 6-12 frames.

    ``prototypes`` is ``(vocab, dim)``; row 0 (the blank's) is the silence around each utterance.
    """
    vocab, dim = prototypes.shape
    features, labels = [], []
    for _ in range(num_utterances):
        tokens = torch.randint(
            1, vocab, (int(torch.randint(2, 6, (1,), generator=generator)),), generator=generator
        )
        frames = [
            prototypes[t].expand(int(torch.randint(6, 13, (1,), generator=generator)), dim) for t in tokens
        ]
        x = torch.cat([prototypes[0].expand(4, dim), *frames, prototypes[0].expand(4, dim)])
        features.append(x + torch.randn(x.shape, generator=generator) * 1.2)
        labels.append(tokens)
    return features, labels


def pad(tensors):
    lengths = torch.tensor([t.shape[0] for t in tensors])
    return torch.nn.utils.rnn.pad_sequence(tensors, batch_first=True), lengths


@pytest.mark.slow
def test_prefix_beam_search_at_least_as_good_as_greedy_on_trained_model():
    generator = torch.Generator().manual_seed(0)
    prototypes = torch.randn(6, 16, generator=generator) * 1.5
    train_x, train_y = synthetic_ctc_task(256, prototypes, generator)
    test_x, test_y = synthetic_ctc_task(48, prototypes, generator)
    encoder = ConformerEncoder(
        16, d_model=32, num_heads=4, num_layers=1, ffn_dim=64, kernel_size=7, dropout=0.0
    )
    head = CTCHead(32, 6)
    parameters = list(encoder.parameters()) + list(head.parameters())
    optimizer = torch.optim.AdamW(parameters, lr=3e-3)
    for _ in range(100):
        index = torch.randint(0, 256, (16,), generator=generator)
        x, lengths = pad([train_x[i] for i in index])
        y, y_lengths = pad([train_y[i] for i in index])
        encoded, encoded_lengths = encoder(x, lengths)
        loss = ctc_loss(head(encoded), y, encoded_lengths, y_lengths)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    encoder.eval()
    with torch.no_grad():
        x, lengths = pad(test_x)
        encoded, encoded_lengths = encoder(x, lengths)
        log_probs = head(encoded)
    greedy = ctc_greedy_decode(log_probs, encoded_lengths)
    beam = ctc_prefix_beam_search(log_probs, encoded_lengths, beam_size=8)
    references = [y.tolist() for y in test_y]
    greedy_errors = sum(edit_distance(h, r) for h, r in zip(greedy, references))
    beam_errors = sum(edit_distance(h, r) for h, r in zip(beam, references))
    total = sum(len(r) for r in references)
    assert greedy_errors / total < 0.5, "the tiny model did not learn the task"
    assert beam_errors <= greedy_errors

    def labeling_log_prob(hyps):
        y, y_lengths = pad([torch.tensor(h if h else [1]) for h in hyps])
        per_item = -ctc_loss(
            log_probs, y, encoded_lengths, y_lengths, reduction="none", zero_infinity=False
        )
        return per_item

    # Beam search maximizes the labeling probability (summed over alignments), which best path does not.
    assert (labeling_log_prob(beam) >= labeling_log_prob(greedy) - 1e-4).all()


def tiny_asr(vocab=9):
    decoder = TransformerDecoder(vocab_size=vocab, d_model=16, num_heads=2, num_layers=1, ffn_dim=32).eval()
    lm = LSTMLanguageModel(vocab_size=vocab, embedding_dim=8, hidden_size=16, num_layers=1).eval()
    return decoder, lm


def test_attention_beam_search_with_ctc_and_lm_is_batch_invariant():
    decoder, lm = tiny_asr()
    search = AttentionBeamSearch(
        decoder,
        bos_index=8,
        eos_index=8,
        beam_size=3,
        ctc_weight=0.4,
        lm=lm,
        lm_weight=0.3,
        max_length_ratio=0.5,
    )
    items = [(torch.randn(n, 16), (torch.randn(n, 9) * 3).log_softmax(-1)) for n in (12, 5, 17)]
    hyps = assert_batch_invariant(lambda m, n, c, _: search(m, n, c), items)
    assert all(8 not in h and 0 not in h for h in hyps)  # never bos/eos or blank inside
    assert all(len(h) <= max(1, int(0.5 * n)) for h, n in zip(hyps, (12, 5, 17)))


def test_beam_search_score_is_the_fused_score_of_its_hypothesis():
    decoder, lm = tiny_asr()
    memory, lengths = torch.randn(1, 14, 16), torch.tensor([14])
    ctc_log_probs = (torch.randn(1, 14, 9) * 3).log_softmax(-1)
    search = AttentionBeamSearch(
        decoder,
        bos_index=8,
        eos_index=8,
        beam_size=4,
        ctc_weight=0.3,
        lm=lm,
        lm_weight=0.5,
        length_bonus=0.2,
    )
    tokens, score = search.search(memory, lengths, ctc_log_probs)[0][0]
    inputs = torch.tensor([[8] + tokens])
    targets = torch.tensor([tokens + [8]])
    n = torch.tensor([len(tokens) + 1])
    with torch.no_grad():
        att = decoder(inputs, n, memory, lengths).gather(2, targets.unsqueeze(-1)).sum()
        lm_score = lm(inputs, n).gather(2, targets.unsqueeze(-1)).sum()
    ctc = -ctc_loss(ctc_log_probs, torch.tensor([tokens or [1]]), lengths, torch.tensor([len(tokens)]))
    expected = 0.7 * att + 0.3 * ctc + 0.5 * lm_score + 0.2 * len(tokens)
    assert score == pytest.approx(expected.item(), abs=1e-3)


def test_beam_of_one_without_ctc_equals_greedy_decoder_search():
    decoder, _ = tiny_asr()
    memory, lengths = torch.randn(1, 10, 16), torch.tensor([10])
    search = AttentionBeamSearch(
        decoder, bos_index=8, eos_index=8, beam_size=1, ctc_weight=0.0, blank_index=0
    )
    prefix = torch.tensor([[8]])
    with torch.no_grad():
        for _ in range(10):
            scores = decoder.score_next(prefix, memory, lengths)
            scores[:, 0] = -math.inf
            token = int(scores.argmax())
            if token == 8:
                break
            prefix = torch.cat([prefix, torch.tensor([[token]])], 1)
    assert search(memory, lengths) == [prefix[0, 1:].tolist()]


def test_beam_search_bad_configuration():
    decoder, lm = tiny_asr()
    with pytest.raises(HparamsError, match="ctc_weight"):
        AttentionBeamSearch(decoder, 8, 8, ctc_weight=1.5)
    with pytest.raises(HparamsError, match="no lm"):
        AttentionBeamSearch(decoder, 8, 8, lm_weight=0.5)
    with pytest.raises(HparamsError, match="ctc_log_probs"):
        AttentionBeamSearch(decoder, 8, 8, ctc_weight=0.5)(torch.randn(1, 4, 16), torch.tensor([4]))


def test_ctc_beam_search_with_lm_fusion_scores_and_batch_invariance():
    torch.manual_seed(5)
    lm = LSTMLanguageModel(vocab_size=6, embedding_dim=8, hidden_size=16, num_layers=1).eval()
    with torch.no_grad():
        lm.output.bias[3] += 4.0  # make the LM clearly prefer token 3, so fusion has something to change
    items = [(torch.randn(n, 6) * 2).log_softmax(-1) for n in (9, 4, 14)]
    options = dict(beam_size=6, lm=lm, lm_weight=0.8, bos_index=5, eos_index=5, length_bonus=0.3)
    fused = assert_batch_invariant(lambda x, n: ctc_prefix_beam_search(x, n, **options), items)
    plain = [ctc_prefix_beam_search(x[None], torch.tensor([len(x)]), beam_size=6)[0] for x in items]
    assert fused != plain
    assert sum(h.count(3) for h in fused) > sum(h.count(3) for h in plain)
    # The returned score is the fused score of the returned hypothesis (a wide beam loses no alignment).
    x = items[2]
    wide = dict(options, beam_size=200)
    tokens, score = ctc_prefix_beam_search(x[None], torch.tensor([14]), return_nbest=True, **wide)[0][0]
    ctc = -ctc_loss(x[None], torch.tensor([tokens]), torch.tensor([14]), torch.tensor([len(tokens)]))
    with torch.no_grad():
        lm_log_probs = lm(torch.tensor([[5] + tokens]), torch.tensor([len(tokens) + 1]))
    lm_score = lm_log_probs[0].gather(1, torch.tensor([tokens + [5]]).T).sum()
    assert score == pytest.approx((ctc + 0.8 * lm_score + 0.3 * len(tokens)).item(), abs=1e-3)


def test_ctc_beam_search_lm_weight_zero_changes_nothing_and_bad_options():
    lm = LSTMLanguageModel(vocab_size=6, embedding_dim=8, hidden_size=16, num_layers=1).eval()
    log_probs, lengths = torch.randn(2, 10, 6).log_softmax(-1), torch.tensor([10, 7])
    assert ctc_prefix_beam_search(log_probs, lengths, return_nbest=True) == ctc_prefix_beam_search(
        log_probs, lengths, return_nbest=True, lm=lm, lm_weight=0.0, bos_index=5
    )
    search = CTCPrefixBeamSearch(beam_size=4, lm=lm, lm_weight=0.5, bos_index=5, eos_index=5)
    assert search(log_probs, lengths) == ctc_prefix_beam_search(
        log_probs, lengths, 4, lm=lm, lm_weight=0.5, bos_index=5, eos_index=5
    )
    with pytest.raises(HparamsError, match="bos_index"):
        ctc_prefix_beam_search(log_probs, lengths, lm=lm, lm_weight=0.5)
    with pytest.raises(HparamsError, match="no lm"):
        ctc_prefix_beam_search(log_probs, lengths, lm_weight=0.5)


@pytest.mark.parametrize("recurrent", [True, False])
def test_prefix_lm_scores_match_scoring_the_whole_prefix(recurrent):
    torch.manual_seed(2)
    lm = (
        LSTMLanguageModel(vocab_size=6, embedding_dim=8, hidden_size=16, num_layers=2)
        if recurrent
        else TransformerLanguageModel(vocab_size=6, d_model=16, num_heads=2, num_layers=1, ffn_dim=32)
    ).eval()
    scores = PrefixLanguageModelScores(lm, bos_index=5)
    scores.ensure([(1, 2, 4), (2,)])  # missing ancestors are scored too
    scores.ensure([(1, 3), (1, 2, 4, 4)])
    # A recurrent LM extends each prefix from its parent's state; the Transformer LM rescans it.
    assert scores.stateless is not recurrent
    for prefix in [(), (1,), (1, 2), (1, 2, 4), (2,), (1, 3), (1, 2, 4, 4)]:
        with torch.no_grad():
            whole = lm(torch.tensor([(5,) + prefix]), torch.tensor([len(prefix) + 1]))[0, -1]
        torch.testing.assert_close(torch.from_numpy(scores[prefix]), whole, atol=1e-5, rtol=1e-5)
