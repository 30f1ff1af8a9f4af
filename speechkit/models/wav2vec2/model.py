"""wav2vec 2.0: the encoder (:class:`Wav2Vec2Model`) and its self-supervised objective
(:class:`Wav2Vec2Pretraining`).

The encoder maps a waveform to contextual frames: feature encoder -> LayerNorm -> projection to ``d_model``
-> (while training) span masking with a learned embedding and optional channel masking -> context network.
Pretraining quantizes the unmasked, normalized features into targets and asks each masked frame's context
vector to pick its own target among ``K`` distractors from the same utterance's masked frames:

``loss = contrastive (per masked frame) + diversity_weight * diversity + feature_penalty_weight * penalty``.

Example:
    >>> config = Wav2Vec2Config.preset("small", num_layers=2, num_negatives=5)
    >>> model = Wav2Vec2Pretraining(config)
    >>> out = model(torch.randn(2, 16000), torch.tensor([16000, 12000]))
    >>> out.loss.shape, out.logits.shape[-1]
    (torch.Size([]), 6)
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import nn

from speechkit.models.wav2vec2.config import Wav2Vec2Config
from speechkit.models.wav2vec2.context import ContextEncoder
from speechkit.models.wav2vec2.feature_encoder import FeatureEncoder
from speechkit.models.wav2vec2.masking import channel_mask, sample_negatives, span_mask
from speechkit.models.wav2vec2.quantizer import GumbelQuantizer, GumbelTemperature, diversity_loss
from speechkit.nn.masks import length_mask


class EncoderOutput(NamedTuple):
    """``output`` ``(batch, frames, d_model)`` and its ``lengths``; ``hidden_states``: the context network's
    input then each layer's output; ``features``: the normalized feature-encoder frames ``(batch, frames,
    conv_channels[-1])`` (the quantizer's input); ``feature_penalty``: mean square of the raw features over
    valid frames; ``mask``: the masked frames ``(batch, frames)`` (all False when none)."""

    output: torch.Tensor
    lengths: torch.Tensor
    hidden_states: list
    features: torch.Tensor
    feature_penalty: torch.Tensor
    mask: torch.Tensor


class Wav2Vec2Model(nn.Module):
    """The wav2vec 2.0 encoder.

    Shapes: wav ``(batch, samples)`` (normalized per utterance for BASE, as the published models expect),
    lengths ``(batch,)`` int64 -> :class:`EncoderOutput`.

    Masking: pass ``mask`` (``(batch, frames)`` bool) to choose the masked frames; otherwise, while training
    and with ``apply_mask`` (default), spans are drawn from the config's ``mask_prob``/``mask_length`` with
    ``generator``. Channel masking (``mask_channel_prob``) applies while training only.
    """

    def __init__(self, config: Optional[Wav2Vec2Config] = None, **changes):
        super().__init__()
        config = (config or Wav2Vec2Config()).replace(**changes)
        self.config = config
        self.feature_encoder = FeatureEncoder(config.conv_channels, config.conv_kernels, config.conv_strides,
                                              config.feature_norm, config.conv_bias)
        self.feature_norm = (nn.LayerNorm(config.conv_channels[-1], eps=config.layer_norm_eps)
                             if config.feature_projection_norm else nn.Identity())
        self.projection = nn.Linear(config.conv_channels[-1], config.d_model)
        self.feature_dropout = nn.Dropout(config.feature_dropout)
        self.masked_embedding = nn.Parameter(torch.empty(config.d_model).uniform_())
        self.encoder = ContextEncoder(config.d_model, config.num_layers, config.num_heads, config.ffn_dim,
                                      config.pos_conv_kernel, config.pos_conv_groups, config.dropout,
                                      config.attention_dropout, config.activation_dropout,
                                      config.layer_norm_first, config.layer_drop, config.layer_norm_eps,
                                      config.pos_conv_layers, config.relative_position_buckets,
                                      config.relative_position_max_distance)
        self._initialize()

    def _initialize(self) -> None:
        """The published initialization: He-normal convolutions (the features keep their scale through 7
        layers), N(0, 0.02) Transformer projections, zero biases."""
        for module in self.feature_encoder.modules():
            if isinstance(module, nn.Conv1d):
                nn.init.kaiming_normal_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        for module in self.encoder.layers.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                nn.init.zeros_(module.bias)

    @property
    def output_dim(self) -> int:
        return self.config.d_model

    def output_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        """Frames for ``lengths`` samples."""
        return self.feature_encoder.output_lengths(lengths)

    def forward(self, wav: torch.Tensor, lengths: torch.Tensor, mask: Optional[torch.Tensor] = None,
                apply_mask: bool = True, num_layers: Optional[int] = None,
                generator: Optional[torch.Generator] = None) -> EncoderOutput:
        raw, frame_lengths = self.feature_encoder(wav, lengths)
        valid = length_mask(frame_lengths, raw.shape[1])
        count = (frame_lengths.sum() * raw.shape[-1]).clamp(min=1)
        feature_penalty = (raw.float().square() * valid.unsqueeze(-1)).sum() / count
        features = self.feature_norm(raw)
        x = self.feature_dropout(self.projection(features))
        if mask is None:
            mask = torch.zeros_like(valid)
            if self.training and apply_mask and self.config.mask_prob > 0:
                config = self.config
                mask = span_mask(frame_lengths.cpu(), x.shape[1], config.mask_prob, config.mask_length,
                                 config.mask_min_spans, generator).to(x.device)
        mask = mask & valid  # a caller's mask never reaches padding either
        x = torch.where(mask.unsqueeze(-1), self.masked_embedding.to(x.dtype), x)
        if self.training and apply_mask and self.config.mask_channel_prob > 0:
            channels = channel_mask(x.shape[0], x.shape[-1], self.config.mask_channel_prob,
                                    self.config.mask_channel_length, generator).to(x.device)
            x = x.masked_fill(channels.unsqueeze(1), 0.0)
        output, hidden = self.encoder(x, frame_lengths, num_layers)
        return EncoderOutput(output, frame_lengths, hidden, features, feature_penalty, mask)


class PretrainingOutput(NamedTuple):
    """``loss``: the scalar to minimize; ``contrastive_loss``: summed over masked frames; ``logits``
    ``(batch, frames, 1 + K)`` with the target first (rows of unmasked frames are unused); ``correct`` and
    ``count``: masked frames whose target scores highest, and masked frames."""

    loss: torch.Tensor
    contrastive_loss: torch.Tensor
    diversity_loss: torch.Tensor
    feature_penalty: torch.Tensor
    logits: torch.Tensor
    correct: torch.Tensor
    count: torch.Tensor
    prob_perplexity: torch.Tensor
    code_perplexity: torch.Tensor
    temperature: float
    encoder: EncoderOutput


class Wav2Vec2Pretraining(nn.Module):
    """The encoder plus the quantizer and projections of the contrastive task.

    Call :meth:`set_num_updates` after each optimizer step to anneal the Gumbel temperature.
    Shapes: wav ``(batch, samples)``, lengths ``(batch,)``; optional ``mask`` ``(batch, frames)`` and
    ``negatives`` ``(batch, frames, K)`` (frame indices, see :func:`~speechkit.models.wav2vec2.masking.
    sample_negatives`) to fix what is otherwise drawn with ``generator``.
    """

    def __init__(self, config: Optional[Wav2Vec2Config] = None, **changes):
        super().__init__()
        config = (config or Wav2Vec2Config()).replace(**changes)
        self.config = config
        self.wav2vec2 = Wav2Vec2Model(config)
        self.quantizer_input_dropout = nn.Dropout(config.quantizer_input_dropout)
        self.temperature = GumbelTemperature(*config.gumbel_temperature)
        self.quantizer = GumbelQuantizer(config.conv_channels[-1], config.codebook_groups,
                                         config.codebook_entries, config.codevector_dim, self.temperature(0))
        self.project_q = nn.Linear(config.codevector_dim, config.final_dim)
        self.project_hid = nn.Linear(config.d_model, config.final_dim)

    def set_num_updates(self, updates: int) -> None:
        """Anneal the quantizer's temperature to its value after ``updates`` optimizer steps."""
        self.quantizer.temperature = self.temperature(updates)

    def forward(self, wav: torch.Tensor, lengths: torch.Tensor, mask: Optional[torch.Tensor] = None,
                negatives: Optional[torch.Tensor] = None,
                generator: Optional[torch.Generator] = None) -> PretrainingOutput:
        config = self.config
        if mask is None:
            frame_lengths = self.wav2vec2.output_lengths(lengths).cpu()
            mask = span_mask(frame_lengths, int(frame_lengths.max()), config.mask_prob, config.mask_length,
                             config.mask_min_spans, generator).to(wav.device)
        encoded = self.wav2vec2(wav, lengths, mask=mask)
        mask = encoded.mask
        if negatives is None:
            negatives = sample_negatives(mask, config.num_negatives, generator)
        valid = length_mask(encoded.lengths, mask.shape[1])
        quantized = self.quantizer(self.quantizer_input_dropout(encoded.features), valid, generator)
        targets = self.project_q(quantized.codevectors)
        predictions = self.project_hid(encoded.output)
        logits = contrastive_logits(predictions, targets, negatives, config.logit_temperature, mask)
        count = mask.sum()
        chosen = logits[mask]
        contrastive = F.cross_entropy(chosen.float(), torch.zeros(len(chosen), dtype=torch.long,
                                                                   device=chosen.device), reduction="sum")
        # A row whose scores are all equal says nothing: it is not counted as correct.
        correct = ((chosen.argmax(-1) == 0) & (chosen.argmin(-1) != 0)).sum()
        diversity = diversity_loss(quantized.prob_perplexity, config.codebook_groups, config.codebook_entries)
        loss = (contrastive / count.clamp(min=1) + config.diversity_weight * diversity
                + config.feature_penalty_weight * encoded.feature_penalty)
        return PretrainingOutput(loss, contrastive, diversity, encoded.feature_penalty, logits, correct,
                                 count, quantized.prob_perplexity, quantized.code_perplexity,
                                 float(self.quantizer.temperature), encoded)


def contrastive_logits(predictions: torch.Tensor, targets: torch.Tensor, negatives: torch.Tensor,
                       temperature: float, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Cosine similarity of each prediction with its target and its distractors, over ``temperature``.

    Shapes: predictions and targets ``(batch, frames, dim)``, negatives ``(batch, frames, K)`` frame indices
    into the same item -> ``(batch, frames, 1 + K)``, the target first. A distractor equal to the target
    (a collapsed codebook) scores ``-inf``, so it cannot be confused with the answer. With ``mask``
    (``(batch, frames)`` bool) only the masked frames are scored; the other rows are 0.
    """
    batch, frames, dim = targets.shape
    if mask is None:
        mask = torch.ones(batch, frames, dtype=torch.bool, device=targets.device)
    items, positions = mask.nonzero(as_tuple=True)
    # Candidates are frames of the same item, so one (frames x frames) cosine table per item holds every
    # score: a batched product instead of gathering (masked frames, 1 + K, dim) vectors to compare.
    unit_predictions = F.normalize(predictions.float(), dim=-1, eps=1e-8)
    unit_targets = F.normalize(targets.float(), dim=-1, eps=1e-8)
    table = torch.bmm(unit_predictions, unit_targets.transpose(1, 2))  # (batch, frames, frames)
    candidates = torch.cat([positions.unsqueeze(1), negatives[items, positions]], dim=1)  # (masked, 1 + K)
    scores = table[items, positions].gather(1, candidates) / temperature
    # A distractor equal to the target (exactly: the same codes) scores -inf.
    flat = (candidates[:, 1:] + (items * frames).unsqueeze(1)).reshape(-1)
    distractors = targets.reshape(batch * frames, dim)[flat].view(len(items), -1, dim)
    same = (distractors == targets[items, positions].unsqueeze(1)).all(-1)
    scores = torch.cat([scores[:, :1], scores[:, 1:].masked_fill(same, float("-inf"))], dim=1)
    logits = scores.new_zeros(batch, frames, scores.shape[1])
    logits[items, positions] = scores
    return logits
