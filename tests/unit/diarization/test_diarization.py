"""Diarization: RTTM round trip and bad lines, energy VAD on known speech, spectral and agglomerative
clustering (count given and estimated), the pipeline and ``speechkit diarize`` on generated conversations,
and the conversation generator's reference."""
from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile
import torch

from speechkit.corpus.conversations import overlap_share, write_conversations
from speechkit.data.rttm import read_rttm, write_rttm
from speechkit.diarization import Diarizer, agglomerative_clustering, energy_vad, spectral_clustering
from speechkit.diarization.clustering import cosine_similarity
from speechkit.diarization.pipeline import nearest_windows
from speechkit.errors import DataError
from speechkit.metrics.diarization import diarization_error_rate
from tests.unit.diarization.tone_speakers import MelEmbedder

RATE = 16000


def test_rttm_round_trip_and_bad_lines(tmp_path):
    turns = {"rec1": [(0.5, 1.25, "A"), (1.0, 2.0, "B")], "rec2": [(0.0, 3.0, "A")]}
    path = write_rttm(str(tmp_path / "x.rttm"), turns)
    assert read_rttm(path) == turns
    (tmp_path / "bad.rttm").write_text("SPEAKER rec1 1 0.0 1.0 <NA> <NA> A <NA> <NA>\n"
                                       "SPEAKER rec1 1 x 1.0 <NA> <NA> A <NA> <NA>\n")
    with pytest.raises(DataError, match="bad.rttm, line 2"):
        read_rttm(str(tmp_path / "bad.rttm"))
    with pytest.raises(DataError, match="one word"):
        write_rttm(str(tmp_path / "y.rttm"), {"rec 1": [(0, 1, "A")]})


def test_energy_vad_finds_the_speech():
    rng = np.random.default_rng(0)
    wave = 0.001 * rng.standard_normal(5 * RATE)
    for start, end in ((0.5, 1.5), (2.0, 2.6), (3.5, 4.5)):
        wave[int(start * RATE):int(end * RATE)] += 0.2 * rng.standard_normal(int((end - start) * RATE))
    found = energy_vad(torch.tensor(wave, dtype=torch.float32), RATE)
    reference = [(0.5, 1.5, "s"), (2.0, 2.6, "s"), (3.5, 4.5, "s")]
    assert len(found) == 3
    assert diarization_error_rate(reference, [(s, e, "s") for s, e in found])["der"] < 0.1


def _clusters(seed=0, sizes=(12, 9, 7), dim=16, noise=0.3):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((len(sizes), dim))
    points = np.concatenate([c + noise * rng.standard_normal((n, dim)) for c, n in zip(centres, sizes)])
    truth = np.repeat(np.arange(len(sizes)), sizes)
    order = rng.permutation(len(points))
    return torch.tensor(points[order]), truth[order]


def _same_partition(a, b):
    return all((a[i] == a[j]) == (b[i] == b[j]) for i in range(len(a)) for j in range(len(a)))


@pytest.mark.parametrize("count", [2, 3, 4])
def test_clustering_recovers_the_speakers(count):
    points, truth = _clusters(seed=count, sizes=(10, 8, 6, 9)[:count])
    assert _same_partition(spectral_clustering(points), truth)  # the count estimated by the eigengap
    assert _same_partition(spectral_clustering(points, num_speakers=count), truth)
    assert _same_partition(agglomerative_clustering(points, threshold=0.5), truth)
    assert len(set(agglomerative_clustering(points, num_speakers=1).tolist())) == 1
    with pytest.raises(DataError, match="num_speakers"):
        spectral_clustering(points, num_speakers=0)


def test_clustering_takes_a_similarity_matrix_instead_of_embeddings():
    points, truth = _clusters(seed=3, sizes=(10, 8, 6))
    similarity = cosine_similarity(points)
    assert np.array_equal(spectral_clustering(similarity=similarity), spectral_clustering(points))
    assert np.array_equal(agglomerative_clustering(similarity=similarity, threshold=0.5),
                          agglomerative_clustering(points, threshold=0.5))
    assert np.array_equal(similarity, cosine_similarity(points))  # not changed in place
    for bad, message in (({}, "either embeddings or"), ({"embeddings": points, "similarity": similarity},
                                                        "either embeddings or"),
                         ({"similarity": similarity[:, :5]}, r"\(n, n\)")):
        with pytest.raises(DataError, match=message):
            spectral_clustering(**bad)


def test_each_window_is_matched_with_the_nearest_centred_window_of_its_region():
    windows = [(0.0, 0.75, 0), (0.25, 1.0, 0), (5.0, 5.75, 1)]
    wider = [(0.0, 1.5, 0), (0.5, 2.0, 0), (4.0, 5.5, 1), (5.0, 6.5, 1)]
    assert nearest_windows(windows, wider).tolist() == [0, 0, 3]  # centres 0.75, 1.25 | 4.75, 5.75
    assert nearest_windows(windows, windows).tolist() == [0, 1, 2]


def test_multi_scale_similarity_averages_the_scales(tone_rows, tmp_path):
    manifest = json.loads(open(write_conversations(tone_rows, str(tmp_path / "conv"), count=1,
                                                   overlap_probability=0.0, seed=5)).read())
    (conversation_id, row), = manifest.items()
    wave = torch.from_numpy(soundfile.read(row["wav"], dtype="float32")[0])
    single = Diarizer(MelEmbedder(), window=0.8, step=0.4, scales=())
    speech = energy_vad(wave, RATE)
    windows = single.windows(speech)
    alone = single.similarity(wave, speech, windows)
    # a scale equal to the window matches every window with itself: the same similarities
    same = Diarizer(MelEmbedder(), window=0.8, step=0.4, scales=(0.8,)).similarity(wave, speech, windows)
    np.testing.assert_allclose(same, alone, atol=1e-12)
    two = Diarizer(MelEmbedder(), window=0.8, step=0.4, scales=(1.6,))
    wider = two.windows(speech, 1.6)
    match = nearest_windows(windows, wider)
    expected = (alone + cosine_similarity(two.embed(wave, wider))[np.ix_(match, match)]) / 2
    np.testing.assert_allclose(two.similarity(wave, speech, windows), expected, atol=1e-12)
    with pytest.raises(DataError, match="scales"):
        Diarizer(MelEmbedder(), scales=(1.5, 0.0))


def test_conversations_have_their_reference(tone_rows, tmp_path):
    manifest = json.loads(open(write_conversations(tone_rows, str(tmp_path / "conv"), count=3,
                                                   speakers_range=(2, 3), seed=2)).read())
    assert len(manifest) == 3
    everything = read_rttm(str(tmp_path / "conv" / "all.rttm"))
    for conversation_id, row in manifest.items():
        wave, rate = soundfile.read(row["wav"])
        turns = read_rttm(row["rttm"])[conversation_id]
        assert everything[conversation_id] == turns
        assert rate == RATE and max(e for _, e, _ in turns) <= len(wave) / RATE + 1e-3
        assert len({s for _, _, s in turns}) == row["speakers"] in (2, 3)
        assert row["overlap"] == pytest.approx(overlap_share(turns), abs=1e-3) and 0.0 <= row["overlap"] < 0.5
    none = json.loads(open(write_conversations(tone_rows, str(tmp_path / "plain"), count=2,
                                               overlap_probability=0.0, seed=2)).read())
    assert all(row["overlap"] == 0.0 for row in none.values())
    with pytest.raises(DataError, match="speakers_range"):
        write_conversations(tone_rows, str(tmp_path / "x"), count=1, speakers_range=(2, 5))


@pytest.mark.parametrize("method", ["spectral", "agglomerative"])
def test_pipeline_diarizes_conversations_without_overlap(tone_rows, tmp_path, method):
    manifest = json.loads(open(write_conversations(tone_rows, str(tmp_path / "conv"), count=2,
                                                   overlap_probability=0.0, seed=5)).read())
    diarizer = Diarizer(MelEmbedder(), window=0.8, step=0.4, scales=(1.6,), method=method, threshold=0.9)
    for conversation_id, row in manifest.items():
        reference = read_rttm(row["rttm"])[conversation_id]
        turns = diarizer.diarize_file(row["wav"])
        assert diarization_error_rate(reference, turns, collar=0.25)["der"] < 0.1
        given = diarizer.diarize_file(row["wav"], num_speakers=row["speakers"])
        assert len({s for _, _, s in given}) == row["speakers"]
