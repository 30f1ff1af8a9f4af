"""Interface-based evaluation under torchrun (2 gloo workers) gives exactly the single-process WER; the
figures per speaker (``--group-by spk``) equal those of each speaker's own manifest."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import soundfile
import torch

from speechkit.data import audio

# Utterances (id -> (spoken text, reference)): some references differ so that the WER is not zero.
UTTERANCES = {
    "u01": ("abc", "abc"), "u02": ("bad cafe", "bad cafe"), "u03": ("feed a bee", "feed the bee"),
    "u04": ("g", "g"), "u05": ("a bad egg", "a bad egg"), "u06": ("cab", "cab dab"),
    "u07": ("dead beef", "dead beef"), "u08": ("ace", "face"), "u09": ("bead", "bead"),
    "u10": ("fade a cab", "fade a cab"), "u11": ("egg", "e g g"),
}


@pytest.fixture
def test_set(tiny_asr, tmp_path):
    model = tiny_asr.write_model_folder(tmp_path / "model")
    manifest = {}
    for index, (utt_id, (spoken, reference)) in enumerate(UTTERANCES.items()):
        wav = tiny_asr.synthesize(spoken) + 0.02 * torch.randn(len(tiny_asr.synthesize(spoken)))
        path = tmp_path / "audio" / f"{utt_id}.flac"
        path.parent.mkdir(exist_ok=True)
        if index % 3 == 0:  # some files at 8 kHz: the interface resamples them to the model's rate
            soundfile.write(path, audio.resample(wav, 16000, 8000).numpy(), 8000)
        else:
            soundfile.write(path, wav.numpy(), 16000)
        manifest[utt_id] = {"wav": str(path), "duration": len(wav) / 16000, "words": reference,
                            "spk": "kim" if index % 2 else "lee"}
    (tmp_path / "test.json").write_text(json.dumps(manifest))
    return model, tmp_path / "test.json"


def _evaluate(launcher: list, model, manifest, output, batch_size: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    command = [*launcher, "-m", "speechkit", "evaluate", str(model), str(manifest), "--output",
               str(output), "--batch-size", str(batch_size), "--device", "cpu", "--group-by", "spk"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, done.stdout  # only the main process reports
    return json.loads(lines[0])


@pytest.mark.slow
def test_two_gloo_workers_give_exactly_the_single_process_wer(test_set, tmp_path):

    model, manifest = test_set
    single = _evaluate([sys.executable], model, manifest, tmp_path / "one", batch_size=1)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    double = _evaluate(torchrun, model, manifest, tmp_path / "two", batch_size=4)
    assert single["world_size"] == 1 and double["world_size"] == 2
    assert double["shard_sizes"] == [6, 5] and double["utterances"] == len(UTTERANCES)
    assert single["WER"] == double["WER"] and single["WER"] > 0
    assert single["groups"] == double["groups"] and sorted(single["groups"]) == ["kim", "lee"]
    assert {k: v for k, v in single.items() if k not in ("world_size", "shard_sizes")} == \
        {k: v for k, v in double.items() if k not in ("world_size", "shard_sizes")}
    assert (tmp_path / "one" / "wer.txt").read_text() == (tmp_path / "two" / "wer.txt").read_text()


def test_each_speakers_figures_equal_those_of_its_own_manifest(test_set, tmp_path):
    from speechkit.pretrained.evaluate import evaluate

    model, manifest = test_set
    rows = json.loads(manifest.read_text())
    whole = evaluate(model, manifest, group_by="spk", device="cpu", progress=False)
    assert sum(group["num_ref_sents"] for group in whole["groups"].values()) == len(rows)
    for speaker, figures in whole["groups"].items():
        own = tmp_path / f"{speaker}.json"
        own.write_text(json.dumps({k: row for k, row in rows.items() if row["spk"] == speaker}))
        alone = evaluate(model, own, device="cpu", progress=False)
        run_fields = ("utterances", "world_size", "shard_sizes")
        assert figures == {k: v for k, v in alone.items() if k not in run_fields}


def test_a_row_without_the_group_field_is_named(test_set, tmp_path):
    from speechkit.errors import SpeechkitError
    from speechkit.pretrained.evaluate import evaluate

    model, manifest = test_set
    rows = json.loads(manifest.read_text())
    for row in rows.values():
        del row["spk"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(rows))
    expected = r"broken.json: utterance 'u01' has no field 'spk' \(--group-by\)"
    with pytest.raises(SpeechkitError, match=expected):
        evaluate(model, broken, group_by="spk", device="cpu", progress=False)
