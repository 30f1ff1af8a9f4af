"""Wav2Vec2Features: a model folder and a transformers folder give the encoder's layers, batch invariant."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from speechkit.data import audio
from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model, WaveformNormalization
from speechkit.pretrained import Wav2Vec2Features, export_wav2vec2
from tests.helpers.batch_invariance import assert_batch_invariant

RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "SynthSpeech" / "wav2vec2"
SMALL = dict(conv_channels=[128] * 7, d_model=256, num_layers=4, num_heads=4, ffn_dim=1024,
             pos_conv_kernel=32, pos_conv_groups=16)


@pytest.fixture(scope="module")
def encoder():
    torch.manual_seed(0)
    return Wav2Vec2Model(Wav2Vec2Config(**SMALL)).eval()


def test_recipe_folder_gives_every_layer_of_the_encoder(tmp_path, encoder):
    folder = tmp_path / "features"
    folder.mkdir()
    shutil.copy(RECIPE / "hparams" / "features.yaml", folder / "hyperparams.yaml")
    torch.save(encoder.state_dict(), folder / "encoder.ckpt")
    features = Wav2Vec2Features.from_hparams(folder)
    wav = torch.randn(8000) * 0.1
    audio.write(tmp_path / "a.flac", wav, 16000)
    read = audio.read(tmp_path / "a.flac")
    normalized, lengths = WaveformNormalization()(read.unsqueeze(0), torch.tensor([len(read)]))
    with torch.no_grad():
        expected = encoder(normalized, lengths)
    torch.testing.assert_close(features.extract_file(tmp_path / "a.flac"), expected.output[0])
    third = features.extract_file(tmp_path / "a.flac", layer=3)
    torch.testing.assert_close(third, expected.hidden_states[3][0])
    every = features.extract_file(tmp_path / "a.flac", layer="all")
    assert every.shape == (5, 24, 256)
    torch.testing.assert_close(every[0], expected.hidden_states[0][0])
    with pytest.raises(ValueError, match=r"layer must be None, 'all' or an int in \[0, 4\]"):
        features.extract_file(tmp_path / "a.flac", layer=5)

    def extract(wavs, lengths):
        return features.extract_batch(wavs, lengths, layer=2)

    assert_batch_invariant(extract, [torch.randn(n) for n in (4000, 1700, 2900)], atol=5e-5)


def test_transformers_folder_with_its_preprocessor_config(tmp_path, encoder):
    export_wav2vec2(encoder, tmp_path / "hf")
    preprocessor = '{"do_normalize": false, "sampling_rate": 16000}'
    (tmp_path / "hf" / "preprocessor_config.json").write_text(preprocessor)
    features = Wav2Vec2Features.from_huggingface(tmp_path / "hf")
    assert "normalize" not in features.mods
    wav = torch.randn(1, 3000)
    with torch.no_grad():
        torch.testing.assert_close(features.extract_batch(wav)[0], encoder(wav, torch.tensor([3000])).output)
