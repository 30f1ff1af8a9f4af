"""Who spoke when: voice activity, sliding-window speaker embeddings, clustering, speaker turns.

:class:`Diarizer` takes a :class:`~speechkit.pretrained.SpeakerRecognition` model. For a recording it finds
speech with :func:`~speechkit.diarization.vad.energy_vad` (or the ``vad`` given, e.g. a
:class:`~speechkit.diarization.trained_vad.TrainedVAD`), embeds windows of ``window`` seconds every
``step`` seconds inside each speech region (a shorter region is one window), clusters the windows
(``spectral`` with the eigengap estimate, or ``agglomerative`` with a cosine threshold; the number of
speakers given or estimated), gives each 10 ms frame of speech the speaker of the nearest window centre, and
returns the turns ``(start, end, speaker)``. Every frame gets one speaker, unless an ``overlap`` detector
(:class:`~speechkit.diarization.overlap.OverlapDetector`) finds overlapped speech: those frames also get
the nearest other speaker in time (:func:`~speechkit.diarization.overlap.second_speakers`).

Multi-scale similarities: short windows place speaker changes precisely but give noisier embeddings than
long ones. With ``scales`` (longer window lengths, seconds), every scale's windows are embedded too (same
``step``); each ``window``-second window is matched with the window of each scale whose centre is nearest
in the same speech region, and the cosine similarities of all scales are averaged before clustering. The
defaults (0.75 s windows, with 1.5 s and 1.0 s scales, every 0.25 s) were chosen on development
conversations, not the test ones (docs/speaker.md, "Diarization").

Example:
    >>> model = SpeakerRecognition.from_hparams("results/speaker-model")      # doctest: +SKIP
    >>> Diarizer(model).diarize_file("meeting.wav")                           # doctest: +SKIP
    [(0.42, 3.1, 'spk0'), (3.3, 5.02, 'spk1'), ...]
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from speechkit.diarization.clustering import agglomerative_clustering, cosine_similarity, spectral_clustering
from speechkit.diarization.overlap import second_speakers
from speechkit.diarization.vad import energy_vad
from speechkit.errors import DataError

METHODS = ("spectral", "agglomerative")


def frame_turns(spans: np.ndarray, labels: np.ndarray) -> list:
    """Turns ``[(start, end, "spk<k>"), ...]``: runs of one label over frames that touch, from frames'
    (frames, 2) ``(start, end)`` seconds in time order and their (frames,) labels (-1: no speaker)."""
    breaks = np.flatnonzero((labels[1:] != labels[:-1]) | (spans[1:, 0] - spans[:-1, 1] > 1e-6)) + 1
    turns = []
    for first, last in zip(np.r_[0, breaks], np.r_[breaks, len(labels)]):
        if labels[first] >= 0:
            turns.append((round(float(spans[first, 0]), 3), round(float(spans[last - 1, 1]), 3),
                          f"spk{int(labels[first])}"))
    return turns


def nearest_windows(windows: list, others: list) -> np.ndarray:
    """For each of ``windows`` ``(start, end, region)``, the index in ``others`` of the window of the same
    speech region whose centre is nearest (every region has at least one window of each length)."""
    centres = np.array([(start + end) / 2 for start, end, _ in others])
    regions = np.array([region for _, _, region in others])
    out = np.empty(len(windows), dtype=np.int64)
    for row, (start, end, region) in enumerate(windows):
        mine = np.flatnonzero(regions == region)
        out[row] = mine[np.abs(centres[mine] - (start + end) / 2).argmin()]
    return out


class Diarizer:
    """Diarize recordings with a speaker embedding model (see the module docstring)."""

    def __init__(self, model, window: float = 0.75, step: float = 0.25, scales: tuple = (1.5, 1.0),
                 method: str = "spectral", threshold: float = 0.5, max_speakers: int = 8,
                 batch_size: int = 32, resolution: float = 0.01, vad_options: Optional[dict] = None,
                 vad=None, overlap=None):
        if method not in METHODS:
            raise DataError(f"clustering method must be one of {METHODS}, got {method!r}")
        if not 0 < step <= window:
            raise DataError(f"need 0 < step <= window, got step {step} and window {window}")
        self.scales = tuple(float(length) for length in scales or ())
        if any(length <= 0 for length in self.scales):
            raise DataError(f"scales are window lengths in seconds, all > 0; got {list(self.scales)}")
        self.model, self.window, self.step, self.method = model, window, step, method
        self.threshold, self.max_speakers, self.batch_size = threshold, max_speakers, batch_size
        self.resolution, self.vad_options = resolution, dict(vad_options or {})
        self.vad = vad  # (wave, sample_rate) -> [(start, end), ...]; None: energy_vad(**vad_options)
        self.overlap = overlap  # (wave, sample_rate) -> overlapped [(start, end), ...], e.g. OverlapDetector

    def windows(self, speech: list, length: Optional[float] = None) -> list:
        """``(start, end, region index)`` of the embedding windows of ``length`` seconds (default
        ``window``), every ``step`` seconds, inside the speech regions."""
        length = self.window if length is None else length
        out = []
        for index, (start, end) in enumerate(speech):
            if end - start <= length:
                out.append((start, end, index))
                continue
            count = int(np.ceil((end - start - length) / self.step)) + 1
            for k in range(count):
                first = min(start + k * self.step, end - length)
                out.append((first, first + length, index))
        return out

    def embed(self, wave: torch.Tensor, windows: list) -> torch.Tensor:
        """(windows, dim) embeddings, in batches of ``batch_size``."""
        rate = self.model.sample_rate
        pieces = [wave[int(start * rate): max(int(end * rate), int(start * rate) + 1)]
                  for start, end, _ in windows]
        out = []
        for first in range(0, len(pieces), self.batch_size):
            chunk = pieces[first:first + self.batch_size]
            lengths = torch.tensor([p.shape[0] for p in chunk])
            batch = torch.zeros(len(chunk), int(lengths.max()))
            for row, piece in enumerate(chunk):
                batch[row, : piece.shape[0]] = piece
            out.append(self.model.embed_batch(batch, lengths).cpu())
        return torch.cat(out)

    def similarity(self, wave: torch.Tensor, speech: list, windows: list) -> np.ndarray:
        """(windows, windows) cosine similarities of ``windows``, averaged over the scales."""
        total = cosine_similarity(self.embed(wave, windows))
        for length in self.scales:
            wider = self.windows(speech, length)
            match = nearest_windows(windows, wider)
            total += cosine_similarity(self.embed(wave, wider))[np.ix_(match, match)]
        return total / (1 + len(self.scales))

    def cluster(self, similarity: np.ndarray, num_speakers: Optional[int]) -> np.ndarray:
        if self.method == "spectral":
            return spectral_clustering(None, num_speakers, self.max_speakers, similarity=similarity)
        return agglomerative_clustering(None, num_speakers, self.threshold, self.max_speakers,
                                        similarity=similarity)

    def diarize(self, wave: torch.Tensor, num_speakers: Optional[int] = None) -> list:
        """Speaker turns ``[(start, end, "spk<k>"), ...]`` of a mono waveform (time,) at the model's rate,
        sorted by start; with an ``overlap`` detector, turns of two speakers may overlap."""
        wave = torch.as_tensor(wave).float().reshape(-1)
        if self.vad is not None:
            speech = self.vad(wave, self.model.sample_rate)
        else:
            speech = energy_vad(wave, self.model.sample_rate, **self.vad_options)
        windows = self.windows(speech)
        if not windows:
            return []
        labels = self.cluster(self.similarity(wave, speech, windows), num_speakers)
        centres = np.array([(start + end) / 2 for start, end, _ in windows])
        regions = np.array([region for _, _, region in windows])
        frame_spans, frame_labels = [], []  # each speech frame's (start, end) seconds and speaker
        for index, (start, end) in enumerate(speech):
            mine = np.flatnonzero(regions == index)
            times = np.arange(start, end, self.resolution) + self.resolution / 2
            nearest = mine[np.abs(times[:, None] - centres[mine][None, :]).argmin(1)]
            offsets = start + np.arange(len(times) + 1) * self.resolution
            frame_spans.append(np.stack([offsets[:-1], np.minimum(end, offsets[1:])], 1))
            frame_labels.append(labels[nearest])
        spans, speakers = np.concatenate(frame_spans), np.concatenate(frame_labels)
        second = np.full(len(speakers), -1)
        if self.overlap is not None:
            middles, overlapped = spans.mean(1), np.zeros(len(speakers), dtype=bool)
            for start, end in self.overlap(wave, self.model.sample_rate):
                overlapped |= (middles >= start) & (middles < end)
            second = second_speakers(speakers, overlapped)
        turns = []
        for speaker in np.unique(speakers):
            talking = (speakers == speaker) | (second == speaker)
            turns += frame_turns(spans, np.where(talking, speaker, -1))
        return sorted(turns, key=lambda turn: (turn[0], turn[2]))

    def diarize_file(self, path, num_speakers: Optional[int] = None) -> list:
        """Speaker turns of an audio file (any rate; resampled to the model's)."""
        return self.diarize(self.model.load_audio(path), num_speakers)
