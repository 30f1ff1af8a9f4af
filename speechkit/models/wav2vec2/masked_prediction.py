"""HuBERT and BEST-RQ: predict a discrete target for each masked frame, on wav2vec 2.0's encoder.

Both mask spans of frames exactly as wav2vec 2.0 pretraining does (the config's ``mask_prob`` and
``mask_length``) and minimize the cross-entropy of each masked frame's target; the unmasked frames are not
scored (HuBERT's published weighting). What differs is where the targets come from and how frames score them:

- :class:`HubertPretraining`: targets from :class:`~speechkit.models.wav2vec2.targets.ClusterTargets`
  (k-means of MFCCs or of a teacher's layer). Scores as published: the frame projected to ``final_dim``,
  cosine similarity with a learned embedding per cluster, over ``logit_temperature`` (0.1). The cosine
  bounds the logits to +-10, so the loss cannot be driven down by growing the outputs' norm early on, and
  the embeddings of a second iteration's clusters start at the same scale as the first's.
- :class:`BestRqPretraining`: targets from the frozen
  :class:`~speechkit.models.wav2vec2.bestrq.RandomProjectionQuantizer`, scored by a linear softmax head
  per codebook (BEST-RQ's own choice: with random, fixed codes there is nothing to gain from tying the head
  to a code embedding).

``loss = cross-entropy per masked frame (and codebook) + feature_penalty_weight * feature penalty`` (the
penalty keeps the convolutional features' scale in check, as in wav2vec 2.0 and HuBERT).

Example:
    >>> config = Wav2Vec2Config.preset("small", num_layers=1)
    >>> model = BestRqPretraining(config, codebook_size=32)
    >>> out = model(torch.randn(2, 16000), torch.tensor([16000, 12000]))
    >>> out.loss.shape, out.logits.shape[-1]
    (torch.Size([]), 32)
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import nn

from speechkit.models.wav2vec2.bestrq import RandomProjectionQuantizer
from speechkit.models.wav2vec2.config import Wav2Vec2Config
from speechkit.models.wav2vec2.masking import span_mask
from speechkit.models.wav2vec2.model import EncoderOutput, Wav2Vec2Model
from speechkit.models.wav2vec2.targets import ClusterTargets, fbank_frames


class MaskedPredictionOutput(NamedTuple):
    """``loss``: the scalar to minimize; ``prediction_loss``: cross-entropy summed over masked frames (and
    codebooks); ``logits`` ``(batch, frames, [codebooks,] classes)``; ``targets`` ``(batch, frames[,
    codebooks])`` (-1 past each item's frames); ``correct``/``count``: masked (frame, codebook) pairs whose
    target scores highest, and their number."""

    loss: torch.Tensor
    prediction_loss: torch.Tensor
    feature_penalty: torch.Tensor
    logits: torch.Tensor
    targets: torch.Tensor
    correct: torch.Tensor
    count: torch.Tensor
    encoder: EncoderOutput


def _draw_mask(encoder: Wav2Vec2Model, lengths: torch.Tensor, generator) -> torch.Tensor:
    config = encoder.config
    frame_lengths = encoder.output_lengths(lengths).cpu()
    return span_mask(frame_lengths, int(frame_lengths.max()), config.mask_prob, config.mask_length,
                     config.mask_min_spans, generator).to(lengths.device)


def masked_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> tuple:
    """``(summed cross-entropy, correct, count)`` over the masked frames.

    Shapes: logits ``(batch, frames, [codebooks,] classes)``, targets ``(batch, frames[, codebooks])``,
    mask ``(batch, frames)`` bool.
    """
    chosen = logits[mask].float()  # (masked, [codebooks,] classes)
    wanted = targets[mask]
    chosen, wanted = chosen.reshape(-1, chosen.shape[-1]), wanted.reshape(-1)
    loss = F.cross_entropy(chosen, wanted, reduction="sum")
    correct = (chosen.argmax(-1) == wanted).sum()
    return loss, correct, torch.tensor(len(wanted), device=logits.device)


class HubertPretraining(nn.Module):
    """wav2vec 2.0's encoder trained to predict the clusters of its masked frames (see the module doc).

    Arguments:
        config: the encoder (``final_dim``, ``logit_temperature`` and the masking are read from it too).
        num_clusters: the k-means codebook size.
        targets: the :class:`ClusterTargets` that label a batch when :meth:`forward` gets no ``targets``.

    Shapes: wav ``(batch, samples)``, lengths ``(batch,)``; optional ``targets`` ``(batch, frames)`` int64 and
    ``mask`` ``(batch, frames)`` bool -> :class:`MaskedPredictionOutput` with logits ``(batch, frames, K)``.
    """

    def __init__(self, config: Wav2Vec2Config, num_clusters: int, targets: Optional[ClusterTargets] = None):
        super().__init__()
        self.config, self.num_clusters = config, num_clusters
        self.wav2vec2 = Wav2Vec2Model(config)
        self.final_proj = nn.Linear(config.d_model, config.final_dim)
        self.label_embeddings = nn.Parameter(torch.empty(num_clusters, config.final_dim).uniform_())
        self.targets = targets
        if targets is not None and targets.kmeans.num_clusters != num_clusters:
            raise ValueError(f"the targets have {targets.kmeans.num_clusters} clusters, the model "
                             f"{num_clusters}")

    def logits(self, output: torch.Tensor) -> torch.Tensor:
        """Cosine similarity of each projected frame with each cluster's embedding, over the temperature."""
        projected = F.normalize(self.final_proj(output).float(), dim=-1, eps=1e-8)
        with torch.autocast(device_type=output.device.type, enabled=False):  # cosines in float32
            embeddings = F.normalize(self.label_embeddings.float(), dim=-1, eps=1e-8)
            return projected @ embeddings.T / self.config.logit_temperature

    def forward(self, wav: torch.Tensor, lengths: torch.Tensor, targets: Optional[torch.Tensor] = None,
                mask: Optional[torch.Tensor] = None,
                generator: Optional[torch.Generator] = None) -> MaskedPredictionOutput:
        if targets is None:
            if self.targets is None:
                raise ValueError("HubertPretraining needs targets, or a ClusterTargets to make them")
            targets, _ = self.targets(wav, lengths)
        if mask is None:
            mask = _draw_mask(self.wav2vec2, lengths, generator)
        encoded = self.wav2vec2(wav, lengths, mask=mask)
        logits = self.logits(encoded.output)
        loss_sum, correct, count = masked_cross_entropy(logits, targets, encoded.mask)
        loss = loss_sum / count.clamp(min=1) + self.config.feature_penalty_weight * encoded.feature_penalty
        return MaskedPredictionOutput(loss, loss_sum, encoded.feature_penalty, logits, targets, correct,
                                      count, encoded)


class BestRqPretraining(nn.Module):
    """wav2vec 2.0's encoder trained to predict a frozen random-projection quantizer's codes of its masked
    frames' filterbanks (see the module doc).

    Arguments:
        config: the encoder and its masking.
        codebook_size, code_dim, num_codebooks, n_mels, quantizer_seed: the quantizer's, fixed by the seed
            and saved with the model's state (as buffers: no optimizer ever sees them).

    Shapes: wav ``(batch, samples)``, lengths ``(batch,)``; optional ``mask`` ``(batch, frames)`` ->
    :class:`MaskedPredictionOutput` with logits ``(batch, frames, num_codebooks, codebook_size)`` (the
    codebook dimension left out when there is one codebook) and targets to match.
    """

    def __init__(self, config: Wav2Vec2Config, codebook_size: int = 1024, code_dim: int = 16,
                 num_codebooks: int = 1, n_mels: int = 80, quantizer_seed: int = 0):
        super().__init__()
        self.config, self.n_mels = config, n_mels
        self.wav2vec2 = Wav2Vec2Model(config)
        self.quantizer = RandomProjectionQuantizer(n_mels, codebook_size, code_dim, num_codebooks,
                                                   quantizer_seed)
        self.head = nn.Linear(config.d_model, num_codebooks * codebook_size)

    def make_targets(self, wav: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """``(batch, frames, num_codebooks)`` codes of the aligned, normalized filterbanks."""
        features, frame_lengths = fbank_frames(wav, lengths, self.config, self.n_mels)
        codes = self.quantizer(features)
        valid = torch.arange(codes.shape[1], device=codes.device)[None, :] < frame_lengths[:, None]
        return codes.masked_fill(~valid.unsqueeze(-1), -1)

    def forward(self, wav: torch.Tensor, lengths: torch.Tensor, mask: Optional[torch.Tensor] = None,
                generator: Optional[torch.Generator] = None) -> MaskedPredictionOutput:
        with torch.no_grad():
            targets = self.make_targets(wav, lengths)
        if mask is None:
            mask = _draw_mask(self.wav2vec2, lengths, generator)
        encoded = self.wav2vec2(wav, lengths, mask=mask)
        quantizer = self.quantizer
        logits = self.head(encoded.output).view(*encoded.output.shape[:2], quantizer.num_codebooks,
                                                quantizer.codebook_size)
        if quantizer.num_codebooks == 1:
            logits, targets = logits.squeeze(2), targets.squeeze(2)
        loss_sum, correct, count = masked_cross_entropy(logits, targets, encoded.mask)
        loss = loss_sum / count.clamp(min=1) + self.config.feature_penalty_weight * encoded.feature_penalty
        return MaskedPredictionOutput(loss, loss_sum, encoded.feature_penalty, logits, targets, correct,
                                      count, encoded)
