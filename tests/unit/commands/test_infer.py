"""``speechkit infer``: the generate task's default input field; ``--status`` and ``--merge`` of a folder
without a job."""
from __future__ import annotations

import json

import pytest

from speechkit.errors import JobError
from speechkit.jobs import job_status
from tests.unit.jobs import generate_files

files = generate_files.files  # a shared fixture: pytest finds it under this name


def test_the_infer_command_reads_the_mel_field_by_default(files, tmp_path):
    from speechkit.cli import main as speechkit_main

    out = tmp_path / "cli"
    assert speechkit_main(["infer", str(files["model"]), str(files["manifest"]), "--output", str(out),
                           "--task", "generate", "--no-progress"]) == 0
    assert json.loads((out / "job.json").read_text())["task_options"]["audio_field"] == "mel"
    assert len(json.loads((out / "outputs.json").read_text())) == 7


def test_status_and_merge_of_a_folder_without_a_job(tmp_path, capsys):
    from speechkit.cli import main

    with pytest.raises(JobError, match=r"job\.json: no job record here; is this the --output folder"):
        job_status(tmp_path)
    assert main(["infer", "--merge", str(tmp_path)]) == 1
    assert main(["infer", "models/asr"]) == 1
    errors = capsys.readouterr().err
    assert "no job record here" in errors and "give a model folder, a manifest and --output OUT" in errors
