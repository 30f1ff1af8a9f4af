"""Word lists (a model folder's closed vocabulary): written and read back, refused by file and line when bad,
and bound to a CTC prefix beam search."""
from __future__ import annotations

import json

import pytest
import torch

from speechkit.decoding import CTCPrefixBeamSearch, Lexicon, WordList, ctc_prefix_beam_search
from speechkit.decoding import word_list as word_list_module
from speechkit.errors import DataError


def test_a_word_list_is_sorted_unique_and_reads_back_as_written(tmp_path):
    words = WordList(["NINE", "FIVE", "NINE", "DON'T", "ÉTÉ"])
    assert words.words == ("DON'T", "FIVE", "NINE", "ÉTÉ") and len(words) == 4
    words.save(tmp_path / "vocabulary.txt")
    assert (tmp_path / "vocabulary.txt").read_text(encoding="utf-8") == "DON'T\nFIVE\nNINE\nÉTÉ\n"
    (tmp_path / "spaced.txt").write_text("\n  FIVE \r\n\nNINE\n", encoding="utf-8")  # blank lines, CRLF
    assert WordList.load(tmp_path / "spaced.txt").words == ("FIVE", "NINE")


def test_a_manifest_gives_its_normalised_transcripts_words(tmp_path):
    rows = {"a": {"wav": "$data_root/a.flac", "duration": 1.0, "text": "Nine, five"},
            "b": {"wav": "$data_root/b.flac", "duration": 1.0, "text": "nine TWO"}}
    (tmp_path / "train.json").write_text(json.dumps(rows))
    words = WordList.from_manifest(str(tmp_path / "train.json"), {"data_root": str(tmp_path)},
                                   normalizer=lambda text: text.upper().replace(",", ""))
    assert words.words == ("FIVE", "NINE", "TWO")


@pytest.mark.parametrize("content, message", [
    (b"FIVE\n\xff\n", r"bad\.txt: a word list must be UTF-8"),
    (b"FIVE\nNINE TWO\n", r"bad\.txt, line 2: one word per line, without white space, got 'NINE TWO'"),
    (b"FIVE\n" + b"A" * 300 + b"\n", r"bad\.txt, line 2: a word of 300 characters is longer than the 256"),
    (b"\n \n", r"bad\.txt: the word list holds no word"),
])
def test_bad_word_lists_are_refused_with_the_file_and_line(tmp_path, content, message):
    (tmp_path / "bad.txt").write_bytes(content)
    with pytest.raises(DataError, match=message):
        WordList.load(tmp_path / "bad.txt")


def test_an_oversized_word_list_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(word_list_module, "MAX_FILE_BYTES", 10)
    (tmp_path / "big.txt").write_text("FIVE\nNINE\nSEVEN\n")
    with pytest.raises(DataError, match=r"big\.txt: a word list of 16 bytes is larger than the 10 allowed"):
        WordList.load(tmp_path / "big.txt")
    with pytest.raises(DataError, match="at least one word"):
        WordList([])
    with pytest.raises(DataError, match="non-empty string"):
        WordList(["FIVE", ""])


def test_with_lexicon_binds_the_closed_vocabulary_to_the_same_search():
    torch.manual_seed(0)
    log_probs = torch.randn(2, 30, 6).log_softmax(-1)
    lengths = torch.tensor([30, 21])
    lexicon = Lexicon([(1, 2), (1, 3, 4), (1, 5)], word_start=[1])
    search = CTCPrefixBeamSearch(beam_size=6, length_bonus=0.5)
    closed = search.with_lexicon(lexicon)
    expected = ctc_prefix_beam_search(log_probs, lengths, beam_size=6, length_bonus=0.5, lexicon=lexicon)
    assert closed(log_probs, lengths) == expected
    assert search(log_probs, lengths) != expected  # the original search is left free (and differs here)
    assert closed.with_lexicon(None)(log_probs, lengths) == search(log_probs, lengths)
    stream = closed.stream()
    for chunk in log_probs[0].split(7):
        stream.accept(chunk)
    assert stream.finish() == expected[0]
