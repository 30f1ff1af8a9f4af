"""Resampling: accuracy against analytic sines, aliasing, shapes, the module form, torchaudio if present."""
from __future__ import annotations

import importlib.util
import math

import pytest
import torch

from speechkit.data import audio
from speechkit.data.resample import POLICY_FILTER, Resample, StreamingResample, resample
from speechkit.errors import DataError


def sine(freq: float, rate: int, samples: int) -> torch.Tensor:
    return torch.sin(2 * math.pi * freq * torch.arange(samples, dtype=torch.float64) / rate)


@pytest.mark.parametrize("orig, new", [(16000, 8000), (8000, 16000), (44100, 16000), (16000, 22050),
                                       (48000, 44100)])
def test_matches_analytic_sine_away_from_edges(orig, new):
    wave = sine(440.0, orig, orig // 2)
    out = resample(wave, orig, new)
    assert out.shape == (math.ceil(wave.shape[0] * new / orig),)
    expected = sine(440.0, new, out.shape[0])
    margin = new // 50  # the filter sees zero padding near the edges
    assert (out - expected)[margin:-margin].abs().max() < 1e-3


def test_wider_kaiser_filter_is_more_accurate():
    wave = sine(1000.0, 44100, 22050)
    out = resample(wave, 44100, 16000, lowpass_filter_width=16, window="kaiser")
    expected = sine(1000.0, 16000, out.shape[0])
    assert (out - expected)[400:-400].abs().max() < 1e-5


def test_tone_above_new_nyquist_is_removed():
    out = resample(sine(6000.0, 16000, 8000), 16000, 8000)
    assert out[200:-200].abs().max() < 5e-3
    kept = resample(sine(3000.0, 16000, 8000), 16000, 8000)
    assert kept[200:-200].abs().max() > 0.9


def test_time_dimension_batches_and_dtypes():
    batch = torch.randn(3, 2, 1600)
    out = resample(batch, 16000, 12000)
    assert out.shape == (3, 2, 1200)
    for row in range(3):  # every row is resampled on its own
        assert torch.allclose(out[row, 1], resample(batch[row, 1], 16000, 12000), atol=1e-6)
    # audio.resample takes (time, channels), the layout audio.read gives, and uses the loaders' filter
    time_first = audio.resample(batch[0].T.contiguous(), 16000, 12000)
    assert time_first.shape == (1200, 2)
    assert torch.allclose(time_first.T, resample(batch[0], 16000, 12000, **POLICY_FILTER), atol=1e-6)
    assert resample(torch.ones(10, dtype=torch.int16), 8, 8).dtype == torch.float32
    assert resample(batch.double(), 16000, 8000).dtype == torch.float64
    same = torch.randn(50)
    assert resample(same, 16000, 16000) is same


def test_module_matches_function():
    wave = torch.randn(2, 4410)
    module = Resample(44100, 16000)
    assert torch.allclose(module(wave), resample(wave, 44100, 16000), atol=1e-6)
    assert "44100" in repr(module)


def test_bad_arguments_raise():
    with pytest.raises(DataError, match="orig_freq"):
        resample(torch.zeros(10), 0, 16000)
    with pytest.raises(DataError, match="new_freq"):
        resample(torch.zeros(10), 16000, 8000.5)
    with pytest.raises(DataError, match="window"):
        resample(torch.zeros(10), 16000, 8000, window="box")
    with pytest.raises(DataError, match="share only the factor 1"):
        resample(torch.zeros(10), 16001, 16000)
    with pytest.raises(DataError, match="backend"):
        resample(torch.zeros(10), 16000, 8000, backend="scipy")


@pytest.mark.skipif(importlib.util.find_spec("torchaudio") is not None, reason="torchaudio is installed")
def test_torchaudio_backend_without_torchaudio_says_so():
    with pytest.raises(DataError, match="torchaudio is not installed"):
        resample(torch.zeros(100), 16000, 8000, backend="torchaudio")


@pytest.mark.skipif(importlib.util.find_spec("torchaudio") is None, reason="torchaudio not installed")
def test_agrees_with_torchaudio():
    wave = torch.randn(2, 8000)
    for orig, new in [(16000, 8000), (44100, 16000), (8000, 11025)]:
        ours = resample(wave, orig, new)
        theirs = resample(wave, orig, new, backend="torchaudio")
        assert ours.shape == theirs.shape
        assert (ours - theirs).abs().max() < 1e-3


def _resample_in_pieces(wave, orig, new, sizes):
    stream = StreamingResample(orig, new, **POLICY_FILTER)
    pieces, start, turn = [], 0, 0
    while start < wave.shape[0]:
        size = sizes[turn % len(sizes)]
        pieces.append(stream.accept(wave[start:start + size]))
        start, turn = start + size, turn + 1
    pieces.append(stream.finish())
    assert stream.emitted == sum(p.numel() for p in pieces)
    return torch.cat(pieces)


@pytest.mark.parametrize("orig, new", [(44100, 16000), (48000, 16000), (16000, 8000), (8000, 16000),
                                       (22050, 16000), (16000, 16000)])
@pytest.mark.parametrize("sizes", [[1], [7, 13, 1, 401], [1023], [10 ** 6]])
def test_streaming_resample_in_any_pieces_equals_the_whole_signal(orig, new, sizes):
    wave = torch.randn(orig // 5 + 7, generator=torch.Generator().manual_seed(orig + len(sizes)))
    if sizes == [1] and orig > 16000:
        wave = wave[:orig // 20]  # one call per sample: a shorter signal keeps the test fast
    whole = resample(wave, orig, new, **POLICY_FILTER)
    streamed = _resample_in_pieces(wave, orig, new, sizes)
    assert streamed.shape == whole.shape
    assert (streamed - whole).abs().max() < 1e-5


def test_streaming_resample_of_short_and_empty_signals():
    for length in (0, 1, 5, 300):  # shorter than the filter, which then sees only padding
        wave = torch.randn(length)
        assert torch.allclose(_resample_in_pieces(wave, 48000, 16000, [2]) if length else
                              StreamingResample(48000, 16000).finish(),
                              resample(wave, 48000, 16000, **POLICY_FILTER), atol=1e-5)


def test_streaming_resample_keeps_only_what_the_next_samples_read():
    stream = StreamingResample(44100, 16000, **POLICY_FILTER)
    for piece in torch.randn(44100 * 2).split(4410):
        stream.accept(piece)
        assert stream._buffer.numel() < 441 + 2 * stream.padding  # a frame and its filter's reach
    assert stream.emitted > 31000  # the output lags by less than a frame and the filter's reach


def test_streaming_resample_refuses_misuse():
    stream = StreamingResample(48000, 16000)
    with pytest.raises(DataError, match=r"\(time,\) samples, got shape \(2, 3\)"):
        stream.accept(torch.zeros(2, 3))
    stream.finish()
    with pytest.raises(DataError, match="finished"):
        stream.accept(torch.zeros(3))
    with pytest.raises(DataError, match="finished already"):
        stream.finish()
    with pytest.raises(DataError, match="positive whole number"):
        StreamingResample(0, 16000)


def test_policy_stream_resamplers_share_the_policys_filter_bank():
    from speechkit.data.audio_policy import AudioPolicy

    policy = AudioPolicy(16000)
    first, second = policy.stream_resampler(44100), policy.stream_resampler(44100)
    assert first.kernel is second.kernel  # built once, for every stream
    wave = torch.randn(9000)
    for stream in (first, StreamingResample.like(Resample(44100, 16000, **POLICY_FILTER))):
        streamed = torch.cat([stream.accept(piece) for piece in wave.split(777)] + [stream.finish()])
        assert (streamed - policy.apply(wave, 44100)).abs().max() < 1e-5
