"""mixture_crop: the same window of a written mixture and its sources, at the model's rate whatever the files'
rate and channels (the audio policy), and the same window for an item every time."""
from __future__ import annotations

import numpy as np
import soundfile
import torch

from speechkit.data.audio_policy import AudioPolicy
from speechkit.data.mixtures import mixture_crop


def _write(path, rate, channels, seed):
    wave = np.random.default_rng(seed).uniform(-0.5, 0.5, (rate, channels)).astype(np.float32)
    soundfile.write(path, wave, rate, subtype="FLOAT")
    return str(path)


def test_files_at_the_models_rate_are_cropped_in_place_and_others_converted_first(tmp_path):
    policy = AudioPolicy(8000)
    mix = _write(tmp_path / "mix.wav", 8000, 2, 0)   # stereo at the model's rate: mixed down in its window
    s1 = _write(tmp_path / "s1.wav", 16000, 1, 1)    # another rate: converted whole, then the same window
    crop = mixture_crop(["mix", "s1"], 2000, seed=3, policy=policy)
    first, second = crop.func("utt-1", mix, s1), crop.func("utt-1", mix, s1)
    assert all(torch.equal(a, b) for a, b in zip(first, second))  # an item's window never changes
    mixed, source = first
    assert mixed.shape == source.shape == (2000,)
    whole_mix, whole_source = policy.read(mix), policy.read(s1)
    starts = [i for i in range(8000 - 2000 + 1) if torch.equal(whole_mix[i:i + 2000], mixed)]
    assert len(starts) == 1
    torch.testing.assert_close(source, whole_source[starts[0]:starts[0] + 2000])
