"""The trained voice activity detector: frame labels from turns, batch invariance, training on bursts of
harmonic sound and keeping noise apart where the energy detector cannot, saving and loading, bad weight
files, and the diarizer using the detector it is given."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from speechkit.diarization import Diarizer, FrameVAD, TrainedVAD, energy_vad, train_frame_vad
from speechkit.diarization.trained_vad import add_noise, reference_frames
from speechkit.errors import DataError
from tests.unit.diarization.voice_bursts import RATE, bursts


def frame_errors(turns, segments, frames: int) -> tuple:
    reference, hypothesis = reference_frames(turns, frames), reference_frames(segments, frames)
    return int((reference & ~hypothesis).sum()), int((~reference & hypothesis).sum()), int(reference.sum())


def test_reference_frames_mark_the_frames_inside_turns():
    marked = reference_frames([(0.05, 0.08, "a"), (0.2, 0.23)], 30)
    assert np.flatnonzero(marked).tolist() == [5, 6, 7, 20, 21, 22]


def test_an_item_gets_the_same_logits_alone_and_padded_in_a_batch():
    torch.manual_seed(0)
    model = FrameVAD().eval()
    waves = [torch.randn(n) * 0.1 for n in (8000, 12345, 3000)]
    lengths = torch.tensor([w.shape[0] for w in waves], dtype=torch.int64)
    with torch.no_grad():
        together, frames = model(torch.nn.utils.rnn.pad_sequence(waves, batch_first=True), lengths)
        for row, wave in enumerate(waves):
            alone, count = model(wave[None])
            assert int(count[0]) == int(frames[row])
            torch.testing.assert_close(together[row, : int(count[0])], alone[0], atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def trained():
    recordings = [bursts(seed) for seed in range(6)]
    return TrainedVAD(train_frame_vad(recordings, steps=80, batch_size=8, crop=1.5, seed=0))


@pytest.mark.slow  # trains a detector (5-25 s)
def test_trained_detector_keeps_noise_apart_where_energy_cannot(trained):
    """On unseen bursts in pink noise at 10 dB SNR, the level threshold calls nearly everything speech; the
    trained detector, which learned what speech frames look like, keeps most of the noise out."""
    wave, turns = bursts(100, seconds=4.0)
    noisy = add_noise(wave, "pink", 10.0, np.random.default_rng(1))
    frames = len(noisy) // 160
    energy = frame_errors(turns, energy_vad(torch.from_numpy(noisy), RATE), frames)
    learned = frame_errors(turns, trained(torch.from_numpy(noisy), RATE), frames)
    silence = frames - learned[2]
    assert energy[1] > 0.8 * silence  # the energy detector: noise is speech
    assert learned[1] < 0.3 * silence and learned[0] < 0.2 * learned[2], (energy, learned)


@pytest.mark.slow
def test_save_and_load_give_the_same_segments_and_bad_files_are_refused(trained, tmp_path):
    wave, _ = bursts(7)
    trained.save(tmp_path / "vad.safetensors")
    loaded = TrainedVAD.load(tmp_path / "vad.safetensors")
    assert loaded(torch.from_numpy(wave), RATE) == trained(torch.from_numpy(wave), RATE)
    from speechkit.pretrained.loading import save_weights

    save_weights({"net.0.weight": torch.zeros(2, 2)}, tmp_path / "other.safetensors")
    with pytest.raises(DataError, match="other.safetensors holds no FrameVAD weights"):
        TrainedVAD.load(tmp_path / "other.safetensors")
    with pytest.raises(DataError, match="at least one speech turn"):
        train_frame_vad([(np.zeros(RATE, dtype=np.float32), [])], steps=1)


def test_the_diarizer_uses_the_detector_it_is_given(tmp_path):
    from speechkit.pretrained import SpeakerRecognition
    from tests.helpers import job_models

    model = SpeakerRecognition.from_hparams(str(job_models.write_speaker_model(tmp_path / "spk")))
    wave = torch.from_numpy(bursts(3, seconds=4.0)[0])
    asked = []

    def fixed(audio, rate):
        asked.append((audio.shape[0], rate))
        return [(1.0, 2.0)]

    turns = Diarizer(model, vad=fixed).diarize(wave, num_speakers=1)
    assert asked == [(wave.shape[0], RATE)]
    assert turns[0][0] == 1.0 and turns[-1][1] == 2.0
