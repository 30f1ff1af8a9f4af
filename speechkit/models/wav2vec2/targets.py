"""Frame features aligned with the encoder's frames, and the targets made from them.

The masked-prediction objectives need one target per encoder frame. The encoder's frame ``t`` reads samples
``[t * hop, t * hop + window)`` (``hop``: the product of the convolution strides, 320; ``window``: their
receptive field, 400). :func:`aligned_frames` computes short-time features with that hop and window
(centred STFT frames, shifted by one so that frame ``t``'s centre falls ``hop - window / 2`` samples after
the encoder frame's centre: 7.5 ms for the published sizes) and normalizes each utterance over its own
frames (mean 0, variance 1 per dimension: batch invariant, no corpus statistics to keep).

- :func:`mfcc_frames`: 13 MFCCs + deltas + delta-deltas (39 dimensions), HuBERT's first-iteration features.
- :func:`fbank_frames`: log-mel filterbanks, BEST-RQ's input.
- :class:`ClusterTargets`: HuBERT's targets: the k-means cluster of each frame's MFCCs, or of a layer of a
  frozen teacher encoder (the second iteration).

Example:
    >>> config = Wav2Vec2Config.preset("small", num_layers=1)
    >>> feats, lengths = mfcc_frames(torch.randn(2, 16000), torch.tensor([16000, 8000]), config)
    >>> feats.shape, lengths.tolist(), lengths.tolist() == config_frames(config, [16000, 8000])
    (torch.Size([2, 49, 39]), [49, 24], True)
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from speechkit.features.filterbanks import deltas, fbank, mfcc
from speechkit.features.normalization import utterance_normalize
from speechkit.models.wav2vec2.config import Wav2Vec2Config
from speechkit.models.wav2vec2.kmeans import MiniBatchKMeans
from speechkit.models.wav2vec2.model import Wav2Vec2Model


def config_frames(config: Wav2Vec2Config, lengths) -> list:
    """The encoder's frames for each of ``lengths`` samples."""
    return [config.frames_for(int(length)) for length in lengths]


def _framing(config: Wav2Vec2Config) -> dict:
    hop = 1
    for stride in config.conv_strides:
        hop *= stride
    window = config.receptive_field
    n_fft = 1 << max(window - 1, 1).bit_length()
    return dict(hop_length=hop, win_length=window, n_fft=n_fft)


def _encoder_frame_lengths(config: Wav2Vec2Config, lengths: torch.Tensor) -> torch.Tensor:
    window, framing = config.receptive_field, _framing(config)
    frames = torch.div(lengths - window, framing["hop_length"], rounding_mode="floor") + 1
    return torch.where(lengths >= window, frames, torch.zeros_like(frames))


def aligned_frames(features: torch.Tensor, lengths: torch.Tensor, config: Wav2Vec2Config) -> tuple:
    """Centred STFT-frame features ``(batch, stft_frames, dim)`` of waveforms of ``lengths`` samples ->
    ``(batch, frames, dim)`` aligned with the encoder's frames, normalized per utterance, and their
    lengths."""
    frame_lengths = _encoder_frame_lengths(config, lengths).to(features.device)
    frames = int(frame_lengths.max()) if len(frame_lengths) else 0
    aligned = features[:, 1:1 + frames]
    return utterance_normalize(aligned, frame_lengths), frame_lengths


def mfcc_frames(wav: torch.Tensor, lengths: torch.Tensor, config: Wav2Vec2Config, n_mfcc: int = 13) -> tuple:
    """``(batch, frames, 3 * n_mfcc)`` MFCCs with deltas and delta-deltas, aligned (see the module doc)."""
    coeffs, stft_lengths = mfcc(wav, lengths, n_mfcc=n_mfcc, n_mels=40, **_framing(config))
    first = deltas(coeffs, stft_lengths)
    features = torch.cat([coeffs, first, deltas(first, stft_lengths)], dim=-1)
    return aligned_frames(features, lengths, config)


def fbank_frames(wav: torch.Tensor, lengths: torch.Tensor, config: Wav2Vec2Config, n_mels: int = 80) -> tuple:
    """``(batch, frames, n_mels)`` log-mel filterbanks, aligned and normalized (see the module doc)."""
    energies, _ = fbank(wav, lengths, n_mels=n_mels, **_framing(config))
    return aligned_frames(energies, lengths, config)


class ClusterTargets(nn.Module):
    """HuBERT's targets: the k-means cluster of each encoder frame's features.

    Arguments:
        kmeans: fitted centroids (of ``3 * n_mfcc`` MFCC dimensions without a teacher, else ``d_model``).
        config: the student encoder's config (for the frame alignment of MFCCs).
        teacher: a frozen encoder whose ``layer`` (0: the Transformer's input) is clustered instead of MFCCs.

    Shapes: wav ``(batch, samples)``, lengths ``(batch,)`` -> targets ``(batch, frames)`` int64 (-1 past each
    item's frames) and frame lengths. Nothing here learns: no parameter requires a gradient, and the teacher
    stays in eval mode (no dropout, no masking) whatever mode the model is in.
    """

    def __init__(self, kmeans: MiniBatchKMeans, config: Wav2Vec2Config,
                 teacher: Optional[Wav2Vec2Model] = None, layer: Optional[int] = None, n_mfcc: int = 13):
        super().__init__()
        self.kmeans, self.config, self.n_mfcc = kmeans, config, n_mfcc
        self.teacher, self.layer = teacher, layer
        if teacher is not None:
            if layer is None or not 0 <= layer <= len(teacher.encoder.layers):
                raise ValueError(f"the teacher's layer must be in [0, {len(teacher.encoder.layers)}], "
                                 f"got {layer}")
            teacher.requires_grad_(False)
        self.train(False)

    def train(self, mode: bool = True) -> ClusterTargets:
        return super().train(False)  # always eval: the targets of an utterance never change

    @property
    def dim(self) -> int:
        return self.teacher.config.d_model if self.teacher is not None else 3 * self.n_mfcc

    @torch.no_grad()
    def features(self, wav: torch.Tensor, lengths: torch.Tensor) -> tuple:
        """``(batch, frames, dim)`` features the clusters are made of, and their lengths."""
        if self.teacher is None:
            return mfcc_frames(wav, lengths, self.config, self.n_mfcc)
        out = self.teacher(wav, lengths, apply_mask=False, num_layers=self.layer)
        return out.hidden_states[self.layer].float(), out.lengths

    @torch.no_grad()
    def forward(self, wav: torch.Tensor, lengths: torch.Tensor) -> tuple:
        features, frame_lengths = self.features(wav, lengths)
        batch, frames, dim = features.shape
        labels = self.kmeans.predict(features.reshape(-1, dim)).view(batch, frames)
        valid = torch.arange(frames, device=labels.device)[None, :] < frame_lengths[:, None]
        return labels.masked_fill(~valid, -1), frame_lengths
