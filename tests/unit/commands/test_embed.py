"""``speechkit embed``: speaker embeddings with a speaker model; mel embeddings and blends with a vocoder."""
from __future__ import annotations

import json

import numpy as np
import pytest

from speechkit.cli import main as speechkit_main
from speechkit.errors import ManifestError
from speechkit.pretrained import SpeakerRecognition, Vocoder
from speechkit.pretrained.mel_embeddings import write_embeddings
from tests.helpers.job_models import write_manifest, write_vocoder_model
from tests.unit.pretrained import speaker_files

# Shared fixtures: pytest finds them under these names.
folder, audio = speaker_files.folder, speaker_files.audio


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vocoder-files")
    return {"model": write_vocoder_model(folder / "vocoder"),
            "manifest": write_manifest(folder / "data", count=3, max_words=2)}


def test_embed_command_writes_speaker_embeddings(folder, audio, tmp_path, capsys):
    manifest = tmp_path / "data.json"
    manifest.write_text(json.dumps({f"u{i}": {"wav": str(p), "spk": "s", "duration": 1.0}
                                    for i, p in enumerate(audio)}))
    assert speechkit_main(["embed", str(folder), str(manifest), "--output", str(tmp_path / "emb"),
                           "--batch-size", "2", "--no-progress"]) == 0
    written = json.loads((tmp_path / "emb" / "manifest.json").read_text())
    model = SpeakerRecognition.from_hparams(str(folder))
    for i, path in enumerate(audio):
        vector = np.load(written[f"u{i}"]["embedding"])
        assert vector.shape == (12,) and written[f"u{i}"]["spk"] == "s"
        np.testing.assert_allclose(vector, model.embed_file(path).numpy(), atol=1e-5)
    assert speechkit_main(["embed", str(folder), str(manifest), "--output", str(tmp_path / "x"),
                           "--interpolate", "u0", "u1"]) == 1


def test_embed_command_writes_mels_blends_and_a_job_manifest(files, tmp_path, capsys):
    ids = sorted(json.loads(files["manifest"].read_text()))
    out = tmp_path / "emb"
    assert speechkit_main(["embed", str(files["model"]), str(files["manifest"]), "--output", str(out),
                           "--interpolate", ids[0], ids[1], "--steps", "3"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(manifest) == sorted(ids + [f"{ids[0]}~{ids[1]}~{k}" for k in range(3)])
    vocoder = Vocoder.from_hparams(str(files["model"]))
    rows = json.loads(files["manifest"].read_text())
    for item in ids:
        stored = np.load(manifest[item]["mel"])
        assert np.array_equal(stored, vocoder.mel_of_file(rows[item]["wav"]).numpy())
        assert manifest[item]["duration"] == pytest.approx(stored.shape[0] * 64 / 16000)
    assert np.array_equal(np.load(manifest[f"{ids[0]}~{ids[1]}~0"]["mel"]), np.load(manifest[ids[0]]["mel"]))
    capsys.readouterr()
    assert speechkit_main(["embed", str(files["model"]), str(files["manifest"]), "--output", str(out),
                           "--interpolate", ids[0], "nope"]) != 0
    assert "not in the manifest: nope" in capsys.readouterr().err
    assert json.loads((out / "manifest.json").read_text()) == manifest  # nothing written is lost
    with pytest.raises(ManifestError, match="nope"):
        write_embeddings(vocoder, rows, out, [(ids[0], "nope")])


def test_a_blend_never_replaces_an_item_of_the_same_id(files, tmp_path, capsys):
    rows = json.loads(files["manifest"].read_text())
    first, second = sorted(rows)[:2]
    rows[f"{first}~{second}~1"] = dict(rows[first])  # an item whose id is the second blend's
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(rows))
    out = tmp_path / "emb"
    assert speechkit_main(["embed", str(files["model"]), str(manifest), "--output", str(out),
                           "--interpolate", first, second, "--steps", "3"]) == 1
    assert f"the blend id '{first}~{second}~1' is already the manifest's item" in capsys.readouterr().err
    assert not out.exists()  # refused before anything is written
