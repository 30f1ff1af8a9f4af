"""Features: STFT, filterbanks, MFCC, deltas, speed perturbation; batch invariance and bad inputs."""
from __future__ import annotations

import math

import pytest
import torch

from speechkit.errors import DataError
from speechkit.features import (
    MFCC,
    STFT,
    Deltas,
    Fbank,
    SpeedPerturb,
    deltas,
    fbank,
    mel_filterbank,
    num_frames,
    speed_perturb,
    stft,
)
from speechkit.features.filterbanks import dct_matrix, hz_to_mel, mel_to_hz
from speechkit.features.speed_perturb import perturbed_lengths
from tests.helpers.batch_invariance import assert_batch_invariant

SR = 16000


def waves(*lengths):
    return [torch.randn(n) for n in lengths]


def sine(freq, samples, rate=SR):
    return torch.sin(2 * math.pi * freq * torch.arange(samples) / rate)


@pytest.mark.parametrize("module", [STFT(n_fft=256, hop_length=80, win_length=200), Fbank(n_mels=40),
                                    MFCC(n_mfcc=13, delta_order=2), Fbank(n_mels=23, delta_order=1)],
                         ids=["stft", "fbank", "mfcc_deltas", "fbank_deltas"])
def test_feature_modules_are_batch_invariant(module):
    # Lengths include one shorter than the centering pad and one that is not a multiple of the hop.
    outputs = assert_batch_invariant(module, waves(4000, 1234, 2561, 100))
    hop = 80 if isinstance(module, STFT) else 160
    assert [o.shape[0] for o in outputs] == [1 + n // hop for n in (4000, 1234, 2561, 100)]


def test_feature_modules_keep_nothing_in_checkpoints_and_match_the_functions():
    x, lengths = torch.randn(2, 3000), torch.tensor([3000, 2100])
    for module in (STFT(), Fbank(), MFCC()):
        assert module.state_dict() == {}  # cached windows and filters are rebuilt, never saved
    torch.testing.assert_close(Fbank(n_mels=40)(x, lengths)[0], fbank(x, lengths, n_mels=40)[0])
    with torch.autocast("cpu", dtype=torch.bfloat16):  # features stay float32 under mixed precision
        mixed, _ = Fbank(n_mels=40)(x, lengths)
    assert mixed.dtype == torch.float32
    torch.testing.assert_close(mixed, fbank(x, lengths, n_mels=40)[0])


def test_stft_matches_torch_stft_on_an_unpadded_item():
    x = torch.randn(1, 3000)
    spec, frames = stft(x, torch.tensor([3000]), n_fft=512, hop_length=160, win_length=400, window="hann")
    reference = torch.stft(x, 512, 160, 400, window=torch.hann_window(400), center=True, pad_mode="reflect",
                           return_complex=True).transpose(1, 2)
    assert spec.shape == reference.shape and frames.tolist() == [reference.shape[1]]
    torch.testing.assert_close(spec, reference, atol=1e-4, rtol=1e-4)


def test_stft_zeroes_frames_past_each_length_and_counts_frames():
    x = torch.randn(2, 1600)
    spec, frames = stft(x, torch.tensor([1600, 480]), n_fft=400, hop_length=160, win_length=400)
    assert frames.tolist() == [11, 4] and spec.shape[1] == 11
    assert torch.all(spec[1, 4:] == 0) and torch.all(spec[1, :4].abs().sum(-1) > 0)
    no_center = num_frames(torch.tensor([1600, 399, 400, 0]), 400, 160, center=False)
    assert no_center.tolist() == [8, 0, 1, 0]


def test_fbank_puts_a_sine_in_the_mel_band_of_its_frequency():
    feats, _ = fbank(sine(1000.0, SR).unsqueeze(0), torch.tensor([SR]), n_mels=40)
    band = int(feats[0, 10:-10].mean(0).argmax())
    centers = mel_to_hz(torch.linspace(hz_to_mel(0.0), hz_to_mel(SR / 2), 42))[1:-1]
    assert abs(float(centers[band]) - 1000.0) < 100.0


def test_mel_filterbank_triangles_and_dct_basis():
    filters = mel_filterbank(257, 40, SR)
    assert filters.shape == (257, 40)
    assert torch.all(filters >= 0) and float(filters.max()) <= 1.0 + 1e-6
    assert torch.all(filters.sum(0)[5:] > 0)  # every band above the lowest few catches some bins
    basis = dct_matrix(40, 40)
    torch.testing.assert_close(basis.T @ basis, torch.eye(40), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="f_max"):
        mel_filterbank(257, 40, SR, f_min=0.0, f_max=9000.0)
    with pytest.raises(ValueError, match="n_mfcc"):
        dct_matrix(20, 21)


def test_deltas_of_a_ramp_are_constant_inside_and_respect_each_items_edges():
    ramp = torch.arange(10, dtype=torch.float32).view(1, 10, 1).repeat(2, 1, 3)
    ramp[1, 6:] = 100.0  # padding of the second item must not leak into its deltas
    out = deltas(ramp, torch.tensor([10, 6]), window=2)
    torch.testing.assert_close(out[0, 2:8], torch.ones(6, 3))
    alone = deltas(ramp[1:, :6], torch.tensor([6]), window=2)
    torch.testing.assert_close(out[1, :6], alone[0])
    assert torch.all(out[1, 6:] == 0)
    assert_batch_invariant(Deltas(), [torch.randn(n, 5) for n in (9, 3, 6)])


def test_bad_lengths_are_refused_with_a_clear_message():
    x = torch.randn(2, 100)
    with pytest.raises(DataError, match="relative lengths"):
        Fbank()(x, torch.tensor([1.0, 0.5]))
    with pytest.raises(DataError, match=r"shape \(2,\)"):
        Fbank()(x, torch.tensor([100]))
    with pytest.raises(DataError, match=r"\[0, 100\]"):
        Fbank()(x, torch.tensor([100, 101]))
    with pytest.raises(ValueError, match="unknown window"):
        Fbank(window="triangle")


def test_speed_perturb_changes_pitch_and_length_and_is_batch_invariant():
    x = sine(440.0, SR).unsqueeze(0)
    fast, lengths = speed_perturb(x, torch.tensor([SR]), speed=1.1)
    assert lengths.tolist() == [math.ceil(SR / 1.1)] and fast.shape[1] == lengths[0]
    spectrum = torch.fft.rfft(fast[0, 1000:-1000]).abs()
    peak_hz = float(spectrum.argmax()) * SR / (fast.shape[1] - 2000)
    assert abs(peak_hz - 484.0) < 3.0
    assert_batch_invariant(lambda w, n: speed_perturb(w, n, 0.9), waves(3000, 1700, 2222), atol=1e-5)
    assert perturbed_lengths(torch.tensor([1000]), 0.9).tolist() == [1112]


def test_speed_perturb_module_draws_per_item_speeds_in_training_only():
    module = SpeedPerturb(speeds=(0.9, 1.1))
    x, lengths = torch.randn(6, 2000), torch.tensor([2000, 1500, 1000, 2000, 800, 1200])
    module.eval()
    y, same = module(x, lengths)
    assert y is x and torch.equal(same, lengths)
    module.train()
    y, new_lengths = module(x, lengths, generator=torch.Generator().manual_seed(3))
    for i, length in enumerate(lengths.tolist()):
        candidates = {int(perturbed_lengths(torch.tensor([length]), s)) for s in (0.9, 1.1)}
        assert int(new_lengths[i]) in candidates
        speed = 0.9 if int(new_lengths[i]) > length else 1.1
        alone, _ = speed_perturb(x[i:i + 1, :length], torch.tensor([length]), speed)
        torch.testing.assert_close(y[i, : int(new_lengths[i])], alone[0], atol=1e-5, rtol=1e-4)
        assert torch.all(y[i, int(new_lengths[i]):] == 0)
    with pytest.raises(ValueError, match="speed must be positive"):
        SpeedPerturb(speeds=(0.0,))
