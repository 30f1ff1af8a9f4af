"""The pieces of fine-tuning a Whisper model with teacher forcing, as the published models were trained.

The decoder reads the prompt (``<|startoftranscript|>``, language, task, ``<|notimestamps|>``) then the
transcript's tokens, and learns to predict each next token and finally ``<|endoftext|>``::

    inputs:   <|sot|> <|en|> <|transcribe|> <|notimestamps|>  Hello  world
    targets:   (-)     (-)       (-)          Hello           world  <|endoftext|>

The prompt's own targets (``(-)``) are left out of the loss by default: they are fixed by the request, not
predicted (``learn_prompt=True`` keeps them, as some recipes do). Padding targets are ``IGNORE``.

Example:
    >>> tokens, lengths = torch.tensor([[7, 8, 9], [5, 0, 0]]), torch.tensor([3, 1])
    >>> inputs, input_lengths, targets = teacher_forcing(tokens, lengths, prompt=[1, 2], end_of_text=3)
    >>> inputs.tolist(), input_lengths.tolist()
    ([[1, 2, 7, 8, 9], [1, 2, 5, 3, 3]], [5, 3])
    >>> targets.tolist()
    [[-100, 7, 8, 9, 3], [-100, 5, 3, -100, -100]]
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
import torch.nn.functional as F

from speechkit.models.whisper.frontend import CHUNK_SAMPLES, HOP_LENGTH, WhisperFrontEnd

#: Target id left out of the loss (``torch.nn.functional.cross_entropy``'s default ``ignore_index``).
IGNORE = -100


def teacher_forcing(tokens: torch.Tensor, lengths: torch.Tensor, prompt: Sequence[int], end_of_text: int,
                    learn_prompt: bool = False) -> tuple:
    """Decoder inputs and targets of a batch of transcripts.

    Arguments:
        tokens: (batch, length) int64 text tokens, right-padded (any pad value).
        lengths: (batch,) int64 valid tokens per item (absolute, not relative).
        prompt: the first tokens, from ``<|startoftranscript|>`` to ``<|notimestamps|>``.
        end_of_text: the id predicted after the last text token (the padding of the inputs, too).
        learn_prompt: also train the prediction of the prompt's tokens after the first.

    Returns:
        ``(inputs, input_lengths, targets)``: (batch, len(prompt) + length) int64 inputs (prompt, text,
        then ``end_of_text`` as padding), (batch,) valid input tokens, and targets of the inputs' shape
        (the next token at each position, :data:`IGNORE` where nothing is learnt).
    """
    if lengths.is_floating_point():
        raise ValueError("teacher_forcing: lengths must be absolute int64 token counts, not relative lengths")
    batch, length = tokens.shape
    device = tokens.device
    lengths = lengths.to(device)
    width = len(prompt) + length
    positions = torch.arange(length, device=device)[None, :]
    valid = positions < lengths[:, None]
    text = torch.where(valid, tokens, torch.full_like(tokens, end_of_text))
    prompt_tensor = torch.tensor(list(prompt), dtype=torch.long, device=device).expand(batch, -1)
    inputs = torch.cat([prompt_tensor, text], dim=1)
    # targets[i] is inputs[i + 1]; the position of the last text token (or the prompt's end) predicts EOT.
    targets = torch.full((batch, width), IGNORE, dtype=torch.long, device=device)
    targets[:, :-1] = inputs[:, 1:]
    input_lengths = lengths + len(prompt)
    targets[torch.arange(batch, device=device), input_lengths - 1] = end_of_text
    after = torch.arange(width, device=device)[None, :] >= input_lengths[:, None]
    targets = targets.masked_fill(after, IGNORE)
    if not learn_prompt:
        targets[:, :len(prompt) - 1] = IGNORE
    return inputs, input_lengths, targets


def token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor,
                        label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over the learnt targets: logits (batch, length, vocab), targets (batch, length)
    with :data:`IGNORE` where nothing is learnt; ``label_smoothing`` spreads that mass over the vocabulary.
    Computed in float32 whatever the logits' precision."""
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE,
                           label_smoothing=label_smoothing)


class WhisperTrainingFeatures(torch.nn.Module):
    """Waveforms -> the log-mel features a Whisper encoder reads, with SpecAugment in training.

    Arguments:
        num_mel_bins: the model's (80 or 128).
        specaugment: a :class:`speechkit.features.SpecAugment` applied to each item's valid frames (the
            silence padding to 30 s is left alone) when the module is in training mode; None: none.

    ``forward(wavs, lengths)``: wavs (batch, time) at 16 kHz, lengths (batch,) int64 samples; items longer
    than 30 s (e.g. slowed down by a waveform augmentation) are cut to 30 s. Returns (batch, mels, 3000).
    The front end runs in float32 even under autocast (the log of small powers needs the precision).

    Example:
        >>> features = WhisperTrainingFeatures(80)(torch.zeros(2, 16000), torch.tensor([16000, 8000]))
        >>> features.shape
        torch.Size([2, 80, 3000])
    """

    def __init__(self, num_mel_bins: int = 80, specaugment: Optional[torch.nn.Module] = None):
        super().__init__()
        self.frontend = WhisperFrontEnd(num_mel_bins)
        self.specaugment = specaugment

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        lengths = lengths.clamp(max=CHUNK_SAMPLES)
        with torch.autocast(wavs.device.type, enabled=False):
            features = self.frontend(wavs[:, :CHUNK_SAMPLES].float(), lengths)
        if self.training and self.specaugment is not None:
            frames = (lengths + HOP_LENGTH - 1).div(HOP_LENGTH, rounding_mode="floor")
            frames = frames.clamp(max=features.shape[2])
            masked, _ = self.specaugment(features.transpose(1, 2), frames.to(features.device))
            features = masked.transpose(1, 2).contiguous()
        return features


def set_dropout(model: torch.nn.Module, dropout: Optional[float] = None,
                attention_dropout: Optional[float] = None,
                activation_dropout: Optional[float] = None) -> None:
    """Change a :class:`~speechkit.models.whisper.WhisperModel`'s dropout rates in place (the published
    checkpoints have none; fine-tuning on little data often wants some). None leaves a rate as it is; the
    config follows, so a folder written afterwards records the rates."""
    from dataclasses import replace

    requested = {"dropout": dropout, "attention_dropout": attention_dropout,
                 "activation_dropout": activation_dropout}
    values = {name: value for name, value in requested.items() if value is not None}
    if not values:
        return
    for name, value in values.items():
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {value}")
    config = replace(model.config, **values)
    model.config = model.encoder.config = model.decoder.config = config
    for layer in [*model.encoder.layers, *model.decoder.layers]:
        layer.dropout, layer.activation_dropout = config.dropout, config.activation_dropout
        for attention in (getattr(layer, "self_attn", None), getattr(layer, "encoder_attn", None)):
            if attention is not None:
                attention.dropout = config.attention_dropout


__all__ = ["IGNORE", "WhisperTrainingFeatures", "set_dropout", "teacher_forcing", "token_cross_entropy"]
