"""Label encoders: specials, encode/decode, unknown labels, save/load as text, CTC collapse."""
from __future__ import annotations

import pytest
import torch

from speechkit.data.batch import PaddedBatch
from speechkit.data.encoders import CTCLabelEncoder, LabelEncoder
from speechkit.errors import DataError

TEXTS = ["HELLO WORLD", "HI THERE", "IT'S OK"]


def test_char_encoder_round_trip_and_specials():
    encoder = LabelEncoder.from_texts(TEXTS, bos="<s>", eos="</s>", unk="<unk>")
    assert encoder.labels[:3] == ["<s>", "</s>", "<unk>"]
    assert (encoder.bos_index, encoder.eos_index, encoder.unk_index, encoder.blank_index) == (0, 1, 2, None)
    assert encoder.labels[3:] == sorted(set("".join(TEXTS)))
    for text in TEXTS:
        ids = encoder.encode(text)
        assert len(ids) == len(text)
        assert encoder.decode_text(ids) == text
    ids = encoder.encode("HI")
    assert encoder.with_bos(ids) == [0] + ids and encoder.with_eos(ids) == ids + [1]
    assert encoder.decode_text(encoder.with_eos(encoder.with_bos(ids))) == "HI"
    assert encoder.decode(encoder.with_bos(ids), skip_special=False) == ["<s>", "H", "I"]
    assert encoder.encode("HZ") == [encoder.index_of("H"), 2]  # Z is unknown -> unk
    tensor = encoder.encode_tensor("OK")
    assert tensor.dtype == torch.int64 and encoder.decode_text(tensor) == "OK"


def test_word_encoder_and_token_lists():
    encoder = LabelEncoder.from_texts(TEXTS, unit="word", unk="<unk>")
    assert "HELLO" in encoder and "H" not in encoder
    ids = encoder.encode("HI THERE WORLD")
    assert len(ids) == 3 and encoder.decode_text(ids) == "HI THERE WORLD"
    assert encoder.encode(["OK", "nope"]) == [encoder.index_of("OK"), encoder.unk_index]


def test_errors_name_the_label_or_id():
    encoder = LabelEncoder(["A", "B"])
    with pytest.raises(DataError, match="'Z' is not in the encoder"):
        encoder.encode("AZ")
    with pytest.raises(DataError, match="id 7 is outside"):
        encoder.decode([7])
    with pytest.raises(DataError, match="no bos label"):
        encoder.with_bos([1])
    with pytest.raises(DataError, match="already in the encoder"):
        encoder.add_label("A")
    with pytest.raises(DataError, match="unit"):
        LabelEncoder(unit="phone")


def test_save_and_load_keep_everything_including_odd_labels(tmp_path):
    encoder = LabelEncoder(["a", " ", "\n", '"', "é", "@x", "# not a comment"], unit="char", eos="<eos>",
                           unk="<unk>")
    encoder.save(tmp_path / "sub" / "labels.txt")
    loaded = LabelEncoder.load(tmp_path / "sub" / "labels.txt")
    assert loaded == encoder
    assert loaded.encode("a é\n") == encoder.encode("a é\n")
    assert loaded.eos_index == 0 and loaded.unk_index == 1


def test_load_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "labels.txt"
    path.write_text("hello\n")
    with pytest.raises(DataError, match=r"labels\.txt, line 1: not a label encoder"):
        LabelEncoder.load(path)
    path.write_text('# speechkit label encoder\n@unit char\n"A"\nB\n')
    with pytest.raises(DataError, match=r"labels\.txt, line 4: a label must be a JSON string"):
        LabelEncoder.load(path)
    path.write_text('# speechkit label encoder\n@colour red\n"A"\n')
    with pytest.raises(DataError, match=r"line 2: unknown setting"):
        LabelEncoder.load(path)
    path.write_text('# speechkit label encoder\n"A"\n"A"\n')
    with pytest.raises(DataError, match=r"label 1: .*already"):
        LabelEncoder.load(path)
    with pytest.raises(DataError, match=r"cannot read .*missing\.txt"):
        LabelEncoder.load(tmp_path / "missing.txt")
    LabelEncoder(["A"]).save(path)  # no blank at 0
    with pytest.raises(DataError, match="blank at id 0"):
        CTCLabelEncoder.load(path)


def test_ctc_encoder_blank_first_and_collapse(tmp_path):
    encoder = CTCLabelEncoder.from_texts(["ABBA"], unk="<unk>")
    assert encoder.labels == ["<blank>", "<unk>", "A", "B"] and encoder.blank_index == 0
    a, b = encoder.index_of("A"), encoder.index_of("B")
    path = [0, a, a, 0, b, 0, b, b, 0, a, 0]
    assert encoder.collapse(path) == [a, b, b, a]
    assert encoder.decode_ctc(torch.tensor(path)) == "ABBA"
    assert encoder.collapse([]) == []
    encoder.save(tmp_path / "ctc.txt")
    loaded = CTCLabelEncoder.load(tmp_path / "ctc.txt")
    assert loaded == encoder and isinstance(loaded, CTCLabelEncoder)
    with pytest.raises(DataError, match="needs a blank"):
        CTCLabelEncoder(["A"], blank=None)


def test_encoded_transcripts_pad_with_absolute_lengths():
    encoder = CTCLabelEncoder.from_texts(TEXTS)
    batch = PaddedBatch([{"tokens": encoder.encode_tensor(text)} for text in TEXTS])
    assert batch.tokens.lengths.tolist() == [len(text) for text in TEXTS]
    for row, text in enumerate(TEXTS):
        assert encoder.decode_text(batch.tokens.data[row, : batch.tokens.lengths[row]]) == text
