"""SentencePiece wrapper: training from a manifest, encode/decode, save/load, pickling, errors."""
from __future__ import annotations

import json
import pickle
import random

import pytest

from speechkit.errors import DataError, ManifestError
from speechkit.tokenizers import SentencePieceTokenizer

WORDS = ("THE QUICK BROWN FOX JUMPS OVER A LAZY DOG WHILE SPEECH MODELS LEARN FROM AUDIO AND TEXT "
         "HELLO WORLD TRAIN VALID TEST").split()


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    rng = random.Random(0)
    rows = {f"utt{i}": {"wav": f"/nowhere/{i}.flac", "duration": 1.0,
                        "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 10)))}
            for i in range(300)}
    path = tmp_path_factory.mktemp("tok") / "train.json"
    path.write_text(json.dumps(rows))
    return path, [row["text"] for row in rows.values()]


@pytest.mark.parametrize("model_type, vocab_size", [("unigram", 40), ("bpe", 60), ("char", 28)])
def test_train_from_manifest_and_round_trip(tmp_path, manifest, model_type, vocab_size):
    path, texts = manifest
    tokenizer = SentencePieceTokenizer.train(path, tmp_path, vocab_size=vocab_size, model_type=model_type)
    assert len(tokenizer) == vocab_size and tokenizer.unk_id == 0
    assert (tmp_path / f"{vocab_size}_{model_type}.model").is_file()
    for text in texts[:20]:
        ids = tokenizer.encode(text)
        assert all(0 <= index < vocab_size for index in ids)
        assert tokenizer.decode(ids) == text
        pieces = tokenizer.encode_as_pieces(text)
        assert [tokenizer.piece_to_id(piece) for piece in pieces] == ids
        assert tokenizer.decode_pieces(pieces) == text
    if model_type == "char":
        assert tokenizer.encode_as_pieces("AB") == ["▁", "A", "B"]
    else:
        # pieces span several characters: fewer tokens than characters overall
        assert sum(len(tokenizer.encode(t)) for t in texts) < sum(len(t) for t in texts)


def test_save_load_pickle_and_special_ids(tmp_path, manifest):
    path, texts = manifest
    tokenizer = SentencePieceTokenizer.train(path, tmp_path / "a", vocab_size=50, model_type="bpe",
                                             bos_id=1, eos_id=2, model_name="tok")
    assert (tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id) == (1, 2, -1)
    ids = tokenizer.encode(texts[0], add_bos=True, add_eos=True)
    assert ids[0] == 1 and ids[-1] == 2 and tokenizer.decode(ids) == texts[0]
    tokenizer.save(tmp_path / "b" / "copy.model")
    assert (tmp_path / "b" / "copy.vocab").is_file()
    loaded = SentencePieceTokenizer.load(tmp_path / "b" / "copy.model")
    assert [loaded.encode(text) for text in texts[:10]] == [tokenizer.encode(text) for text in texts[:10]]
    assert loaded.id_to_piece(ids[1]) == tokenizer.id_to_piece(ids[1])
    clone = pickle.loads(pickle.dumps(tokenizer))
    assert clone.encode(texts[1]) == tokenizer.encode(texts[1]) and len(clone) == 50


def test_train_from_texts_is_deterministic(tmp_path, manifest):
    _, texts = manifest
    first = SentencePieceTokenizer.train(texts, tmp_path / "1", vocab_size=40)
    second = SentencePieceTokenizer.train(iter(texts), tmp_path / "2", vocab_size=40)
    assert [first.id_to_piece(i) for i in range(40)] == [second.id_to_piece(i) for i in range(40)]


def test_errors(tmp_path, manifest):
    path, texts = manifest
    rows = {"a": {"text": "HELLO"}, "b": {"words": "WORLD"}}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(rows))
    with pytest.raises(ManifestError, match=r"bad\.json: id 'b': unknown field 'words'"):
        SentencePieceTokenizer.train(bad, tmp_path, vocab_size=10)
    bad.write_text(json.dumps({"a": {"words": "HELLO"}, "b": {"words": 3}}))
    with pytest.raises(ManifestError, match=r"bad\.json: id 'a' has no field 'text'"):
        SentencePieceTokenizer.train(bad, tmp_path, vocab_size=10)
    with pytest.raises(ManifestError, match=r"bad\.json: id 'b': field 'words' must be text"):
        SentencePieceTokenizer.train(bad, tmp_path, vocab_size=10, text_field="words")
    with pytest.raises(DataError, match="too small for this vocab_size"):
        SentencePieceTokenizer.train(texts, tmp_path, vocab_size=5000)
    with pytest.raises(DataError, match="model_type"):
        SentencePieceTokenizer.train(texts, tmp_path, vocab_size=40, model_type="wordpiece")
    with pytest.raises(DataError, match="no text"):
        SentencePieceTokenizer.train(["", "  "], tmp_path, vocab_size=40)
    with pytest.raises(DataError, match=r"not found: .*missing\.model"):
        SentencePieceTokenizer.load(tmp_path / "missing.model")
    (tmp_path / "junk.model").write_bytes(b"not a model")
    with pytest.raises(DataError, match=r"cannot load .*junk\.model"):
        SentencePieceTokenizer.load(tmp_path / "junk.model")
    tokenizer = SentencePieceTokenizer.train(texts, tmp_path / "ok", vocab_size=40)
    with pytest.raises(DataError, match="token id 40 is outside"):
        tokenizer.decode([3, 40])
    with pytest.raises(DataError, match="no bos piece"):
        tokenizer.encode("HELLO", add_bos=True)


def test_train_from_a_manifest_with_placeholders_needs_no_replacements(tmp_path, manifest):
    """Only the transcripts are read: `$data_root` audio paths may stay unresolved (as in data.md)."""
    path, texts = manifest
    rows = json.loads(path.read_text())
    for row in rows.values():
        row["wav"] = "$data_root/" + row["wav"].rsplit("/", 1)[1]
    placeholders = tmp_path / "train.json"
    placeholders.write_text(json.dumps(rows))
    tokenizer = SentencePieceTokenizer.train(placeholders, tmp_path / "tok", vocab_size=28, model_type="char")
    assert tokenizer.decode(tokenizer.encode(texts[0])) == texts[0]


# -- text normalisation and character coverage ---------------------------------------------------------------

MIXED = [f"{word.capitalize()} {other.lower()}, {third}!" for word, other, third in
         zip(WORDS * 6, WORDS[3:] * 6 + WORDS[:3] * 6, WORDS[7:] * 6 + WORDS[:7] * 6)]


def _characters(texts) -> set:
    return {char for text in texts for char in text if not char.isspace()}


def test_character_vocabulary_is_sized_from_the_data(tmp_path, manifest):
    _, texts = manifest
    characters = _characters(texts)
    tokenizer = SentencePieceTokenizer.train(texts, tmp_path, vocab_size=200, model_type="char", unk_id=1,
                                             pad_id=0, bos_id=2, eos_id=3)
    assert tokenizer.vocab_size == len(characters) + 1 + 4  # characters, word boundary, 4 special pieces
    assert tokenizer.alphabet() == characters
    assert not tokenizer.training_coverage and tokenizer.training_coverage.coverage == 1.0


def test_too_small_character_vocabulary_refuses_naming_characters(tmp_path):
    needed = len(_characters(MIXED)) + 1 + 4
    with pytest.raises(DataError) as error:
        SentencePieceTokenizer.train(MIXED, tmp_path, vocab_size=40, model_type="char", unk_id=1, pad_id=0,
                                     bos_id=2, eos_id=3, hard_vocab_limit=False)
    message = str(error.value)
    assert "characters outside the alphabet" in message and "e.g. line " in message
    assert f"vocab_size {needed} holds them all" in message
    assert "unknown_characters" in message


def test_normalizer_makes_mixed_case_fit(tmp_path):
    from speechkit.data.text_policy import TextNormalizer

    upper = TextNormalizer(case="upper")
    tokenizer = SentencePieceTokenizer.train(MIXED, tmp_path, vocab_size=40, model_type="char", unk_id=1,
                                             pad_id=0, bos_id=2, eos_id=3, normalizer=upper)
    assert tokenizer.alphabet() == _characters(WORDS)
    assert tokenizer.decode(tokenizer.encode("NINE")) == "NINE"
    assert tokenizer.unk_id not in tokenizer.encode(TextNormalizer(case="upper")(MIXED[0]))


@pytest.mark.parametrize("policy", ["unknown", "drop_utterance", "drop_character"])
def test_policies_let_a_small_vocabulary_train(tmp_path, policy):
    tokenizer = SentencePieceTokenizer.train(MIXED, tmp_path, vocab_size=30, model_type="char", unk_id=1,
                                             pad_id=0, bos_id=2, eos_id=3, unknown_characters=policy,
                                             hard_vocab_limit=False)
    report = tokenizer.training_coverage
    assert len(tokenizer.alphabet()) == tokenizer.vocab_size - 5
    assert tokenizer.vocab_size == 30 or policy == "drop_utterance" and tokenizer.vocab_size < 30
    if policy == "unknown":  # the rare characters stayed in the text: the tokenizer cannot spell them
        assert report and report.coverage < 1.0
    else:
        assert not report


def test_a_policy_that_does_not_exist_and_text_all_dropped(tmp_path):
    with pytest.raises(DataError, match="'ignore' does not exist"):
        SentencePieceTokenizer.train(MIXED, tmp_path, vocab_size=40, unknown_characters="ignore")
    with pytest.raises(DataError, match="leaves none of its 2 utterances with text"):
        SentencePieceTokenizer.train(["AB", "CD"], tmp_path, vocab_size=3, model_type="char",
                                     unknown_characters="drop_utterance")
