"""The audio policy: one conversion (rate, channels) for every loader, and the errors of files it refuses."""
from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
import scipy.signal
import soundfile
import torch

from speechkit.data import audio
from speechkit.data.audio_policy import AudioPolicy, read_as, shared_policy
from speechkit.data.batch import PaddedBatch
from speechkit.data.dataset import DynamicItemDataset
from speechkit.data.resample import POLICY_FILTER, resample
from speechkit.errors import AudioError, DataError
from speechkit.serve.audio_input import decode_upload
from speechkit.serve.limits import ServeLimits


def sine(freq: float, rate: int, seconds: float = 1.0) -> np.ndarray:
    return np.sin(2 * np.pi * freq * np.arange(int(rate * seconds)) / rate).astype(np.float32)


def stereo(rate: int, seconds: float = 1.0) -> np.ndarray:
    """Left a 440 Hz tone, right a 1 kHz tone at half the level: a mix and each channel differ."""
    return np.stack([0.5 * sine(440, rate, seconds), 0.25 * sine(1000, rate, seconds)], axis=1)


def test_stereo_44k_is_mixed_and_resampled_as_the_filter_does(tmp_path):
    path = tmp_path / "stereo.wav"
    soundfile.write(path, stereo(44100), 44100, subtype="FLOAT")
    got = AudioPolicy(16000).read(path)
    assert got.shape == (16000,) and got.dtype == torch.float32
    expected = resample(torch.from_numpy(stereo(44100)).mean(dim=1), 44100, 16000, **POLICY_FILTER)
    assert torch.allclose(got, expected, atol=1e-6)
    # Against a peer implementation (scipy's polyphase resampler, its own Kaiser filter) and the analytic
    # tones: the two resamplers agree away from the edges.
    peer = scipy.signal.resample_poly(stereo(44100).mean(axis=1).astype(np.float64), 160, 441)
    analytic = 0.5 * (0.5 * sine(440, 16000) + 0.25 * sine(1000, 16000))
    middle = slice(800, -800)
    assert np.abs(got.numpy()[middle] - peer[middle]).max() < 1e-3
    assert np.abs(got.numpy()[middle] - analytic[middle]).max() < 1e-4


def test_a_channel_can_be_picked_instead_of_mixed(tmp_path):
    path = tmp_path / "stereo.flac"
    soundfile.write(path, stereo(16000), 16000, subtype="PCM_24")
    left, right = AudioPolicy(16000, channels=0).read(path), AudioPolicy(16000, channels=1).read(path)
    both = audio.read(path)
    assert torch.equal(left, both[:, 0]) and torch.equal(right, both[:, 1])
    assert torch.allclose(AudioPolicy(16000).read(path), both.mean(dim=1))
    with pytest.raises(AudioError, match=r"stereo.flac: 16000 Hz, 2 channel\(s\).*channel 2.*docs/data.md"):
        AudioPolicy(16000, channels=2).read(path)


def test_a_mono_file_at_the_model_rate_is_read_unchanged(tmp_path):
    path = tmp_path / "mono.wav"
    soundfile.write(path, 0.5 * sine(300, 8000), 8000, subtype="PCM_16")
    assert torch.equal(AudioPolicy(8000, convert=False).read(path), audio.read(path))


@pytest.mark.parametrize("rate, channels", [(44100, 1), (16000, 2), (48000, 2)])
def test_without_conversion_a_mismatch_is_refused_naming_file_rate_and_channels(tmp_path, rate, channels):
    path = tmp_path / f"at{rate}x{channels}.wav"
    wave = stereo(rate, 0.1) if channels == 2 else sine(440, rate, 0.1)
    soundfile.write(path, wave, rate)
    with pytest.raises(AudioError) as caught:
        AudioPolicy(16000, convert=False).read(path)
    message = str(caught.value)
    assert str(path) in message and f"{rate} Hz, {channels} channel(s)" in message
    assert "16000 Hz mono" in message and "speechkit data convert" in message and "docs/data.md" in message


def test_a_manifest_of_mixed_rates_and_channels_pads_into_one_batch(tmp_path):
    """The stereo file that once stopped the first batch ('cannot pad sig: item 1 has shape (n, 2)') is
    mixed down; each item has the length its duration gives at the model's rate."""
    rows = {}
    for name, rate, wave in (("a", 16000, sine(200, 16000, 0.5)), ("b", 44100, stereo(44100, 0.5)),
                             ("c", 8000, sine(300, 8000, 0.5)), ("d", 48000, stereo(48000, 0.25))):
        soundfile.write(tmp_path / f"{name}.wav", wave, rate)
        rows[name] = {"wav": f"$root/{name}.wav", "duration": len(wave) / rate}
    (tmp_path / "data.json").write_text(json.dumps(rows))
    dataset = DynamicItemDataset.from_json(tmp_path / "data.json", replacements={"root": str(tmp_path)})
    dataset.add_dynamic_item(AudioPolicy(16000), takes=["wav"], provides=["sig"])
    dataset.set_output_keys(["id", "sig"])
    batch = PaddedBatch([dataset[i] for i in range(len(dataset))])
    wavs, lengths = batch.sig
    assert wavs.shape == (4, 8000) and lengths.tolist() == [8000, 8000, 8000, 4000]
    for index, data_id in enumerate(batch.id):
        assert torch.equal(wavs[index, :lengths[index]], read_as(tmp_path / f"{data_id}.wav", 16000))


def test_a_refused_file_in_a_dataset_names_the_manifest_id(tmp_path):
    soundfile.write(tmp_path / "loud.wav", stereo(22050, 0.1), 22050)
    dataset = DynamicItemDataset({"utt-7": {"wav": str(tmp_path / "loud.wav")}})
    dataset.add_dynamic_item(AudioPolicy(16000, convert=False), takes=["wav"], provides=["sig"])
    dataset.set_output_keys(["sig"])
    with pytest.raises(AudioError, match=r"manifest id 'utt-7': .*loud.wav: 22050 Hz, 2 channel\(s\)"):
        dataset[0]


def test_segments_are_read_in_the_files_own_samples_then_converted(tmp_path):
    path = tmp_path / "long.wav"
    soundfile.write(path, stereo(48000), 48000, subtype="FLOAT")
    segment = {"file": str(path), "start": 12000, "stop": 36000, "unit": "samples"}
    got = AudioPolicy(16000).read(segment)
    expected = resample(torch.from_numpy(stereo(48000)[12000:36000]).mean(dim=1), 48000, 16000,
                        **POLICY_FILTER)
    assert got.shape == (8000,) and torch.allclose(got, expected, atol=1e-6)


def test_the_server_converts_an_upload_exactly_as_the_policy_reads_the_file(tmp_path):
    path = tmp_path / "upload.wav"
    soundfile.write(path, stereo(44100), 44100, subtype="FLOAT")
    served = decode_upload(path.read_bytes(), 16000, ServeLimits(), name="upload.wav")
    assert torch.equal(served, AudioPolicy(16000).read(path))


def test_aliases_of_tones_above_the_new_nyquist_are_removed():
    # 9.5 kHz at 48 kHz would fold to 6.5 kHz at 16 kHz; the policy's filter leaves nothing audible.
    folded = AudioPolicy(16000).apply(torch.from_numpy(sine(9500, 48000)), 48000)
    assert folded[800:-800].abs().max() < 1e-4
    kept = AudioPolicy(16000).apply(torch.from_numpy(sine(7000, 48000)), 48000)
    assert abs(float(kept[800:-800].abs().max()) - 1.0) < 0.01  # 7 kHz passes (within 1%)


@pytest.mark.parametrize("arguments, message", [
    ({"sample_rate": 0}, "sample_rate must be a positive"), ({"sample_rate": 16000.5}, "sample_rate"),
    ({"sample_rate": True}, "sample_rate"), ({"sample_rate": 16000, "channels": "left"}, "channels must be"),
    ({"sample_rate": 16000, "channels": -1}, "channels must be"),
    ({"sample_rate": 16000, "convert": "yes"}, "convert must be")])
def test_bad_settings_are_refused(arguments, message):
    with pytest.raises(DataError, match=message):
        AudioPolicy(**arguments)


def test_bad_shapes_and_unreadable_files(tmp_path):
    with pytest.raises(AudioError, match=r"x: audio must be \(time,\) or \(time, channels\)"):
        AudioPolicy(16000).apply(torch.zeros(2, 3, 4), 16000, "x")
    (tmp_path / "junk.wav").write_bytes(b"not audio at all")
    with pytest.raises(AudioError, match="junk.wav"):
        AudioPolicy(16000).read(tmp_path / "junk.wav")


def test_mp3_on_an_old_libsndfile_says_what_to_install(tmp_path, monkeypatch):
    # No old libsndfile can be installed next to the current one: the version string is what is replaced.
    (tmp_path / "clip.mp3").write_bytes(b"\xff\xfb" + bytes(100))
    monkeypatch.setattr(soundfile, "__libsndfile_version__", "1.0.31")
    with pytest.raises(AudioError, match=r"clip.mp3: MP3 needs libsndfile >= 1.1.*soundfile>=0.12.1"):
        AudioPolicy(16000).read(tmp_path / "clip.mp3")


@pytest.mark.parametrize("ext", ["mp3", "ogg"])
def test_lossy_formats_are_read_and_converted(tmp_path, ext):
    path = tmp_path / f"clip.{ext}"
    soundfile.write(path, stereo(44100), 44100)
    got = AudioPolicy(16000).read(path)
    assert abs(got.shape[0] - 16000) <= 16000 * 0.01  # MP3 frames may pad the end slightly
    analytic = 0.5 * (0.5 * sine(440, 16000) + 0.25 * sine(1000, 16000))
    n = min(got.shape[0], analytic.shape[0])
    # Lossy codecs shift and shape the wave a little: compare levels, not samples.
    level = float(got[:n].pow(2).mean().sqrt())
    assert math.isclose(level, float(np.sqrt((analytic ** 2).mean())), rel_tol=0.1)


def test_policies_pickle_for_loader_workers_and_compare_by_settings():
    policy = shared_policy(16000)
    policy.apply(torch.zeros(441), 44100)  # builds a filter bank
    copy = pickle.loads(pickle.dumps(policy))
    assert copy == policy and copy._resamplers == {} and hash(copy) == hash(AudioPolicy(16000))
    assert AudioPolicy(16000) != AudioPolicy(16000, channels=0) != AudioPolicy(16000, convert=False)
    assert "16000 Hz mono (channel 1)" == AudioPolicy(16000, channels=1).describe()
    assert repr(policy) == "AudioPolicy(sample_rate=16000, channels='mix', convert=True)"


def test_a_model_folder_can_name_the_channel_its_model_was_trained_on(tmp_path):
    from speechkit.errors import HparamsError
    from speechkit.pretrained.interfaces import Pretrained
    from tests.helpers.job_models import write_model

    folder = write_model(tmp_path / "model")
    path = tmp_path / "stereo.wav"
    soundfile.write(path, stereo(44100), 44100, subtype="FLOAT")
    model = Pretrained.from_hparams(str(folder))
    assert model.audio_channels == "mix"
    assert torch.equal(model.load_audio(path), AudioPolicy(16000).read(path))
    text = (folder / "hyperparams.yaml").read_text()
    (folder / "hyperparams.yaml").write_text(text + "audio_channels: 1\n")
    model = Pretrained.from_hparams(str(folder))
    assert torch.equal(model.load_audio(path), AudioPolicy(16000, channels=1).read(path))
    (folder / "hyperparams.yaml").write_text(text + "audio_channels: left\n")
    with pytest.raises(HparamsError, match="audio_channels must be 'mix' or a channel index >= 0, got 'le"):
        Pretrained.from_hparams(str(folder))


def test_a_policy_keeps_the_filter_banks_of_its_most_recent_rates_only():
    from speechkit.data.audio_policy import MAX_KEPT_RESAMPLERS

    policy = AudioPolicy(16000)
    for rate in range(8000, 8000 + 100 * (MAX_KEPT_RESAMPLERS + 4), 100):  # a client at ever new rates
        policy.apply(torch.zeros(rate // 100), rate, "x")
    assert len(policy._resamplers) == MAX_KEPT_RESAMPLERS
    kept = policy._resamplers[next(iter(policy._resamplers))]
    policy.apply(torch.zeros(100), next(iter(policy._resamplers)), "x")  # used again: kept, not rebuilt
    assert policy._resamplers[next(reversed(policy._resamplers))] is kept
