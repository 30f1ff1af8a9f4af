"""What a job trusts on a rerun: an input overwritten by other audio of the same size is done again (its
bytes are fingerprinted), and ledger or plan lines naming items the job does not hold are refused."""
from __future__ import annotations

import json
import re

import pytest
import soundfile

from speechkit.cli import main as speechkit_main
from speechkit.errors import JobError
from speechkit.jobs import JobConfig, run_job
from speechkit.jobs.ledger import ledger_path, read_ledger
from speechkit.jobs.plan import input_digest
from speechkit.pretrained.interfaces import Pretrained


@pytest.fixture
def wav_job(job_files, tmp_path):
    """The shared job files as 16-bit WAV (a file's size is then its length: overwriting one with other
    audio of the same length keeps its size)."""
    model, manifest = job_files
    rows = json.loads(manifest.read_text())
    for item_id, row in rows.items():
        wave, rate = soundfile.read(row["wav"], dtype="int16")
        row["wav"] = str(tmp_path / f"{item_id}.wav")
        soundfile.write(row["wav"], wave, rate, subtype="PCM_16")
    path = tmp_path / "wav.json"
    path.write_text(json.dumps(rows))
    return model, path, rows


def _run(model, manifest, out, **options):
    return run_job(JobConfig(str(model), str(manifest), str(out), progress=False, **options), environ={})


def test_an_input_overwritten_with_other_audio_of_the_same_size_is_done_again(wav_job, tmp_path, caplog):
    model, manifest, rows = wav_job
    out = tmp_path / "out"
    _run(model, manifest, out)
    target, donor = rows["utt0003"]["wav"], rows["utt0007"]["wav"]
    wave, rate = soundfile.read(donor, dtype="int16")
    length = soundfile.info(target).frames
    other = wave[:length] if len(wave) >= length else list(wave) + [0] * (length - len(wave))
    size = (tmp_path / "utt0003.wav").stat().st_size
    before = input_digest(target)
    soundfile.write(target, other, rate, subtype="PCM_16")  # other words, same size
    assert (tmp_path / "utt0003.wav").stat().st_size == size and input_digest(target) != before
    with caplog.at_level("WARNING"):
        again = _run(model, manifest, out)
    assert (again.done_now, again.already_done) == (1, 22)
    assert "item 'utt0003'" in caplog.text and f"same size ({size} bytes), other content" in caplog.text
    transcripts = dict(line.split("\t") for line in (out / "transcripts.txt").read_text().splitlines())
    assert transcripts["utt0003"] == Pretrained.from_hparams(str(model)).transcribe_file(target)
    record = read_ledger(ledger_path(out, 0, 1)).records["utt0003"]
    assert record["input_blake2b"] == input_digest(target) and record["input_bytes"] == size
    assert _run(model, manifest, out).done_now == 0  # unchanged now: nothing to do


@pytest.mark.parametrize("line, named", [
    ({"id": "../../evil", "run": 1, "t": 1.0, "text": "x"}, "'../../evil' (a path, not an item id)"),
    ({"id": "utt9999", "run": 1, "t": 1.0, "text": "x"}, "id 'utt9999'"),
])
def test_a_ledger_line_naming_an_item_of_no_plan_is_refused(wav_job, tmp_path, capsys, line, named):
    model, manifest, _ = wav_job
    out = tmp_path / "out"
    _run(model, manifest, out)
    ledger = ledger_path(out, 0, 1)
    with open(ledger, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")
    expected = re.escape(f"records 1 item(s) that are not in this shard's plan ({named})")
    with pytest.raises(JobError, match=expected):
        _run(model, manifest, out)
    code = speechkit_main(["infer", str(model), str(manifest), "-o", str(out), "--no-progress"])
    assert code == 1 and named in capsys.readouterr().err
    assert speechkit_main(["infer", "--merge", str(out)]) == 1  # the merge refuses the ledger too


def test_a_ledger_id_that_is_not_a_string_is_refused_naming_the_line(wav_job, tmp_path):
    model, manifest, _ = wav_job
    out = tmp_path / "out"
    _run(model, manifest, out)
    ledger = ledger_path(out, 0, 1)
    lines = ledger.read_text().splitlines()
    with open(ledger, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": 7, "run": 1}) + "\n")
    with pytest.raises(JobError, match=rf"shard-00000-of-00001.jsonl, line {len(lines) + 1}: the item id 7"):
        _run(model, manifest, out)


def test_a_renamed_id_in_the_plan_is_refused_by_the_shard_status_and_merge(wav_job, tmp_path, capsys):
    model, manifest, _ = wav_job
    out = tmp_path / "out"
    _run(model, manifest, out)
    plan = json.loads((out / "plan.json").read_text())
    plan["shards"][0] = ["renamed" if i == "utt0001" else i for i in plan["shards"][0]]
    (out / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(JobError, match=r"plan.json: the plan names id 'renamed', which is not an item"):
        _run(model, manifest, out)
    for command in (["infer", "--merge", str(out)], ["infer", "--status", str(out)],
                    ["infer", str(model), str(manifest), "-o", str(out), "--no-progress"]):
        assert speechkit_main(command) == 1
        assert "the plan names id 'renamed'" in capsys.readouterr().err
    plan["shards"][0] = ["../x" if i == "renamed" else i for i in plan["shards"][0]]
    plan["durations"]["../x"] = plan["durations"].pop("utt0001")
    (out / "plan.json").write_text(json.dumps(plan))  # consistent in itself, but not the manifest's plan
    with pytest.raises(JobError, match=r"differs from the one the manifest gives \('../x' \(a path"):
        _run(model, manifest, out)
