"""Audio I/O: formats, segments, channels, header info, sample-rate checks and readable errors."""
from __future__ import annotations

import numpy as np
import pytest
import soundfile
import torch

from speechkit.data import audio
from speechkit.errors import AudioError

RATE = 16000


def ramp(samples: int, channels: int = 1) -> torch.Tensor:
    # distinct values per sample and channel, exactly representable in 16-bit PCM
    values = torch.arange(samples * channels, dtype=torch.float32).reshape(samples, channels) % 2000 - 1000
    values = values / 32768.0
    return values[:, 0] if channels == 1 else values


@pytest.mark.parametrize("ext", ["wav", "flac"])
def test_lossless_round_trip_is_exact(tmp_path, ext):
    wave = ramp(3200)
    path = tmp_path / f"a.{ext}"
    audio.write(path, wave, RATE)
    read = audio.read(path)
    assert read.dtype == torch.float32 and read.shape == (3200,)
    assert torch.equal(read, wave)
    found = audio.info(path)
    assert (found.frames, found.sample_rate, found.channels) == (3200, RATE, 1)
    assert found.duration == pytest.approx(0.2)
    assert found.format == ext.upper()


@pytest.mark.parametrize("ext, subtype", [("wav", "PCM_16"), ("flac", "PCM_16"), ("wav", "PCM_24"),
                                          ("wav", "FLOAT")])
def test_fast_integer_path_gives_libsndfile_values(tmp_path, ext, subtype):
    extremes = torch.tensor([-1.0, -32767 / 32768, -0.5, 0.0, 1 / 32768, 0.5, 32767 / 32768])
    wave = torch.cat([extremes, ramp(500)])
    path = tmp_path / f"a.{ext}"
    audio.write(path, wave, RATE, subtype=subtype)
    expected, _ = soundfile.read(path, dtype="float32")
    assert torch.equal(audio.read(path), torch.from_numpy(expected))
    assert torch.equal(audio.read(path, 3, 9), torch.from_numpy(expected[3:9]))


def test_ogg_vorbis_reads_close_to_source(tmp_path):
    wave = 0.5 * torch.sin(2 * np.pi * 440 * torch.arange(RATE) / RATE)
    path = tmp_path / "a.ogg"
    audio.write(path, wave, RATE)
    read = audio.read(path)
    assert read.dtype == torch.float32
    assert abs(read.shape[0] - RATE) < 100
    assert audio.info(path).sample_rate == RATE
    assert torch.corrcoef(torch.stack([read[1000:8000], wave[1000:8000]]))[0, 1] > 0.99


@pytest.mark.parametrize("ext", ["wav", "flac"])
def test_segments_in_samples_and_seconds(tmp_path, ext):
    wave = ramp(8000)
    path = tmp_path / f"a.{ext}"
    audio.write(path, wave, RATE)
    assert torch.equal(audio.read(path, start=100, stop=600), wave[100:600])
    assert torch.equal(audio.read(path, start=0.125, stop=0.25, unit="seconds"), wave[2000:4000])
    assert torch.equal(audio.read(path, start=7000), wave[7000:])
    assert torch.equal(audio.read(path, stop=50), wave[:50])
    assert torch.equal(audio.read(path, start=7900, stop=9000), wave[7900:])  # past the end: cut
    assert audio.read(path, start=10, stop=10).shape == (0,)


def test_manifest_style_segment_dicts(tmp_path):
    wave = ramp(8000)
    path = tmp_path / "a.flac"
    audio.write(path, wave, RATE)
    assert torch.equal(audio.read({"file": str(path), "start": 100, "stop": 300}), wave[100:300])
    segment = {"file": str(path), "start": 0.25, "stop": 0.375, "unit": "seconds"}
    assert torch.equal(audio.read(segment), wave[4000:6000])
    with pytest.raises(AudioError, match="'file' key"):
        audio.read({"path": str(path)})
    with pytest.raises(AudioError, match=r"a\.flac: sample rate is 16000"):
        audio.read(segment, sample_rate=8000)


def test_bad_segments_raise_naming_the_file(tmp_path):
    path = tmp_path / "a.wav"
    audio.write(path, ramp(1000), RATE)
    with pytest.raises(AudioError, match=r"a\.wav.*only 1000 samples"):
        audio.read(path, start=5000, stop=6000)
    with pytest.raises(AudioError, match="bad segment"):
        audio.read(path, start=500, stop=100)
    with pytest.raises(AudioError, match="whole number of samples"):
        audio.read(path, start=0.5)
    with pytest.raises(AudioError, match="unit"):
        audio.read(path, start=1, unit="ms")


def test_channel_selection(tmp_path):
    stereo = ramp(1000, channels=3)
    path = tmp_path / "multi.flac"
    audio.write(path, stereo, RATE)
    assert audio.info(path).channels == 3
    assert torch.equal(audio.read(path), stereo)
    assert torch.equal(audio.read(path, channels=1), stereo[:, 1])
    assert torch.equal(audio.read(path, channels=-1), stereo[:, 2])
    assert torch.equal(audio.read(path, channels=[2, 0]), stereo[:, [2, 0]])
    assert audio.read(path, channels=[1]).shape == (1000, 1)
    assert torch.equal(audio.read(path, 10, 20, channels=0), stereo[10:20, 0])
    with pytest.raises(AudioError, match="3 channel"):
        audio.read(path, channels=3)


def test_info_does_not_decode(tmp_path, monkeypatch):
    path = tmp_path / "a.flac"
    audio.write(path, ramp(4000), 8000)

    def no_decoding(*args, **kwargs):
        raise AssertionError("info() decoded samples")

    monkeypatch.setattr(soundfile.SoundFile, "read", no_decoding)
    assert audio.info(path).duration == pytest.approx(0.5)


def test_missing_and_undecodable_files_name_the_path(tmp_path):
    with pytest.raises(AudioError, match=r"not found: .*missing\.flac"):
        audio.read(tmp_path / "missing.flac")
    with pytest.raises(AudioError, match=r"not found: .*missing\.flac"):
        audio.info(tmp_path / "missing.flac")
    garbage = tmp_path / "garbage.wav"
    garbage.write_bytes(b"RIFF not really a wave file" * 10)
    with pytest.raises(AudioError, match=r"cannot decode .*garbage\.wav"):
        audio.read(garbage)
    with pytest.raises(AudioError, match=r"cannot decode .*garbage\.wav"):
        audio.info(garbage)
    with pytest.raises(AudioError, match="directory"):
        audio.read(tmp_path)


def test_sample_rate_check_and_resampling_on_read(tmp_path):
    path = tmp_path / "a.wav"
    audio.write(path, ramp(8000), 8000)
    with pytest.raises(AudioError, match=r"a\.wav.*8000 Hz, expected 16000 Hz"):
        audio.read(path, sample_rate=16000)
    upsampled = audio.read(path, sample_rate=16000, resample_to_rate=True)
    assert upsampled.shape == (16000,)
    assert audio.read(path, sample_rate=8000).shape == (8000,)
    wave, rate = audio.read_with_rate(path)
    assert rate == 8000 and wave.shape == (8000,)


def test_fast_numpy_path_and_write_errors(tmp_path):
    path = tmp_path / "a.flac"
    audio.write(path, ramp(500).numpy(), RATE)
    array, rate = audio.read_array(path, 100, 200)
    assert isinstance(array, np.ndarray) and array.dtype == np.float32 and rate == RATE
    assert np.array_equal(array, ramp(500).numpy()[100:200])
    with pytest.raises(AudioError, match="transpose"):
        audio.write(tmp_path / "b.wav", torch.zeros(2, 100), RATE)
    with pytest.raises(AudioError, match="shape"):
        audio.write(tmp_path / "c.wav", torch.zeros(2, 2, 100), RATE)
    with pytest.raises(AudioError, match=r"d\.xyz"):
        audio.write(tmp_path / "d.xyz", torch.zeros(100), RATE)
    audio.write(tmp_path / "new" / "folder" / "e.wav", torch.zeros(10), RATE)
    assert audio.info(tmp_path / "new" / "folder" / "e.wav").frames == 10


def test_nan_and_inf_samples_are_refused_naming_the_file(tmp_path):
    wave = np.zeros((100, 2), np.float32)
    wave[40, 1], wave[70, 0] = np.nan, -np.inf
    soundfile.write(tmp_path / "bad.wav", wave, 16000, subtype="FLOAT")
    with pytest.raises(AudioError, match=r"bad.wav: 2 sample\(s\) are NaN or infinite \(the first at sample "
                                         r"40\); the recording is damaged"):
        audio.read(tmp_path / "bad.wav")
    with pytest.raises(AudioError, match=r"the first at sample 70"):
        audio.read_with_rate(tmp_path / "bad.wav", start=50)
    assert audio.read(tmp_path / "bad.wav", stop=40).shape == (40, 2)  # a clean segment reads
