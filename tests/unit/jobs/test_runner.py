"""Jobs in one process with the tiny exact ASR model: batching, resume, redo, status, merge, bad inputs."""
from __future__ import annotations

import json
import shutil
import signal

import pytest
import soundfile

from speechkit.errors import EXIT_PREEMPTED, AudioError, JobError, ManifestError
from speechkit.jobs import JobConfig, batches_by_duration, format_status, job_status, merge_job, run_job
from speechkit.jobs.ledger import ledger_path, read_ledger
from speechkit.metrics import ErrorRateStats
from speechkit.pretrained.interfaces import Pretrained
from tests.helpers.job_models import write_model


def _config(job_files, out, **options) -> JobConfig:
    model, manifest = job_files
    return JobConfig(str(model), str(manifest), str(out), progress=False, **options)


def _outputs(folder) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted((folder / "outputs").rglob("*"))
            if p.is_file()}


def test_batches_by_duration_respect_the_budget_and_keep_the_last_partial_batch():
    durations = {f"u{i:02d}": 1.0 + (i % 5) for i in range(23)}
    batches = batches_by_duration(list(durations), durations, max_seconds=12.0, max_size=4)
    assert sorted(i for batch in batches for i in batch) == sorted(durations)
    assert all(len(b) * max(durations[i] for i in b) <= 12.0 and len(b) <= 4 for b in batches)
    assert len(batches[-1]) < 4  # 23 items: the last batch is partial, and kept
    assert batches_by_duration(["a", "b"], {"a": 30.0, "b": 1.0}, max_seconds=8.0) == [["a"], ["b"]]


def test_transcription_job_matches_the_interface_and_its_wer(job_files, tmp_path):
    model_folder, manifest = job_files
    config = _config(job_files, tmp_path / "out", max_batch_size=4, max_batch_seconds=5.0)
    result = run_job(config, environ={})
    assert (result.done_now, result.already_done, result.exit_code) == (23, 0, 0)
    rows = json.loads(manifest.read_text())
    model = Pretrained.from_hparams(str(model_folder))
    expected = {i: model.transcribe_file(rows[i]["wav"]) for i in sorted(rows)}
    lines = (tmp_path / "out" / "transcripts.txt").read_text().splitlines()
    assert lines == [f"{i}\t{text}" for i, text in expected.items()]
    stats = ErrorRateStats()
    stats.append(list(expected), list(expected.values()), [rows[i]["words"] for i in expected])
    assert result.merged["WER"] == stats.summarize("WER") > 0
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["WER"] == result.merged["WER"]
    # A rerun finds everything done and does nothing.
    again = run_job(_config(job_files, tmp_path / "out", max_batch_size=4), environ={})
    assert (again.done_now, again.already_done) == (0, 23)
    assert (tmp_path / "out" / "transcripts.txt").read_text().splitlines() == lines


def test_two_shards_give_the_one_shard_results(job_files, tmp_path):
    run_job(_config(job_files, tmp_path / "one", task="encode", max_batch_size=3), environ={})
    results = [run_job(_config(job_files, tmp_path / "two", task="encode", shard=k, num_shards=2,
                               max_batch_seconds=2.0), environ={}) for k in (0, 1)]
    assert results[0].merged is None and results[1].merged["items"] == 23  # the last shard merges
    assert _outputs(tmp_path / "one") == _outputs(tmp_path / "two") and len(_outputs(tmp_path / "one")) == 23
    manifest = json.loads((tmp_path / "two" / "outputs.json").read_text())
    assert list(manifest) == sorted(manifest) and len(manifest) == 23


def test_a_missing_or_damaged_output_is_redone(job_files, tmp_path):
    out = tmp_path / "out"
    run_job(_config(job_files, out, task="encode"), environ={})
    before = _outputs(out)
    names = sorted(before)
    (out / names[0]).unlink()
    (out / names[1]).write_bytes(before[names[1]][:40])  # truncated
    flipped = bytearray(before[names[2]])
    flipped[-1] ^= 0xFF
    (out / names[2]).write_bytes(bytes(flipped))  # same size: seen only with verify
    with pytest.raises(JobError, match=r"output of 2 item\(s\) is missing or damaged"):
        merge_job(out)
    result = run_job(_config(job_files, out, task="encode"), environ={})
    assert (result.redone, result.done_now) == (2, 2)
    assert _outputs(out)[names[2]] != before[names[2]]
    result = run_job(_config(job_files, out, task="encode", verify=True), environ={})
    assert (result.redone, result.done_now) == (1, 1)
    assert _outputs(out) == before
    assert read_ledger(ledger_path(out, 0, 1)).duplicates == []
    assert merge_job(out, verify=True)["items"] == 23


def test_status_and_merge_of_a_half_done_job(job_files, tmp_path):
    out = tmp_path / "out"
    run_job(_config(job_files, out, shard=1, num_shards=2), environ={})
    status = job_status(out)
    plan = json.loads((out / "plan.json").read_text())
    assert (status["done"], status["items"], status["finished"]) == (len(plan["shards"][1]), 23, 1)
    assert [s["done"] for s in status["shards"]] == [0, len(plan["shards"][1])]
    text = format_status(status)
    assert f"items {status['done']}/23" in text and "not started" in text and "finished" in text
    assert "ETA unknown" in text  # nothing is running
    missing = plan["shards"][0]
    with pytest.raises(JobError, match=rf"{len(missing)} of 23 items are not done: '{missing[0]}'.*"
                                       r"rerun shard\(s\) 0 with"):
        merge_job(out)


def test_merge_refuses_an_item_done_twice(job_files, tmp_path):
    out = tmp_path / "out"
    for shard in (0, 1):
        run_job(_config(job_files, out, shard=shard, num_shards=2, merge=False), environ={})
    assert merge_job(out)["items"] == 23
    first = ledger_path(out, 0, 2)
    row = next(r for r in first.read_text().splitlines() if '"id"' in r)
    with open(ledger_path(out, 1, 2), "a") as handle:
        handle.write(row + "\n")
    item = json.loads(row)["id"]
    with pytest.raises(JobError, match=rf"1 item\(s\) were done more than once or by the wrong shard: "
                                       rf"'{item}' \(shards 0 and 1\)"):
        merge_job(out)
    with open(first, "a") as handle:
        handle.write(json.dumps({"id": "stranger", "run": 1, "text": ""}) + "\n")
    with pytest.raises(JobError, match="'stranger'; the ledgers do not belong to this job"):
        merge_job(out)


def test_a_rerun_with_other_settings_is_refused(job_files, tmp_path):
    out = tmp_path / "out"
    run_job(_config(job_files, out, shard=0, num_shards=2), environ={})
    with pytest.raises(JobError, match="started with 2 shards"):
        run_job(_config(job_files, out, shard=0, num_shards=3), environ={})
    with pytest.raises(JobError, match="another job"):
        run_job(_config(job_files, out, task="encode", shard=0, num_shards=2), environ={})
    with pytest.raises(JobError, match="unknown task 'translate'; known tasks: encode, extract, generate, "
                       "separate, transcribe"):
        run_job(_config(job_files, out, task="translate"), environ={})


def test_a_rerun_on_other_audio_with_the_same_ids_and_durations_is_refused_or_redone(job_files, tmp_path):
    model, manifest = job_files
    rows = json.loads(manifest.read_text())
    shutil.copytree(manifest.parent / "audio", tmp_path / "other")
    other = {item_id: {**row, "wav": str(tmp_path / "other" / f"{item_id}.flac")}
             for item_id, row in rows.items()}
    (tmp_path / "b.json").write_text(json.dumps(other))
    out = tmp_path / "out"
    run_job(_config(job_files, out), environ={})
    with pytest.raises(JobError, match=r"another job \(the manifest's items \(ids, durations or input "
                                       r"files\) differ: recorded from .*manifest.json, now .*b.json"):
        run_job(JobConfig(str(model), str(tmp_path / "b.json"), str(out), progress=False), environ={})
    run_job(_config(job_files, out), environ={})  # the original manifest still joins its job
    run_job(JobConfig(str(model), str(tmp_path / "b.json"), str(tmp_path / "out-b"), progress=False),
            environ={})
    with open(other["utt0005"]["wav"], "ab") as handle:  # the same path, other content: a byte longer
        handle.write(b"\0")
    again = run_job(JobConfig(str(model), str(tmp_path / "b.json"), str(tmp_path / "out-b"), progress=False),
                    environ={})
    assert (again.done_now, again.already_done) == (1, 22)  # the changed input is done again


def test_bad_manifests_are_named(job_files, tmp_path):
    model, manifest = job_files
    rows = json.loads(manifest.read_text())
    bad = {k: dict(v) for k, v in rows.items()}
    bad["utt0003"]["flac"] = bad["utt0003"].pop("wav")
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(ManifestError, match=r"utt0003"):
        run_job(JobConfig(str(model), str(path), str(tmp_path / "o1"), progress=False), environ={})
    path.write_text(json.dumps({k: {"wav": v["wav"], "words": v["words"]} for k, v in rows.items()}))
    with pytest.raises(ManifestError, match="duration"):
        run_job(JobConfig(str(model), str(path), str(tmp_path / "o2"), progress=False), environ={})


def test_an_unreadable_file_stops_the_shard_keeping_what_was_done(job_files, tmp_path):
    model, manifest = job_files
    rows = json.loads(manifest.read_text())
    broken = tmp_path / "broken.flac"
    broken.write_bytes(b"not audio at all" * 100)
    shortest = min(rows, key=lambda i: (rows[i]["duration"], i))  # batched last: the others are done first
    rows[shortest]["wav"] = str(broken)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(rows))
    out = tmp_path / "out"
    config = JobConfig(str(model), str(path), str(out), progress=False, max_batch_size=2, flush_every=1000)
    with pytest.raises(AudioError, match="broken.flac"):
        run_job(config, environ={})
    assert len(read_ledger(ledger_path(out, 0, 1)).records) >= 20  # flushed on the way out
    wav, rate = soundfile.read(json.loads(manifest.read_text())[shortest]["wav"])
    soundfile.write(broken, wav, rate)
    result = run_job(config, environ={})
    assert result.done_now <= 3 and result.merged["items"] == 23


def test_audio_with_nan_or_inf_is_refused_naming_the_file(job_files, tmp_path, capsys):
    from speechkit.cli import main as speechkit_main

    model, manifest = job_files
    rows = json.loads(manifest.read_text())
    wav, rate = soundfile.read(rows["utt0002"]["wav"], dtype="float32")
    wav[len(wav) // 2] = float("nan")
    soundfile.write(tmp_path / "damaged.wav", wav, rate, subtype="FLOAT")
    rows["utt0002"]["wav"] = str(tmp_path / "damaged.wav")
    (tmp_path / "m.json").write_text(json.dumps(rows))
    with pytest.raises(AudioError, match=rf"damaged.wav: 1 sample\(s\) are NaN or infinite \(the first at "
                                         rf"sample {len(wav) // 2}\)"):
        run_job(JobConfig(str(model), str(tmp_path / "m.json"), str(tmp_path / "out"), progress=False),
                environ={})
    code = speechkit_main(["transcribe", str(model), rows["utt0001"]["wav"], str(tmp_path / "damaged.wav")])
    assert code == 1
    assert "damaged.wav: 1 sample(s) are NaN or infinite" in capsys.readouterr().err


def test_an_empty_shard_finishes_at_once(job_files, tmp_path):
    model, manifest = job_files
    rows = json.loads(manifest.read_text())
    path = tmp_path / "two.json"
    path.write_text(json.dumps({k: rows[k] for k in list(rows)[:2]}))
    out = tmp_path / "out"
    for shard in (0, 1, 2):
        config = JobConfig(str(model), str(path), str(out), shard=shard, num_shards=3, progress=False)
        result = run_job(config, environ={})
    assert result.merged["items"] == 2
    shutil.rmtree(out)


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGUSR1"])
def test_a_preemption_signal_finishes_the_batch_flushes_and_returns_the_preemption_code(job_files, tmp_path,
                                                                                        signal_name):
    _, manifest = job_files
    model = write_model(tmp_path / "model", signal_at_batch=(signal_name, 3))
    out = tmp_path / "out"
    config = JobConfig(str(model), str(manifest), str(out), progress=False, max_batch_size=2,
                       flush_every=1000)
    handler = signal.getsignal(getattr(signal, signal_name))
    result = run_job(config, environ={})
    assert result.preempted and result.exit_code == EXIT_PREEMPTED == 75
    assert result.done_now == 6 and len(read_ledger(ledger_path(out, 0, 1)).records) == 6  # 3 whole batches
    assert signal.getsignal(getattr(signal, signal_name)) == handler  # put back
    result = run_job(config, environ={})  # the model signals again at its 3rd batch of the rerun
    assert (result.already_done, result.done_now, result.exit_code) == (6, 6, 75)
