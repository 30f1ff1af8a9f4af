"""A model folder that carries its training vocabulary (``vocabulary.txt``): its beam search spells only
those words, exactly as the search with the same lexicon over the same scores; bad word lists are refused
by name."""
from __future__ import annotations

import pytest
import torch

from speechkit.decoding import Lexicon, WordList, ctc_prefix_beam_search
from speechkit.errors import DataError, HparamsError
from speechkit.models.encoders import CTCHead
from speechkit.pretrained import EncoderASR
from speechkit.pretrained.loading import save_weights
from speechkit.tokenizers import SentencePieceTokenizer

WORDS = ["ACE", "BAD", "CAB", "DAB", "FACE"]

YAML = """\
sample_rate: 16000
compute_features: !new:speechkit.features.Fbank
    n_mels: 20
ctc_head: !new:speechkit.models.CTCHead
    d_model: 20
    vocab_size: {vocab_size}
tokenizer: !name:speechkit.tokenizers.SentencePieceTokenizer
vocabulary: {vocabulary}
modules:
    compute_features: !ref <compute_features>
    ctc_head: !ref <ctc_head>
encoder_pipeline: [compute_features, ctc_head]
{decoder}
pretrainer: !new:speechkit.pretrained.Pretrainer
    loadables:
        ctc_head: !ref <ctc_head>
        tokenizer: !ref <tokenizer>
{vocabulary_loadable}
    paths:
        ctc_head: ctc_head.safetensors
        tokenizer: tokenizer.model
{vocabulary_path}
"""
BEAM = """decoder: !new:speechkit.decoding.CTCPrefixBeamSearch
    beam_size: 8
    blank_index: 0"""


def _folder(tmp_path, name: str, vocabulary: bool = True, decoder: str = BEAM):
    """A model folder with a random CTC head over filterbank features (it emits tokens on every frame)."""
    tokenizer = SentencePieceTokenizer.train([" ".join(WORDS), "BAD CAB DAB", "FACE ACE"] * 20,
                                             tmp_path / f"sp-{name}", vocab_size=8, model_type="char",
                                             hard_vocab_limit=False)
    folder = tmp_path / name
    folder.mkdir()
    torch.manual_seed(0)
    save_weights(CTCHead(20, tokenizer.vocab_size).state_dict(), folder / "ctc_head.safetensors")
    tokenizer.save(folder / "tokenizer.model")
    if vocabulary:
        WordList(WORDS).save(folder / "vocabulary.txt")
    (folder / "hyperparams.yaml").write_text(YAML.format(
        vocab_size=tokenizer.vocab_size, decoder=decoder,
        vocabulary="!name:speechkit.decoding.WordList" if vocabulary else "null",
        vocabulary_loadable="        vocabulary: !ref <vocabulary>" if vocabulary else "",
        vocabulary_path="        vocabulary: vocabulary.txt" if vocabulary else ""))
    return folder, tokenizer


def _batch():
    torch.manual_seed(1)
    wavs = [torch.randn(n) * 0.1 for n in (16000, 9000, 12000)]
    return torch.nn.utils.rnn.pad_sequence(wavs, batch_first=True), torch.tensor([len(w) for w in wavs])


def test_a_folder_with_a_vocabulary_spells_only_its_words(hub_server, tmp_path):
    closed, tokenizer = _folder(tmp_path, "closed")
    hub_server.repos["org/closed"] = {"main": {p.name: p.read_bytes() for p in closed.iterdir()}}
    # From the Hub, untrusted: WordList is on the allowlist of a model folder's YAML.
    asr = EncoderASR.from_hparams("org/closed", savedir=tmp_path / "fetched")
    assert isinstance(asr.hparams["vocabulary"], WordList) and asr.hparams["vocabulary"].words == tuple(WORDS)
    batch, lengths = _batch()
    texts, tokens = asr.transcribe_batch(batch, lengths)
    assert all(texts) and all(word in WORDS for text in texts for word in text.split())
    scores, out_lengths = asr.encode_batch(batch, lengths)
    lexicon = Lexicon.from_tokenizer(tokenizer, WORDS)
    assert tokens == ctc_prefix_beam_search(scores, out_lengths, beam_size=8, lexicon=lexicon)
    # The same folder without the word list spells freely: the restriction above is not vacuous.
    free, _ = _folder(tmp_path, "free", vocabulary=False)
    free_texts, _ = EncoderASR.from_hparams(str(free)).transcribe_batch(batch, lengths)
    assert any(word not in WORDS for text in free_texts for word in text.split())


def test_bad_word_lists_and_searches_are_refused_by_name(tmp_path):
    folder, _ = _folder(tmp_path, "binary")
    (folder / "vocabulary.txt").write_bytes(b"ACE\n\xff\xfe\n")
    with pytest.raises(DataError, match=r"vocabulary\.txt: a word list must be UTF-8"):
        EncoderASR.from_hparams(str(folder))
    (folder / "vocabulary.txt").write_text("ACE\nBAD CAB\n")
    with pytest.raises(DataError, match=r"vocabulary\.txt, line 2: one word per line"):
        EncoderASR.from_hparams(str(folder))
    (folder / "vocabulary.txt").write_text("\n\n")
    with pytest.raises(DataError, match=r"vocabulary\.txt: the word list holds no word"):
        EncoderASR.from_hparams(str(folder))
    greedy, _ = _folder(tmp_path, "greedy", decoder="")
    with pytest.raises(HparamsError, match=r"a vocabulary restricts a CTC prefix beam search"):
        EncoderASR.from_hparams(str(greedy))
