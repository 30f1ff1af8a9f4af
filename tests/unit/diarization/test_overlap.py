"""Overlapped speech: the reference's overlapped frames, the second speaker of an overlapped frame, a frame
classifier trained to find overlap, and the diarizer giving overlapped frames two speakers."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from speechkit.corpus.conversations import read_conversations, write_conversations
from speechkit.diarization import Diarizer, FrameVAD, OverlapDetector, train_frame_vad
from speechkit.diarization.overlap import overlap_segments, second_speakers
from speechkit.diarization.trained_vad import overlap_frames, reference_frames
from speechkit.errors import DataError
from speechkit.metrics.diarization import diarization_error_rate
from tests.unit.diarization.tone_speakers import RATE, MelEmbedder


def _conversations(rows, folder, count, seed):
    write_conversations(rows, str(folder), count=count, overlap_probability=0.8, seed=seed)
    return [(wave, turns) for _, wave, turns in read_conversations(str(folder))]


def _reference_detector(turns):
    return lambda wave, sample_rate: overlap_segments(turns, wave.shape[0] / sample_rate)


def test_overlap_frames_are_where_two_speakers_talk():
    turns = [(0.0, 0.5, "a"), (0.3, 0.8, "b"), (0.6, 0.7, "a")]
    expected = np.zeros(100, dtype=bool)
    expected[30:50] = expected[60:70] = True
    assert (overlap_frames(turns, 100) == expected).all()
    unnamed = overlap_frames([(0.0, 0.5), (0.3, 0.8)], 100)  # turns without a speaker: one speaker each
    assert (unnamed == (np.arange(100) >= 30) & (np.arange(100) < 50)).all()
    assert not overlap_frames([(0.0, 0.5, "a"), (0.5, 0.8, "b")], 100).any()  # touching is not overlap


def test_second_speaker_is_the_nearest_other_speaker_in_time():
    labels = np.array([0] * 4 + [1] * 6 + [2] * 4)
    overlapped = np.zeros(14, dtype=bool)
    overlapped[[3, 4, 5, 8, 9, 10]] = True
    second = second_speakers(labels, overlapped)
    assert second.tolist() == [-1, -1, -1, 1, 0, 0, -1, -1, 2, 2, 1, -1, -1, -1]
    assert (second_speakers(np.zeros(5, dtype=int), np.ones(5, dtype=bool)) == -1).all()  # nobody else
    assert second_speakers(np.array([], dtype=int), np.array([], dtype=bool)).shape == (0,)


def test_training_refuses_an_unknown_target():
    with pytest.raises(DataError, match="target must be one of"):
        train_frame_vad([(np.zeros(RATE, dtype=np.float32), [(0.1, 0.5, "a")])], steps=1, target="laughter")


def test_the_diarizer_gives_overlapped_frames_their_second_speaker(tone_rows, tmp_path):
    conversations = _conversations(tone_rows, tmp_path / "conv", count=3, seed=4)
    assert all(overlap_frames(turns, int(len(wave) / 160)).any() for wave, turns in conversations)
    for wave, reference in conversations:
        plain = Diarizer(MelEmbedder(), window=0.8, step=0.4).diarize(torch.from_numpy(wave))
        aware = Diarizer(MelEmbedder(), window=0.8, step=0.4,
                         overlap=_reference_detector(reference)).diarize(torch.from_numpy(wave))
        assert aware == sorted(aware, key=lambda turn: (turn[0], turn[2]))
        assert not overlap_frames(plain, int(len(wave) / 160)).any()  # one speaker per frame
        assert overlap_frames(aware, int(len(wave) / 160)).any()
        before = diarization_error_rate(reference, plain)  # no collar: the overlaps here are short
        after = diarization_error_rate(reference, aware)
        assert after["missed"] < 0.5 * before["missed"]
        assert after["der"] < before["der"]


def test_a_trained_detector_finds_overlapped_tones(tone_rows, tmp_path):
    train = _conversations(tone_rows, tmp_path / "train", count=8, seed=1)
    test = _conversations(tone_rows, tmp_path / "test", count=3, seed=2)
    detector = OverlapDetector(train_frame_vad(train, steps=300, batch_size=8, crop=2.0, seed=0,
                                               target="overlap"))
    hits = found = true = 0
    for wave, turns in test:
        reference = overlap_frames(turns, int(len(wave) / 160))
        hypothesis = reference_frames(detector(torch.from_numpy(wave), RATE), reference.shape[0])
        hits += int((reference & hypothesis).sum())
        found, true = found + int(hypothesis.sum()), true + int(reference.sum())
    assert hits / found > 0.8 and hits / true > 0.8, (hits, found, true)
    detector.save(tmp_path / "overlap.safetensors")
    loaded = OverlapDetector.load(tmp_path / "overlap.safetensors")
    wave = torch.from_numpy(test[0][0])
    assert loaded(wave, RATE) == detector(wave, RATE)


def test_a_detector_of_another_size_loads_from_its_weights(tmp_path):
    torch.manual_seed(0)
    detector = OverlapDetector(FrameVAD(n_mels=24, channels=16, layers=4))
    detector.save(tmp_path / "big.safetensors")
    loaded = OverlapDetector.load(tmp_path / "big.safetensors", threshold=0.3)
    assert len(loaded.model.layers) == 4 and loaded.model.layers[0].in_channels == 24
    assert loaded.model.layers[3].dilation == (8,) and loaded.threshold == 0.3
    wave = torch.randn(RATE)
    assert np.allclose(loaded.probabilities(wave), detector.probabilities(wave))
    with pytest.raises(DataError, match="at least one layer"):
        FrameVAD(layers=0)
