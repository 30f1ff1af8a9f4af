"""PaddedBatch: padding, absolute lengths that match the items, lists for the rest, device moves."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from speechkit.data.batch import PaddedBatch, PaddedData, pad_sequences
from speechkit.data.dataset import DynamicItemDataset
from speechkit.errors import DataError


def test_lengths_match_source_items_and_padding_is_zero():
    sizes = [5, 3, 8, 1]
    examples = [{"id": f"u{i}", "sig": torch.randn(n), "words": "x" * n} for i, n in enumerate(sizes)]
    batch = PaddedBatch(examples)
    assert len(batch) == 4
    assert batch.id == ["u0", "u1", "u2", "u3"]
    assert batch.words == [e["words"] for e in examples]
    assert batch.sig.data.shape == (4, 8)
    assert batch.sig.lengths.dtype == torch.int64
    assert batch.sig.lengths.tolist() == sizes
    for row, example in enumerate(examples):
        n = sizes[row]
        assert torch.equal(batch.sig.data[row, :n], example["sig"])
        assert torch.all(batch.sig.data[row, n:] == 0)
    wavs, wav_lens = batch.sig
    assert wavs is batch.sig.data and wav_lens is batch.sig.lengths
    assert batch["sig"] is batch.sig and "sig" in batch and "nope" not in batch


def test_multidimensional_items_pad_the_first_dimension():
    feats = [torch.ones(4, 3), torch.ones(2, 3) * 2]
    tokens = [np.array([1, 2, 3]), np.array([4])]
    batch = PaddedBatch([{"feats": f, "tokens": t} for f, t in zip(feats, tokens)], pad_values={"tokens": -1})
    assert batch.feats.data.shape == (2, 4, 3)
    assert batch.feats.lengths.tolist() == [4, 2]
    assert batch.tokens.data.tolist() == [[1, 2, 3], [4, -1, -1]]
    assert batch.tokens.lengths.tolist() == [3, 1]
    assert batch.feats.mask().tolist() == [[True] * 4, [True, True, False, False]]


def test_scalar_tensors_are_stacked_and_padded_keys_can_be_forced():
    batch = PaddedBatch([{"label": torch.tensor(3), "n": [1, 2]}, {"label": torch.tensor(5), "n": [7]}])
    assert torch.equal(batch.label, torch.tensor([3, 5]))
    assert batch.n == [[1, 2], [7]]
    forced = PaddedBatch([{"n": [1, 2]}, {"n": [7]}], padded_keys=["n"])
    assert forced.n.data.tolist() == [[1, 2], [7, 0]] and forced.n.lengths.tolist() == [2, 1]


def test_bad_batches_raise_data_errors():
    with pytest.raises(DataError, match="at least one"):
        PaddedBatch([])
    with pytest.raises(DataError, match="'feats'.*item 1"):
        PaddedBatch([{"feats": torch.ones(3, 4)}, {"feats": torch.ones(3, 5)}])
    with pytest.raises(DataError, match="example 1 has keys"):
        PaddedBatch([{"a": 1}, {"b": 2}])
    with pytest.raises(DataError, match="dtype"):
        pad_sequences([torch.ones(2), torch.ones(2, dtype=torch.int64)])
    with pytest.raises(AttributeError, match="no field 'nope'"):
        _ = PaddedBatch([{"a": 1}]).nope


def test_to_and_pin_memory_keep_fields_and_pickle_round_trip():
    batch = PaddedBatch([{"id": "a", "sig": torch.ones(2)}, {"id": "b", "sig": torch.ones(3)}])
    moved = batch.to(torch.float64)
    assert moved is batch and batch.sig.data.dtype == torch.float64
    assert batch.sig.lengths.dtype == torch.int64  # a dtype change never makes lengths relative or float
    batch = PaddedBatch([{"id": "a", "sig": torch.ones(2)}]).to("cpu")
    assert batch.sig.lengths.dtype == torch.int64
    if torch.cuda.is_available():
        assert batch.pin_memory().sig.data.is_pinned()
    restored = pickle.loads(pickle.dumps(batch))
    assert restored.id == ["a"] and torch.equal(restored.sig.data, batch.sig.data) and len(restored) == 1
    assert isinstance(restored.sig, PaddedData)


def test_dataloader_with_padded_batch_collate_from_dataset():
    data = {f"u{i}": {"duration": float(n)} for i, n in enumerate([4, 2, 7, 5, 3])}
    dataset = DynamicItemDataset(data)
    dataset.add_dynamic_item(lambda d: torch.arange(int(d), dtype=torch.float32), takes=["duration"],
                             provides=["sig"])
    dataset.set_output_keys(["id", "sig"])
    loader = torch.utils.data.DataLoader(dataset, batch_size=2, collate_fn=PaddedBatch)
    seen = {}
    for batch in loader:
        for data_id, length in zip(batch.id, batch.sig.lengths.tolist()):
            seen[data_id] = length
    assert seen == {data_id: int(row["duration"]) for data_id, row in data.items()}


def test_audio_batches_from_a_manifest_have_the_files_lengths(tmp_path):
    import json

    from speechkit.data import audio

    sizes = {"a": 1600, "b": 400, "c": 2400, "d": 800, "e": 1200}
    rows = {}
    for data_id, samples in sizes.items():
        path = tmp_path / f"{data_id}.flac"
        audio.write(path, torch.rand(samples) - 0.5, 16000)
        rows[data_id] = {"wav": f"$data_root/{data_id}.flac", "duration": samples / 16000}
    (tmp_path / "m.json").write_text(json.dumps(rows))
    dataset = DynamicItemDataset.from_json(tmp_path / "m.json", replacements={"data_root": str(tmp_path)})
    dataset.add_dynamic_item(audio.read, takes=["wav"], provides=["sig"])
    dataset.set_output_keys(["id", "sig"])
    loader = torch.utils.data.DataLoader(dataset, batch_size=3, collate_fn=PaddedBatch)
    for batch in loader:
        for row, data_id in enumerate(batch.id):
            length = int(batch.sig.lengths[row])
            assert length == audio.info(tmp_path / f"{data_id}.flac").frames == sizes[data_id]
            assert torch.equal(batch.sig.data[row, :length], audio.read(tmp_path / f"{data_id}.flac"))
            assert torch.all(batch.sig.data[row, length:] == 0)
