"""Vocal tract length perturbation: formants move by the factor, the band edge stays, items do not mix."""
from __future__ import annotations

import math

import pytest
import torch

from speechkit.features import Fbank, FeatureChain, FrequencyWarp, SpecAugment, frequency_warp
from speechkit.features.frequency_warp import inverse_warp

RATE = 16000


def tone_fbank(hz: float) -> torch.Tensor:
    """(1, frames, 80) log-mel features of one second of a pure tone."""
    t = torch.arange(RATE, dtype=torch.float64) / RATE
    wave = torch.sin(2 * math.pi * hz * t).float().unsqueeze(0)
    feats, _ = Fbank(sample_rate=RATE, n_mels=80)(wave, torch.tensor([RATE]))
    return feats


def peak_channel(feats: torch.Tensor) -> int:
    return int(feats[0, 10:-10].mean(dim=0).argmax())


def test_factor_one_is_the_identity():
    x = torch.randn(3, 20, 80)
    assert torch.allclose(frequency_warp(x, torch.ones(3)), x, atol=1e-6)


@pytest.mark.parametrize("alpha", [0.9, 1.1])
def test_a_warped_tone_peaks_where_the_scaled_tone_does(alpha):
    warped = frequency_warp(tone_fbank(1000.0), torch.tensor([alpha]), sample_rate=RATE)
    expected = peak_channel(tone_fbank(1000.0 * alpha))
    assert peak_channel(tone_fbank(1000.0)) != expected  # the check can tell the factor apart
    assert abs(peak_channel(warped) - expected) <= 1


def test_the_warp_is_linear_below_the_knee_continuous_at_it_and_pins_the_band_edge():
    alpha = torch.tensor([0.85, 1.15])
    freqs = torch.tensor([0.0, 1000.0, 4080.0 - 1e-6, 4080.0 + 1e-6, 8000.0], dtype=torch.float64)
    source = inverse_warp(freqs, alpha.double(), boundary=4800.0, nyquist=8000.0)
    assert torch.allclose(source[:, 1], 1000.0 / alpha.double())
    assert torch.allclose(source[:, 4], torch.full((2,), 8000.0, dtype=torch.float64))
    assert torch.allclose(source[0, 2], source[0, 3], atol=1e-3)  # knee of alpha 0.85 at 4800 * 0.85 Hz
    assert torch.all(source.diff(dim=1) > 0)  # monotonic: no channel reads from above its neighbour


def test_each_item_is_warped_alone_and_padding_stays_zero():
    lengths = torch.tensor([30, 12, 21])
    x = torch.randn(3, 30, 40)
    x[1, 12:] = 0.0
    x[2, 21:] = 0.0
    alpha = torch.tensor([0.9, 1.0, 1.12])
    batched = frequency_warp(x, alpha)
    for i, length in enumerate(lengths.tolist()):
        alone = frequency_warp(x[i:i + 1, :length], alpha[i:i + 1])
        assert torch.equal(batched[i, :length], alone[0])
        assert torch.all(batched[i, length:] == 0.0)


def test_module_draws_factors_in_training_only_and_is_reproducible():
    warp = FrequencyWarp(warp_range=(0.85, 1.15))
    x, lengths = torch.randn(4, 25, 80), torch.full((4,), 25)
    warp.eval()
    assert warp(x, lengths)[0] is x
    warp.train()
    first = warp(x, lengths, generator=torch.Generator().manual_seed(3))[0]
    again = warp(x, lengths, generator=torch.Generator().manual_seed(3))[0]
    assert torch.equal(first, again)
    assert not torch.allclose(first, x)
    untouched = FrequencyWarp(prob=0.0)(x, lengths)[0]
    assert torch.allclose(untouched, x, atol=1e-6)


@pytest.mark.parametrize("kwargs, message", [
    (dict(warp_range=(1.1, 0.9)), "warp_range"),
    (dict(warp_range=(0.0, 1.1)), "warp_range"),
    (dict(prob=1.5), "prob"),
])
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FrequencyWarp(**kwargs)


def test_bad_shapes_and_boundaries_are_named():
    with pytest.raises(ValueError, match="batch, frames, n_mels"):
        frequency_warp(torch.randn(20, 80), torch.ones(1))
    with pytest.raises(ValueError, match="boundary"):
        frequency_warp(torch.randn(1, 20, 80), torch.ones(1), boundary=9000.0)


def test_feature_chain_runs_steps_in_order_and_passes_eval_mode_on():
    chain = FeatureChain(FrequencyWarp(warp_range=(1.1, 1.1)),
                         SpecAugment(freq_masks=1, freq_mask_width=5, time_masks=0))
    x, lengths = torch.randn(2, 30, 80), torch.tensor([30, 20])
    torch.manual_seed(0)
    y, out_lengths = chain(x, lengths)
    torch.manual_seed(0)
    warped, _ = chain.steps[0](x, lengths)
    expected, _ = chain.steps[1](warped, lengths)
    assert torch.equal(y, expected) and torch.equal(out_lengths, lengths)
    chain.eval()
    assert chain(x, lengths)[0] is x
    with pytest.raises(ValueError, match="at least one step"):
        FeatureChain()


def test_the_default_knee_follows_the_band_so_8_khz_features_warp_too():
    """The knee sits at 0.6 x Nyquist: 4.8 kHz for 16 kHz features (as before), 2.4 kHz for 8 kHz ones."""
    x = torch.randn(2, 20, 40)
    alpha = torch.tensor([0.9, 1.1])
    assert torch.equal(frequency_warp(x, alpha), frequency_warp(x, alpha, boundary=4800.0))
    narrow = frequency_warp(x, alpha, sample_rate=8000)
    assert torch.equal(narrow, frequency_warp(x, alpha, sample_rate=8000, boundary=2400.0))
    warp = FrequencyWarp(sample_rate=8000, warp_range=(0.9, 1.1)).train()
    assert warp(x, torch.tensor([20, 20]))[0].shape == x.shape
    with pytest.raises(ValueError, match="boundary"):
        frequency_warp(x, alpha, sample_rate=8000, boundary=4800.0)  # past the 4 kHz band: named
