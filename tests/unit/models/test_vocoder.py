"""The mel-to-waveform generator and the Griffin-Lim baseline."""
import math

import pytest
import torch

from speechkit.models.vocoder import PRESETS, MelGenerator, MelSpectrogram, griffin_lim
from speechkit.nn import stft_distances
from tests.helpers.batch_invariance import assert_batch_invariant
from tests.helpers.tone_fitting import tone_fitting_losses


def tiny_generator(**sizes):
    torch.manual_seed(0)
    return MelGenerator(n_mels=16, channels=8, upsample_rates=(4, 2), resblock_kernels=(3,),
                        resblock_dilations=(1, 3), **sizes)


def test_output_has_hop_length_samples_per_frame_in_range():
    generator = tiny_generator()
    wavs, samples = generator(torch.randn(2, 7, 16), torch.tensor([7, 3]))
    assert wavs.shape == (2, 56) and samples.tolist() == [56, 24]
    assert wavs.abs().max() <= 1.0
    assert torch.count_nonzero(wavs[1, 24:]) == 0


def test_odd_upsample_rates_give_exact_lengths():
    generator = MelGenerator(n_mels=4, channels=8, upsample_rates=(3, 5), resblock_kernels=(3,),
                             resblock_dilations=(1,))
    wavs, samples = generator(torch.randn(1, 6, 4), torch.tensor([6]))
    assert generator.hop_length == 15 and wavs.shape == (1, 90) and samples.tolist() == [90]


def test_generator_is_batch_invariant():
    generator = tiny_generator()
    assert_batch_invariant(generator, [torch.randn(n, 16) for n in (9, 4, 6)])


def test_mel_front_end_is_batch_invariant():
    mel = MelSpectrogram(n_fft=256, win_length=256, hop_length=64, n_mels=16)
    assert_batch_invariant(mel, [torch.randn(n) for n in (900, 300, 640)])


def test_generator_learns_to_fit_a_tone():
    """A few steps of the STFT loss move the output towards the target (the loss trains the model)."""
    mel = MelSpectrogram(n_fft=256, win_length=256, hop_length=8, n_mels=16)
    losses = tone_fitting_losses(tiny_generator(), mel, samples=800, steps=25)
    assert losses[-1] < 0.7 * losses[0]


def test_griffin_lim_recovers_a_tone_closely():
    mel = MelSpectrogram(n_fft=512, win_length=512, hop_length=128, n_mels=64)
    tone = 0.5 * torch.sin(2 * math.pi * 440 * torch.arange(8000) / 16000)
    wavs = torch.stack([tone, torch.cat([tone[:4000], torch.zeros(4000)])])
    lengths = torch.tensor([8000, 4000])
    feats, frames = mel(wavs, lengths)
    rebuilt, samples = griffin_lim(feats, frames, mel, iterations=16)
    assert samples.tolist() == [frames[0] * 128, frames[1] * 128]
    distances = stft_distances(rebuilt[:, :8000], wavs, lengths, [(512, 128, 512)])
    noise = stft_distances(0.1 * torch.randn(2, 8000), wavs, lengths, [(512, 128, 512)])
    assert (distances["spectral_convergence"] < 0.5).all()
    assert (distances["spectral_convergence"] < noise["spectral_convergence"]).all()


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="unknown vocoder preset"):
        MelGenerator.from_preset("huge")
    with pytest.raises(ValueError, match=r"\(batch, frames, 16\)"):
        tiny_generator()(torch.randn(1, 5, 12))
    assert set(PRESETS) >= {"small"}
