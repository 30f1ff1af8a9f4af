"""The frame-rate vocoder: ConvNeXt blocks predicting each frame's STFT, then an inverse STFT."""

import pytest
import torch

from speechkit.models import ISTFTGenerator, MelSpectrogram
from speechkit.models.istft_vocoder import ISTFT_PRESETS
from speechkit.pretrained import Vocoder
from speechkit.pretrained.loading import save_weights
from tests.helpers.batch_invariance import assert_batch_invariant
from tests.helpers.job_models import VOCODER_HYPERPARAMS, VOCODER_MEL
from tests.helpers.tone_fitting import tone_fitting_losses


def tiny_generator(**sizes):
    torch.manual_seed(0)
    return ISTFTGenerator(n_mels=16, channels=16, hidden=32, num_blocks=2, n_fft=256, hop_length=64, **sizes)


def test_output_has_hop_length_samples_per_frame_and_nothing_past_each_item():
    wavs, samples = tiny_generator()(torch.randn(2, 7, 16), torch.tensor([7, 3]))
    assert wavs.shape == (2, 7 * 64) and samples.tolist() == [7 * 64, 3 * 64]
    assert torch.count_nonzero(wavs[1, 3 * 64:]) == 0 and torch.count_nonzero(wavs[1, :3 * 64]) > 0


def test_overlap_add_inverts_the_analysis_stft():
    """Frames of a centred Hann STFT, overlap-added and divided by the window envelope, give the signal back:
    the synthesis is an exact inverse STFT, so the model only has to predict the spectrum."""
    generator = tiny_generator()
    signal = torch.randn(2, 64 * 30)
    spectrum = torch.stft(signal, 256, 64, 256, torch.hann_window(256), center=True,
                          return_complex=True).transpose(1, 2)  # (batch, 31 frames, 129 bins)
    rebuilt = generator.overlap_add(spectrum, torch.ones(2, spectrum.shape[1]))
    torch.testing.assert_close(rebuilt[:, :signal.shape[1]], signal, atol=1e-5, rtol=0)


def test_an_item_alone_equals_the_item_padded_in_a_batch():
    assert_batch_invariant(tiny_generator(), [torch.randn(n, 16) for n in (9, 4, 6)])


def test_training_on_a_tone_lowers_the_stft_loss():
    mel = MelSpectrogram(n_fft=256, win_length=256, hop_length=64, n_mels=16)
    losses = tone_fitting_losses(tiny_generator(), mel, samples=3200, steps=40)
    assert losses[-1] < 0.6 * losses[0], losses


def test_presets_and_bad_inputs():
    assert set(ISTFT_PRESETS) >= {"tiny", "small", "base"}
    assert ISTFTGenerator.from_preset("tiny", n_mels=16, n_fft=256, hop_length=64).hop_length == 64
    with pytest.raises(ValueError, match="unknown iSTFT vocoder preset"):
        ISTFTGenerator.from_preset("huge")
    with pytest.raises(ValueError, match=r"\(batch, frames, 16\)"):
        tiny_generator()(torch.randn(1, 5, 12))
    with pytest.raises(ValueError, match="n_fft must be even and at least hop_length"):
        ISTFTGenerator(n_fft=128, hop_length=256)


def test_a_model_folder_with_it_serves_through_the_vocoder_interface(tmp_path):
    sizes = dict(n_mels=16, channels=16, hidden=32, num_blocks=2, n_fft=256, hop_length=64)
    text = VOCODER_HYPERPARAMS.split("generator: !new:")[0]
    text += "generator: !new:speechkit.models.ISTFTGenerator\n"
    text += "".join(f"  {k}: {v}\n" for k, v in sizes.items())
    text += "modules:" + VOCODER_HYPERPARAMS.split("\nmodules:", 1)[1]
    (tmp_path / "hyperparams.yaml").write_text(text)
    save_weights(ISTFTGenerator(**sizes).state_dict(), tmp_path / "generator.safetensors")
    vocoder = Vocoder.from_hparams(str(tmp_path))
    assert isinstance(vocoder.mods["generator"], ISTFTGenerator)
    assert (vocoder.n_mels, vocoder.hop_length) == (16, 64)
    wave = torch.randn(VOCODER_MEL["hop_length"] * 20)
    mels, frames = vocoder.mel_batch(wave.unsqueeze(0))
    wavs, samples = vocoder.generate(mels, frames)
    assert samples.tolist() == [int(frames[0]) * 64] and torch.isfinite(wavs).all()
