"""Lexicon-constrained CTC beam search: only known words, the exact best such labeling, batch invariance."""

from __future__ import annotations

import pytest
import torch

from speechkit.decoding import Lexicon, ctc_prefix_beam_search
from speechkit.errors import DataError
from speechkit.tokenizers import SentencePieceTokenizer
from tests.helpers.batch_invariance import assert_batch_invariant
from tests.helpers.ctc_paths import brute_force_labelings

# Token 1 starts a word; words "1 2" and "1 3 4" (think "▁A" and "▁BC").
WORDS = [(1, 2), (1, 3, 4)]


def spells_known_words(tokens, words=WORDS) -> bool:
    """Whether ``tokens`` splits into a sequence of ``words`` (each beginning with the word-start token 1)."""
    if not tokens:
        return True
    return any(tuple(tokens[: len(w)]) == w and spells_known_words(tokens[len(w):], words) for w in words)


def test_lexicon_extends_partial_words_and_rejects_the_rest():
    lexicon = Lexicon(WORDS, word_start=[1])
    assert len(lexicon) == 2
    assert lexicon.extend((), 1) == (1,)
    assert lexicon.extend((), 2) is None  # a hypothesis starts with a word start
    assert lexicon.extend((1,), 3) == (1, 3) and lexicon.extend((1, 3), 2) is None
    assert lexicon.extend((1, 2), 1) == (1,)  # "1 2" is a word: a new one may start
    assert lexicon.extend((1, 3), 1) is None  # "1 3" is not: it may not be left unfinished
    assert lexicon.is_complete(()) and lexicon.is_complete((1, 3, 4)) and not lexicon.is_complete((1, 3))
    with pytest.raises(DataError, match="word-start"):
        Lexicon([(2, 1)], word_start=[1])
    with pytest.raises(DataError, match="at least one word"):
        Lexicon([], word_start=[1])


def test_beam_search_with_lexicon_finds_the_best_labeling_of_known_words():
    torch.manual_seed(4)
    lexicon = Lexicon(WORDS, word_start=[1])
    for _ in range(4):
        log_probs = (torch.randn(6, 5) * 2).log_softmax(-1)
        exact = {label: score for label, score in brute_force_labelings(log_probs).items()
                 if label and spells_known_words(label)}
        best_label, best_score = max(exact.items(), key=lambda item: item[1])
        tokens, score = ctc_prefix_beam_search(log_probs[None], torch.tensor([6]), beam_size=100,
                                               return_nbest=True, lexicon=lexicon)[0][0]
        assert tuple(tokens) == best_label
        assert score == pytest.approx(best_score, abs=1e-5)


def test_beam_search_with_lexicon_is_batch_invariant_and_spells_only_known_words():
    torch.manual_seed(6)
    lexicon = Lexicon(WORDS, word_start=[1])
    items = [(torch.randn(n, 5) * 2).log_softmax(-1) for n in (12, 5, 20, 9)]
    hyps = assert_batch_invariant(lambda x, n: ctc_prefix_beam_search(x, n, beam_size=8, lexicon=lexicon),
                                  items)
    assert all(spells_known_words(h) for h in hyps)
    plain = [ctc_prefix_beam_search(x[None], torch.tensor([len(x)]), beam_size=8)[0] for x in items]
    assert not all(spells_known_words(h) for h in plain)  # the constraint changed something


def test_an_unfinished_word_is_returned_only_when_nothing_finished():
    lexicon = Lexicon(WORDS, word_start=[1])
    # Frames that clearly say "1 3": the only labelings in the lexicon's reach end inside "1 3 4".
    log_probs = torch.tensor([[0.01, 0.96, 0.01, 0.01, 0.01], [0.01, 0.01, 0.01, 0.96, 0.01]]).log()
    nbest = ctc_prefix_beam_search(log_probs[None], torch.tensor([2]), beam_size=4, return_nbest=True,
                                   lexicon=lexicon)[0]
    assert nbest[0][0] == [1, 2]  # "1 2" is finished: it wins although "1 3" is far more likely
    assert all(spells_known_words(tokens) for tokens, _ in nbest)


def test_lexicon_from_a_sentencepiece_tokenizer(tmp_path):
    tokenizer = SentencePieceTokenizer.train(["a bad cab", "dead beef", "a fed bee"] * 10, tmp_path / "tok",
                                             vocab_size=12, model_type="char")
    lexicon = Lexicon.from_tokenizer(tokenizer, "a bad cab bad".split())
    assert len(lexicon) == 3
    assert lexicon.word_start == {tokenizer.piece_to_id("\u2581")}
    spelled = tokenizer.encode("cab")
    partial = ()
    for token in spelled:
        partial = lexicon.extend(partial, token)
    assert lexicon.is_complete(partial)
    assert lexicon.extend(tuple(spelled[:1]), tokenizer.piece_to_id("e")) is None  # no known word starts "e"


def test_a_manifests_lexicon_holds_the_words_as_the_normaliser_writes_them(tmp_path):
    import json

    from speechkit.data.text_policy import TextNormalizer

    tokenizer = SentencePieceTokenizer.train(["A BAD CAB", "DEAD BEEF"] * 10, tmp_path / "tok", vocab_size=12,
                                             model_type="char")
    manifest = tmp_path / "train.json"
    rows = {"u1": {"wav": "a.flac", "duration": 1.0, "text": "A bad, cab."},
            "u2": {"wav": "b.flac", "duration": 1.0, "text": "\u201cDead\u201d beef!"}}
    manifest.write_text(json.dumps(rows))
    normalizer = TextNormalizer(case="upper", punctuation="remove")
    lexicon = Lexicon.from_manifest(str(manifest), tokenizer, normalizer=normalizer)
    words = {tuple(tokenizer.encode(word)) for word in ("A", "BAD", "CAB", "DEAD", "BEEF")}
    assert lexicon.words == words  # as written ("bad,", "cab.") no word could be spelled
