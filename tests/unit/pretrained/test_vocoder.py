"""The Vocoder interface (model folder, generate, resynthesize_file, mel_of_file) and mel embeddings."""
from __future__ import annotations

import json

import pytest
import torch

from speechkit.errors import HparamsError
from speechkit.pretrained import Pretrained, Vocoder
from speechkit.pretrained.mel_embeddings import file_stem, interpolate_mels, stretch
from speechkit.pretrained.safety.allowlist import default_allowlist
from tests.helpers.batch_invariance import assert_batch_invariant
from tests.helpers.job_models import VOCODER_HYPERPARAMS, write_manifest, write_vocoder_model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vocoder-files")
    return {"model": write_vocoder_model(folder / "vocoder"),
            "manifest": write_manifest(folder / "data", count=3, max_words=2)}


def test_model_folder_loads_through_the_interface_dispatch(files):
    vocoder = Pretrained.from_hparams(str(files["model"]))
    assert isinstance(vocoder, Vocoder) and (vocoder.n_mels, vocoder.hop_length) == (16, 64)
    for name in ("speechkit.models.MelGenerator", "speechkit.models.vocoder.MelSpectrogram"):
        assert default_allowlist().refusal("!new:", name) is None  # a remote folder may build it


def test_resynthesize_file_is_mel_then_generate_trimmed_to_the_input(files):
    vocoder = Vocoder.from_hparams(str(files["model"]))
    path = next(iter(json.loads(files["manifest"].read_text()).values()))["wav"]
    waveform = vocoder.load_audio(path)
    mel = vocoder.mel_of_file(path)
    assert mel.shape == (1 + waveform.shape[0] // 64, 16)
    wavs, samples = vocoder.generate(mel)
    assert samples.tolist() == [mel.shape[0] * 64]
    audio = vocoder.resynthesize_file(path)
    assert audio.shape == waveform.shape and torch.equal(audio, wavs[0, :waveform.shape[0]])


def test_generate_is_batch_invariant(files):
    vocoder = Vocoder.from_hparams(str(files["model"]))
    assert_batch_invariant(vocoder.generate, [torch.randn(n, 16) for n in (12, 5, 8)])


def test_bad_inputs_are_refused(files, tmp_path):
    vocoder = Vocoder.from_hparams(str(files["model"]))
    with pytest.raises(ValueError, match=r"\(batch, frames, 16\)"):
        vocoder.generate(torch.randn(1, 5, 80))
    with pytest.raises(ValueError, match="absolute"):
        vocoder.generate(torch.randn(1, 5, 16), torch.tensor([0.5]))
    wrong_hop = VOCODER_HYPERPARAMS.replace("hop_length: 64", "hop_length: 80")
    (tmp_path / "hyperparams.yaml").write_text(wrong_hop)
    (tmp_path / "generator.safetensors").symlink_to(files["model"] / "generator.safetensors")
    with pytest.raises(HparamsError, match="hop 80"):
        Vocoder.from_hparams(str(tmp_path))


def test_interpolation_ends_are_the_inputs_and_lengths_blend():
    first, second = torch.randn(10, 4), torch.randn(30, 4)
    assert torch.equal(interpolate_mels(first, second, 0.0), first)
    assert torch.allclose(interpolate_mels(first, second, 1.0), second)
    assert interpolate_mels(first, second, 0.25).shape == (15, 4)
    ramp = torch.arange(5.0).unsqueeze(1)
    assert torch.allclose(stretch(ramp, 9)[:, 0], torch.arange(9.0) / 2)
    with pytest.raises(ValueError, match="alpha"):
        interpolate_mels(first, second, 1.5)
    assert file_stem("a/b") != "a/b" and "/" not in file_stem("a/b") and file_stem("utt1") == "utt1"
