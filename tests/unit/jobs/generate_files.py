"""A vocoder folder and a job manifest of mel inputs and blends, for the generate job tests (and infer)."""
from __future__ import annotations

import json

import pytest

from speechkit.pretrained import Vocoder
from speechkit.pretrained.mel_embeddings import write_embeddings
from tests.helpers.job_models import write_manifest, write_vocoder_model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("generate-job-files")
    model = write_vocoder_model(folder / "vocoder")
    audio = json.loads(write_manifest(folder / "data", count=3, max_words=2).read_text())
    ids = sorted(audio)
    # 3 inputs + 4 blends = 7 items: not a multiple of the batch sizes the tests use.
    vocoder = Vocoder.from_hparams(str(model))
    manifest = write_embeddings(vocoder, audio, folder / "emb", [(ids[0], ids[2])], steps=4)
    return {"model": model, "manifest": manifest}
