"""The ``separate`` and ``extract`` tasks with tiny model folders: one and two shards give the interface's own
per-item outputs byte for byte, a rerun skips what is done, a lost source is redone, the merge manifest."""
from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile

from speechkit.cli import main as speechkit_main
from speechkit.errors import AudioError, JobError
from speechkit.jobs import JobConfig, merge_job, run_job
from speechkit.jobs.audio_tasks import parse_layer
from speechkit.pretrained import SeparationModel, Wav2Vec2Features
from tests.unit.jobs import audio_job_files
from tests.unit.jobs.audio_job_files import ITEMS

files = audio_job_files.files  # a shared fixture: pytest finds it under this name


def _config(files, model, out, **options) -> JobConfig:
    return JobConfig(str(files[model]), str(files["manifest"]), str(out), progress=False, **options)


def _outputs(folder) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted((folder / "outputs").rglob("*"))
            if p.is_file()}


def _one_and_two_shards(files, model, tmp_path, **options) -> tuple:
    """Run the job in one shard (batches of up to 3) and in two (batches of other sizes); returns both
    folders after checking that their output files are identical."""
    one = run_job(_config(files, model, tmp_path / "one", max_batch_size=3, **options), environ={})
    two = [run_job(_config(files, model, tmp_path / "two", shard=k, num_shards=2, max_batch_seconds=1.0,
                           **options), environ={}) for k in (0, 1)]
    assert one.merged["items"] == two[1].merged["items"] == ITEMS and two[0].merged is None
    assert _outputs(tmp_path / "one") == _outputs(tmp_path / "two")
    return tmp_path / "one", tmp_path / "two"


def test_separate_job_writes_the_interface_sources_whatever_the_shards(files, tmp_path):
    one, two = _one_and_two_shards(files, "separator", tmp_path, task="separate")
    assert len(_outputs(one)) == 2 * ITEMS  # one file per source per item
    rows = json.loads(files["manifest"].read_text())
    model = SeparationModel.from_hparams(str(files["separator"]))
    manifest = json.loads((two / "outputs.json").read_text())
    assert list(manifest) == sorted(rows)  # complete, sorted by id
    for item_id, entry in manifest.items():
        expected = model.separate_file(rows[item_id]["wav"]).numpy()  # (2, time) at 8 kHz
        assert entry["mixture"] == rows[item_id]["wav"] and entry["sample_rate"] == 8000
        assert entry["duration"] == pytest.approx(expected.shape[1] / 8000)
        for k in range(2):
            written, rate = soundfile.read(entry[f"source{k + 1}"], dtype="float32")
            assert rate == 8000 and np.array_equal(written, expected[k])  # exact: float32 WAV
    # A rerun does nothing and rewrites nothing.
    stamps = {p: p.stat().st_mtime_ns for p in (one / "outputs").rglob("*.wav")}
    again = run_job(_config(files, "separator", one, task="separate"), environ={})
    assert (again.done_now, again.already_done) == (0, ITEMS)
    assert {p: p.stat().st_mtime_ns for p in (one / "outputs").rglob("*.wav")} == stamps


def test_a_lost_source_file_is_refused_by_the_merge_and_redone(files, tmp_path):
    out = tmp_path / "out"
    run_job(_config(files, "separator", out, task="separate"), environ={})
    before = _outputs(out)
    lost = next(name for name in sorted(before) if name.endswith("/source2.wav"))
    (out / lost).unlink()
    with pytest.raises(JobError, match=rf"output of 1 item\(s\) is missing or damaged: .*{lost}"):
        merge_job(out)
    result = run_job(_config(files, "separator", out, task="separate"), environ={})
    assert (result.done_now, result.already_done, result.redone) == (1, ITEMS - 1, 1)
    assert _outputs(out) == before and result.merged["items"] == ITEMS


def test_extract_job_writes_the_chosen_layer_whatever_the_shards(files, tmp_path):
    # The one-shard job from the command line (--layer), the two-shard one from Python.
    code = speechkit_main(["infer", str(files["features"]), str(files["manifest"]), "--output",
                           str(tmp_path / "one"), "--task", "extract", "--layer", "1", "--max-batch-size",
                           "3", "--shard", "0", "--num-shards", "1", "--no-progress"])
    assert code == 0
    for k in (0, 1):
        run_job(_config(files, "features", tmp_path / "two", task="extract", task_options={"layer": 1},
                        shard=k, num_shards=2, max_batch_seconds=1.0), environ={})
    assert _outputs(tmp_path / "one") == _outputs(tmp_path / "two")
    rows = json.loads(files["manifest"].read_text())
    model = Wav2Vec2Features.from_hparams(str(files["features"]))
    manifest = json.loads((tmp_path / "two" / "outputs.json").read_text())
    assert list(manifest) == sorted(rows)
    for item_id, entry in manifest.items():
        expected = model.extract_file(rows[item_id]["wav"], layer=1).numpy()
        array = np.load(entry["file"])
        assert array.dtype == np.float32 and np.array_equal(array, expected)
        assert entry["frames"] == expected.shape[0] and entry["shape"] == [expected.shape[0], 32]
    assert json.loads((tmp_path / "two" / "summary.json").read_text())["layer"] == 1
    again = run_job(_config(files, "features", tmp_path / "two", task="extract", task_options={"layer": 1},
                            shard=1, num_shards=2), environ={})
    assert (again.done_now, again.already_done) == (0, len(json.loads(
        (tmp_path / "two" / "plan.json").read_text())["shards"][1]))


def test_extract_every_layer_stacks_them(files, tmp_path):
    result = run_job(_config(files, "features", tmp_path / "all", task="extract",
                             task_options={"layer": "all"}), environ={})
    assert result.merged["items"] == ITEMS
    rows = json.loads(files["manifest"].read_text())
    first = sorted(rows)[0]
    entry = json.loads((tmp_path / "all" / "outputs.json").read_text())[first]
    model = Wav2Vec2Features.from_hparams(str(files["features"]))
    expected = model.extract_file(rows[first]["wav"], layer="all")
    assert entry["shape"] == [3, entry["frames"], 32]
    assert np.array_equal(np.load(entry["file"]), expected.numpy())


def test_bad_layers_and_mismatched_models_are_refused(files, tmp_path, capsys):
    assert parse_layer("0") == 0 and parse_layer(None) is None and parse_layer("all") == "all"
    for bad in ("-1", "first", True, 1.5):
        with pytest.raises(JobError, match="--layer must be a block index"):
            parse_layer(bad)
    with pytest.raises(JobError, match=r"--layer 3 is past the model's last block: it has 2"):
        run_job(_config(files, "features", tmp_path / "deep", task="extract", task_options={"layer": 3}),
                environ={})
    with pytest.raises(JobError, match=r"SeparationModel has no extract_batch"):
        run_job(_config(files, "separator", tmp_path / "wrong", task="extract"), environ={})
    code = speechkit_main(["infer", str(files["separator"]), str(files["manifest"]), "--output",
                           str(tmp_path / "sep"), "--task", "separate", "--layer", "2"])
    assert code == 1 and "--layer is not an option of the task 'separate'" in capsys.readouterr().err
    code = speechkit_main(["infer", str(files["separator"]), str(files["manifest"]), "--output",
                           str(tmp_path / "asr"), "--task", "transcribe", "--padded-batches"])
    assert code == 1
    assert "--padded-batches is not an option of the task 'transcribe'" in capsys.readouterr().err
    # A folder started with one layer refuses another rather than mixing the two.
    run_job(_config(files, "features", tmp_path / "mixed", task="extract", task_options={"layer": 0}),
            environ={})
    with pytest.raises(JobError, match="layer"):
        run_job(_config(files, "features", tmp_path / "mixed", task="extract", task_options={"layer": 1}),
                environ={})


@pytest.mark.parametrize("task", ["extract", "separate"])
def test_padded_batches_agree_to_rounding_and_are_part_of_the_job(files, tmp_path, task):
    model = "features" if task == "extract" else "separator"
    exact = run_job(_config(files, model, tmp_path / "exact", task=task), environ={})
    padded = run_job(_config(files, model, tmp_path / "padded", task=task, max_batch_size=4,
                             task_options={"padded_batches": True}), environ={})
    assert exact.merged["items"] == padded.merged["items"] == ITEMS
    first, second = _outputs(tmp_path / "exact"), _outputs(tmp_path / "padded")
    assert sorted(first) == sorted(second)
    suffix = ".npy" if task == "extract" else ".wav"
    for name in first:
        load = np.load if task == "extract" else (lambda path: soundfile.read(path, dtype="float32")[0])
        a, b = load(tmp_path / "exact" / name), load(tmp_path / "padded" / name)
        assert name.endswith(suffix) and a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=5e-5, rtol=1e-4)
    with pytest.raises(JobError, match="padded_batches"):
        run_job(_config(files, model, tmp_path / "padded", task=task), environ={})


def test_an_input_without_samples_is_refused_naming_the_item(files, tmp_path, capsys):
    rows = json.loads(files["manifest"].read_text())
    soundfile.write(tmp_path / "empty.wav", np.zeros(0, np.float32), 16000)
    rows["utt0001"]["wav"] = str(tmp_path / "empty.wav")
    (tmp_path / "m.json").write_text(json.dumps(rows))
    with pytest.raises(AudioError, match=r"item 'utt0001': .*empty.wav holds no samples; drop it from the "
                                         r"manifest \(the task 'separate' needs audio\)"):
        run_job(JobConfig(str(files["separator"]), str(tmp_path / "m.json"), str(tmp_path / "out"),
                          progress=False, task="separate"), environ={})
    assert speechkit_main(["separate", str(files["separator"]), str(tmp_path / "empty.wav"),
                           "--out", str(tmp_path / "sep")]) == 1
    assert "empty.wav holds no samples: there is nothing to separate" in capsys.readouterr().err


def test_separate_finds_the_mixture_of_a_manifest_speechkit_mixtures_wrote(files, tmp_path):
    """`speechkit infer MODEL mixtures.json --task separate` reads `mix_wav` without --audio-field."""
    rows = json.loads(files["manifest"].read_text())
    for index, row in enumerate(rows.values()):
        row["spk"] = f"speaker{index % 3}"
    speakers = tmp_path / "speakers.json"
    speakers.write_text(json.dumps(rows))
    assert speechkit_main(["mixtures", str(speakers), str(tmp_path / "mix"), "--num-mixtures", "3",
                           "--sample-rate", "8000", "--seed", "0"]) in (0, None)
    mixtures = tmp_path / "mix" / "test.json"
    out = tmp_path / "out"
    config = JobConfig(str(files["separator"]), str(mixtures), str(out), task="separate", progress=False,
                       replacements={"data_root": str(tmp_path / "mix")})
    result = run_job(config, environ={})
    manifest = json.loads((out / "outputs.json").read_text())
    written = json.loads(mixtures.read_text())
    assert result.merged["items"] == 3 and sorted(manifest) == sorted(written)
    for item_id, entry in manifest.items():
        assert entry["mixture"] == written[item_id]["mix_wav"].replace("$data_root", str(tmp_path / "mix"))
        assert soundfile.info(entry["source2"]).frames == soundfile.info(entry["mixture"]).frames
    # An explicit field that a row lacks is named.
    with pytest.raises(Exception, match=r"has no field 'wav' \(the mixture; choose the field with"):
        run_job(JobConfig(str(files["separator"]), str(mixtures), str(tmp_path / "o2"), task="separate",
                          task_options={"audio_field": "wav"}, progress=False,
                          replacements={"data_root": str(tmp_path / "mix")}), environ={})
