"""DynamicItemDataset and the takes/provides pipeline: laziness, generators, outputs, subsets, errors."""
from __future__ import annotations

import pytest
import torch

from speechkit.data import audio
from speechkit.data.dataset import DynamicItemDataset, add_dynamic_item, set_output_keys
from speechkit.data.pipeline import DataPipeline, provides, takes
from speechkit.errors import AudioError, DataError


def make_data():
    return {
        "utt1": {"duration": 3.0, "words": "HELLO WORLD", "spk": "s1"},
        "utt2": {"duration": 1.0, "words": "HI", "spk": "s2"},
        "utt3": {"duration": 2.0, "words": "GOOD DAY", "spk": "s1"},
    }


def test_default_output_is_id_and_static_fields():
    dataset = DynamicItemDataset(make_data())
    assert len(dataset) == 3
    assert dataset.data_ids == ["utt1", "utt2", "utt3"]
    assert dataset[1] == {"id": "utt2", "duration": 1.0, "words": "HI", "spk": "s2"}


def test_dynamic_items_run_only_for_requested_keys():
    calls = {"upper": 0, "length": 0}

    @takes("words")
    @provides("lower")
    def lower(words):
        calls["upper"] += 1
        return words.lower()

    @takes("lower")
    @provides("n_chars")
    def length(text):
        calls["length"] += 1
        return len(text)

    dataset = DynamicItemDataset(make_data(), dynamic_items=[lower, length], output_keys=["id", "words"])
    dataset[0]
    assert calls == {"upper": 0, "length": 0}  # nothing dynamic requested, nothing computed

    dataset.set_output_keys(["lower"])
    assert dataset[0] == {"lower": "hello world"}
    assert calls == {"upper": 1, "length": 0}

    dataset.set_output_keys(["id", "lower", "n_chars"])  # both need `lower`: still computed once per item
    assert dataset[2] == {"id": "utt3", "lower": "good day", "n_chars": 8}
    assert calls == {"upper": 2, "length": 1}


def test_generator_item_advances_only_as_far_as_needed():
    steps = []

    @takes("words")
    @provides("first", "second")
    def pieces(words):
        steps.append("first")
        yield words.split()[0]
        steps.append("second")
        yield words.split()[-1]

    dataset = DynamicItemDataset(make_data(), dynamic_items=[pieces], output_keys=["first"])
    assert dataset[0] == {"first": "HELLO"}
    assert steps == ["first"]
    dataset.set_output_keys(["second"])
    assert dataset[0] == {"second": "WORLD"}
    assert steps == ["first", "first", "second"]


def test_generator_that_stops_early_and_generator_objects():
    @takes("words")
    @provides("one", "two")
    def short(words):
        yield words

    dataset = DynamicItemDataset(make_data(), dynamic_items=[short], output_keys=["two"])
    with pytest.raises(DataError, match="stopped after 1 values"):
        dataset[0]

    class Splitter:  # a callable object whose __call__ yields
        def __call__(self, words):
            yield words.split()[0]
            yield len(words.split())

    dataset.add_dynamic_item(Splitter(), takes=["words"], provides=["head", "count"])
    dataset.set_output_keys(["head", "count"])
    assert dataset[0] == {"head": "HELLO", "count": 2}


def test_non_generator_item_with_several_keys_returns_tuple():
    dataset = DynamicItemDataset(make_data())
    dataset.add_dynamic_item(lambda w: (w[0], len(w)), takes=["words"], provides=["initial", "size"])
    dataset.set_output_keys({"letter": "initial", "n": "size"})  # a dict renames outputs
    assert dataset[1] == {"letter": "H", "n": 2}
    dataset.add_dynamic_item(lambda w: w, takes=["words"], provides=["a", "b"])
    dataset.set_output_keys(["a"])
    with pytest.raises(DataError, match="returned str"):
        dataset[0]


def test_provides_decorator_order_does_not_matter():
    @provides("n")
    @takes("words")
    def count(words):
        return len(words)

    dataset = DynamicItemDataset(make_data(), dynamic_items=[count], output_keys=["n"])
    assert [dataset[i]["n"] for i in range(3)] == [11, 2, 8]


def test_tensor_items_from_audio_files(tmp_path):
    audio.write(tmp_path / "a.wav", torch.linspace(-0.5, 0.5, 800), 8000)
    data = {"a": {"wav": str(tmp_path / "a.wav"), "duration": 0.1}}
    dataset = DynamicItemDataset(data)

    @takes("wav")
    @provides("sig")
    def read(path):
        return audio.read(path)

    dataset.add_dynamic_item(read)
    dataset.set_output_keys(["sig"])
    signal = dataset[0]["sig"]
    assert signal.dtype == torch.float32 and signal.shape == (800,)


def test_audio_error_names_manifest_id(tmp_path):
    data = {"utt-missing": {"wav": str(tmp_path / "nope.wav"), "duration": 1.0}}
    dataset = DynamicItemDataset(data)
    dataset.add_dynamic_item(audio.read, takes=["wav"], provides=["sig"])
    dataset.set_output_keys(["sig"])
    with pytest.raises(AudioError, match=r"utt-missing.*nope\.wav"):
        dataset[0]


def test_unknown_keys_and_cycles_fail_early():
    dataset = DynamicItemDataset(make_data())
    with pytest.raises(DataError, match="'nope'"):
        dataset.set_output_keys(["nope"])
    dataset.add_dynamic_item(lambda x: x, takes=["missing_input"], provides=["out"])
    with pytest.raises(DataError, match="missing_input"):
        dataset.set_output_keys(["out"])
    dataset.add_dynamic_item(lambda x: x, takes=["b"], provides=["a"])
    dataset.add_dynamic_item(lambda x: x, takes=["a"], provides=["b"])
    with pytest.raises(DataError, match="cycle"):
        dataset.set_output_keys(["a"])
    with pytest.raises(DataError, match="already a static field"):
        dataset.add_dynamic_item(lambda x: x, takes=["words"], provides=["duration"])
    with pytest.raises(DataError, match="already provided"):
        dataset.add_dynamic_item(lambda x: x, takes=["words"], provides=["a"])
    with pytest.raises(DataError, match="provides no key"):
        dataset.add_dynamic_item(lambda x: x, takes=["words"])


def test_lengths_and_errors():
    dataset = DynamicItemDataset(make_data())
    assert dataset.lengths() == [3.0, 1.0, 2.0]
    assert dataset.lengths("duration") == [3.0, 1.0, 2.0]
    with pytest.raises(DataError, match="'utt1'.*'frames'"):
        dataset.lengths("frames")
    with pytest.raises(DataError, match="'utt1'.*'words'.*finite number"):
        dataset.lengths("words")


def test_filtered_sorted_filters_sorts_and_selects():
    dataset = DynamicItemDataset(make_data())
    assert dataset.filtered_sorted(sort_key="duration").data_ids == ["utt2", "utt3", "utt1"]
    assert dataset.filtered_sorted(sort_key="duration", reverse=True).data_ids == ["utt1", "utt3", "utt2"]
    assert dataset.filtered_sorted(key_min_value={"duration": 1.5}).data_ids == ["utt1", "utt3"]
    assert dataset.filtered_sorted(key_max_value={"duration": 2.0}).data_ids == ["utt2", "utt3"]
    assert dataset.filtered_sorted(key_test={"spk": lambda s: s == "s1"}).data_ids == ["utt1", "utt3"]
    shortest = dataset.filtered_sorted(sort_key="duration", select_n=2)
    assert shortest.data_ids == ["utt2", "utt3"]
    assert shortest.lengths() == [1.0, 2.0]
    assert [shortest[i]["id"] for i in range(len(shortest))] == ["utt2", "utt3"]
    assert dataset.data_ids == ["utt1", "utt2", "utt3"]  # the original is untouched


def test_filtered_sorted_on_dynamic_key_and_independent_pipelines():
    dataset = DynamicItemDataset(make_data())
    dataset.add_dynamic_item(len, takes=["words"], provides=["n_chars"])
    subset = dataset.filtered_sorted(key_min_value={"n_chars": 5}, sort_key="n_chars")
    assert subset.data_ids == ["utt3", "utt1"]
    subset.add_dynamic_item(str.lower, takes=["words"], provides=["lower"])
    with pytest.raises(DataError):
        dataset.set_output_keys(["lower"])  # adding to the subset did not change the parent


def test_from_records_and_helpers_for_several_datasets():
    train = DynamicItemDataset.from_records([{"id": "a", "x": 1}, {"id": "b", "x": 2}])
    valid = DynamicItemDataset.from_records([{"id": "c", "x": 3}])
    add_dynamic_item([train, valid], lambda x: x * 10, takes=["x"], provides=["y"])
    set_output_keys([train, valid], ["id", "y"])
    assert train[1] == {"id": "b", "y": 20} and valid[0] == {"id": "c", "y": 30}
    with pytest.raises(DataError, match="duplicate id 'a'"):
        DynamicItemDataset.from_records([{"id": "a"}, {"id": "a"}])
    with pytest.raises(DataError, match="record 1 needs an 'id'"):
        DynamicItemDataset.from_records([{"id": "a"}, {"x": 1}])


def test_fields_missing_from_some_rows_are_named():
    dataset = DynamicItemDataset.from_records([{"id": "a", "x": 1, "spk": "s"}, {"id": "b", "x": 2}])
    dataset.set_output_keys(["spk"])
    assert dataset[0] == {"spk": "s"}
    with pytest.raises(DataError, match="'b' has no field 'spk'"):
        dataset[1]
    with pytest.raises(DataError, match="'b' has no field 'spk'"):
        dataset.filtered_sorted(sort_key="spk")
    dataset.add_dynamic_item(str.upper, takes=["spk"], provides=["SPK"])
    with pytest.raises(DataError, match="'b' has no field 'spk'"):
        dataset.filtered_sorted(key_test={"SPK": bool})


def test_output_keys_as_restores_previous_keys():
    dataset = DynamicItemDataset(make_data(), output_keys=["id", "words"])
    with dataset.output_keys_as(["duration"]):
        assert dataset[0] == {"duration": 3.0}
    assert dataset[0] == {"id": "utt1", "words": "HELLO WORLD"}


def test_pipeline_compute_with_explicit_keys():
    pipeline = DataPipeline(static_keys=["x"], output_keys=["x"])
    pipeline.add_dynamic_item(lambda x: x + 1, takes=["x"], provides=["y"])
    assert pipeline.compute({"x": 1}, output_keys=["y", "x"]) == {"y": 2, "x": 1}
    with pytest.raises(DataError, match="takes keys must be non-empty strings"):
        takes("")(lambda: 0)
