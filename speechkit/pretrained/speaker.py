"""``SpeakerRecognition``: speaker embeddings of recordings, and whether two recordings share a speaker.

A speaker model folder's ``hyperparams.yaml`` declares ``interface: SpeakerRecognition``, ``sample_rate``,
``modules`` with ``compute_features`` (``(wavs, lengths) -> (feats, frames)``, e.g.
:class:`speechkit.features.Fbank`), an optional ``mean_var_norm`` (``(feats, frames) -> (feats, frames)``), an
``embedding_model`` (``(feats, frames) -> (batch, dim)``, e.g. :class:`speechkit.models.speaker.ECAPATDNN`)
and an optional ``embedding_norm`` (``(batch, dim) -> (batch, dim)``); ``threshold``, the cosine score above
which two recordings are called the same speaker (the recipe reports the one at the validation EER); and a
``pretrainer`` naming the weight files. ``speechkit export`` writes one from the speaker recognition recipe;
:func:`speechkit.pretrained.speechbrain_import.import_speechbrain_folder` converts a SpeechBrain one.

Example:
    >>> from speechkit.pretrained import SpeakerRecognition
    >>> model = SpeakerRecognition.from_hparams("results/speaker-model")  # doctest: +SKIP
    >>> score, same = model.verify_files("a.flac", "b.flac")             # doctest: +SKIP
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from speechkit.errors import HparamsError
from speechkit.pretrained.interfaces import Pretrained
from speechkit.pretrained.registry import register_interface


@register_interface
class SpeakerRecognition(Pretrained):
    """Waveforms in, one embedding per recording out; cosine scoring with the folder's ``threshold``.
    Batch-invariant: a file embedded alone or padded in a batch gives the same embedding."""

    REQUIRED_KEYS = ("modules", "sample_rate")

    def __init__(self, modules: dict, hparams: dict, run_opts=None, source_description: str = "hyperparams"):
        super().__init__(modules, hparams, run_opts, source_description)
        for name in ("compute_features", "embedding_model"):
            if name not in self.mods:
                raise HparamsError(f"{source_description}: modules must hold '{name}' (it holds "
                                   f"{', '.join(self.mods) or 'nothing'})")
        threshold = hparams.get("threshold", 0.5)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not -1 <= threshold <= 1:
            raise HparamsError(f"{source_description}: threshold must be a cosine score in [-1, 1], got "
                               f"{threshold!r}")
        self.threshold = float(threshold)

    @torch.no_grad()
    def embed_batch(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Embed a zero-padded batch at the model's rate.

        Args:
            wavs: (batch, time) or (time,) float waveforms.
            lengths: (batch,) int64 valid samples (default: all).

        Returns:
            (batch, dim) embeddings.
        """
        wavs, lengths = self._prepare(wavs, lengths)
        feats, frames = self.mods["compute_features"](wavs, lengths)
        if "mean_var_norm" in self.mods:
            feats, frames = self.mods["mean_var_norm"](feats, frames)
        embeddings = self.mods["embedding_model"](feats, frames)
        if embeddings.dim() == 3 and embeddings.shape[1] == 1:  # (batch, 1, dim) models
            embeddings = embeddings[:, 0]
        if "embedding_norm" in self.mods:
            embeddings = self.mods["embedding_norm"](embeddings)
        return embeddings

    def embed_file(self, path) -> torch.Tensor:
        """The (dim,) embedding of one audio file (any rate soundfile reads; resampled to the model's)."""
        waveform = self.load_audio(path)
        return self.embed_batch(waveform.unsqueeze(0), torch.tensor([waveform.shape[0]]))[0]

    def score(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        """Cosine similarity of paired embeddings (batch, dim) -> (batch,), or of two (dim,) -> ()."""
        return (F.normalize(first, dim=-1) * F.normalize(second, dim=-1)).sum(-1)

    def verify_batch(self, wavs1: torch.Tensor, lengths1: Optional[torch.Tensor], wavs2: torch.Tensor,
                     lengths2: Optional[torch.Tensor] = None) -> tuple:
        """``(scores (batch,), same (batch,) bool)`` for the pairs of two padded batches."""
        scores = self.score(self.embed_batch(wavs1, lengths1), self.embed_batch(wavs2, lengths2))
        return scores, scores >= self.threshold

    def verify_files(self, first, second) -> tuple:
        """``(score, same)``: the cosine score of two audio files and whether it reaches ``threshold``."""
        score = float(self.score(self.embed_file(first), self.embed_file(second)))
        return score, score >= self.threshold

    def forward(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.embed_batch(wavs, lengths)
