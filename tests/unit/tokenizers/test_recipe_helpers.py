"""Tokenizer helpers recipes share: load-or-train, a transcript's token sequences, a manifest's lexicon."""
from __future__ import annotations

import json

import pytest
import torch

from speechkit.decoding import Lexicon
from speechkit.errors import DataError
from speechkit.tokenizers import SentencePieceTokenizer, token_sequences

TEXTS = ["THE CAT SAT", "A DOG RAN FAST", "THE DOG SAT DOWN", "CATS AND DOGS"] * 20


@pytest.fixture
def manifest(tmp_path):
    rows = {f"utt{i}": {"wav": f"$data_root/{i}.flac", "duration": 1.0, "text": text}
            for i, text in enumerate(TEXTS)}
    path = tmp_path / "train.json"
    path.write_text(json.dumps(rows))
    return path


def test_load_or_train_trains_once_then_loads(tmp_path, manifest):
    model = tmp_path / "tok" / "tokenizer.model"
    trained = SentencePieceTokenizer.load_or_train(model, manifest, vocab_size=24, model_type="char",
                                                   replacements={"data_root": str(tmp_path)})
    assert model.is_file() and (tmp_path / "tok" / "build").is_dir()
    stamp = model.stat().st_mtime_ns
    again = SentencePieceTokenizer.load_or_train(model, manifest, vocab_size=24, model_type="char",
                                                   replacements={"data_root": str(tmp_path)})
    assert model.stat().st_mtime_ns == stamp and again.encode("THE CAT") == trained.encode("THE CAT")
    with pytest.raises(DataError, match=rf"{model} has \d+ pieces but vocab_size is 10"):
        SentencePieceTokenizer.load_or_train(model, manifest, vocab_size=10)


def test_token_sequences_and_manifest_lexicon(tmp_path, manifest):
    tokenizer = SentencePieceTokenizer.train(manifest, tmp_path, vocab_size=24, model_type="char",
                                             bos_id=2, eos_id=3, unk_id=1, pad_id=0,
                                             replacements={"data_root": str(tmp_path)})
    item = token_sequences(tokenizer, bos_index=2, eos_index=3)
    bos, eos, tokens = list(item("THE CAT"))
    ids = tokenizer.encode("THE CAT")
    assert torch.equal(bos, torch.tensor([2] + ids)) and torch.equal(eos, torch.tensor(ids + [3]))
    assert torch.equal(tokens, torch.tensor(ids)) and tokens.dtype == torch.long
    lexicon = Lexicon.from_manifest(str(manifest), tokenizer, {"data_root": str(tmp_path)})
    assert len(lexicon) == len({w for text in TEXTS for w in text.split()})
    assert lexicon.is_complete(tuple(tokenizer.encode("DOGS")))
