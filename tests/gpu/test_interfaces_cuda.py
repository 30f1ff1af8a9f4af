"""Every inference interface on ``cuda:0`` gives its CPU result: transcripts equal, waveforms and features
within a tolerance (GPU kernels sum in another order)."""
from __future__ import annotations

import json

import pytest
import torch

from speechkit.pretrained import Pretrained
from tests.helpers.job_models import (
    write_features_model,
    write_manifest,
    write_model,
    write_separation_model,
    write_vocoder_model,
)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu-interfaces")
    manifest = json.loads(write_manifest(root / "data", count=4, max_words=3).read_text())
    return {"asr": write_model(root / "asr"), "separation": write_separation_model(root / "separation"),
            "vocoder": write_vocoder_model(root / "vocoder"),
            "features": write_features_model(root / "features"),
            "wavs": [row["wav"] for row in manifest.values()]}


def on_both(folder):
    return (Pretrained.from_hparams(str(folder), run_opts={"device": "cpu"}),
            Pretrained.from_hparams(str(folder), run_opts={"device": "cuda:0"}))


def test_transcribe_on_cuda_equals_cpu(folders):
    cpu, gpu = on_both(folders["asr"])
    assert next(gpu.mods.parameters()).device.type == "cuda"
    for wav in folders["wavs"]:
        assert gpu.transcribe_file(wav) == cpu.transcribe_file(wav)


def test_separate_on_cuda_equals_cpu(folders):
    cpu, gpu = on_both(folders["separation"])
    for wav in folders["wavs"]:
        torch.testing.assert_close(gpu.separate_file(wav).cpu(), cpu.separate_file(wav), rtol=1e-3, atol=1e-4)


def test_generate_on_cuda_equals_cpu(folders):
    cpu, gpu = on_both(folders["vocoder"])
    mels = torch.randn(3, 20, 16)
    lengths = torch.tensor([20, 11, 7])
    cpu_wavs, cpu_lengths = cpu.generate(mels, lengths)
    gpu_wavs, gpu_lengths = gpu.generate(mels.cuda(), lengths.cuda())
    assert gpu_lengths.cpu().tolist() == cpu_lengths.tolist()
    torch.testing.assert_close(gpu_wavs.cpu(), cpu_wavs, rtol=1e-3, atol=1e-4)


def test_extract_on_cuda_equals_cpu(folders):
    cpu, gpu = on_both(folders["features"])
    for wav in folders["wavs"]:
        expected = cpu.extract_file(wav, layer="all")
        torch.testing.assert_close(gpu.extract_file(wav, layer="all").cpu(), expected, rtol=1e-3, atol=1e-4)
