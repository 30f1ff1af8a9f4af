"""``speechkit infer``: the generate task's default input field; ``--status`` and ``--merge`` of a folder
without a job."""
from __future__ import annotations

import json

import pytest

from speechkit.errors import JobError
from speechkit.jobs import job_status
from speechkit.pretrained import Vocoder
from speechkit.pretrained.mel_embeddings import write_embeddings
from tests.helpers.job_models import write_manifest, write_vocoder_model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("generate-job-files")
    model = write_vocoder_model(folder / "vocoder")
    audio = json.loads(write_manifest(folder / "data", count=3, max_words=2).read_text())
    ids = sorted(audio)
    # 3 inputs + 4 blends = 7 items: not a multiple of the batch sizes below.
    vocoder = Vocoder.from_hparams(str(model))
    manifest = write_embeddings(vocoder, audio, folder / "emb", [(ids[0], ids[2])], steps=4)
    return {"model": model, "manifest": manifest}


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
