"""Recurrent ASR encoder: frame stacking, then bidirectional LSTM (or GRU) layers, projected to ``d_model``.

On a few CPU cores a recurrent encoder learns the CTC alignment in a few hundred optimizer steps, where a
Conformer of the same size sits on the early CTC plateau (blank everywhere) for thousands; the recipes use it
when minutes of CPU are the budget, and the Conformer when a GPU makes steps cheap.

Example:
    >>> enc = RecurrentEncoder(80, d_model=64, hidden_size=32, num_layers=2, stride=4)
    >>> y, lengths = enc(torch.randn(2, 100, 80), torch.tensor([100, 37]))
    >>> y.shape, lengths.tolist()
    (torch.Size([2, 25, 64]), [25, 9])
"""

from __future__ import annotations

import torch
from torch import nn

from speechkit.errors import DataError, HparamsError
from speechkit.nn.masks import check_lengths, values_checkable, zero_padding

_RNNS = {"lstm": nn.LSTM, "gru": nn.GRU}


def stack_frames(x: torch.Tensor, lengths: torch.Tensor, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Concatenate each run of ``stride`` frames into one frame (``stride``x fewer, ``stride``x wider).

    Output frame ``t`` holds input frames ``stride*t .. stride*t + stride - 1``; an utterance's last partial
    run is dropped, so valid output frames never contain padding.

    Shapes: x ``(batch, time, dims)``, lengths ``(batch,)`` ->
    ``(batch, time // stride, stride * dims)``, ``(batch,)`` with ``lengths // stride``.
    """
    batch, time, dims = x.shape
    kept = time // stride * stride
    stacked = x[:, :kept].reshape(batch, kept // stride, stride * dims)
    return stacked, torch.div(lengths, stride, rounding_mode="floor")


class RecurrentEncoder(nn.Module):
    """Frame stacking (``stride``x fewer frames), ``num_layers`` recurrent layers, projection to ``d_model``.

    Args:
        input_size: feature dimension (e.g. 80 filterbanks).
        d_model: output width (what the CTC head and the attention decoder read).
        hidden_size: recurrent units per direction.
        num_layers: recurrent layers.
        dropout: dropout between layers and on the output.
        stride: input frames per output frame (4 gives 40 ms frames from a 10 ms hop).
        rnn: ``"lstm"`` or ``"gru"``.
        bidirectional: read each utterance both ways (the default; ``False`` for streaming).

    Padding never reaches the recurrence (packed sequences), so each utterance's output is what it would be
    alone, and frames past an utterance's length are zero.

    Shapes: x ``(batch, frames, input_size)``, lengths ``(batch,)`` ->
    ``(batch, frames // stride, d_model)``, ``(batch,)`` with ``lengths // stride``.
    """

    def __init__(
        self,
        input_size: int,
        d_model: int = 256,
        hidden_size: int = 256,
        num_layers: int = 3,
        dropout: float = 0.1,
        stride: int = 4,
        rnn: str = "lstm",
        bidirectional: bool = True,
    ):
        super().__init__()
        if rnn not in _RNNS:
            raise HparamsError(f"RecurrentEncoder rnn must be one of {sorted(_RNNS)}, got {rnn!r}")
        if stride < 1:
            raise HparamsError(f"RecurrentEncoder stride must be >= 1, got {stride}")
        self.input_size = input_size
        self.stride = stride
        self.rnn = _RNNS[rnn](
            input_size * stride,
            hidden_size,
            num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.output_dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(hidden_size * (2 if bidirectional else 1), d_model)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if x.dim() != 3 or x.shape[-1] != self.input_size:
            raise DataError(
                f"RecurrentEncoder expects (batch, time, {self.input_size}) features, got {tuple(x.shape)}"
            )
        check_lengths(lengths, x.shape[1], x.shape[0])
        if values_checkable(lengths) and lengths.numel() and int(lengths.min()) < self.stride:
            raise DataError(
                f"an utterance has {int(lengths.min())} feature frames; RecurrentEncoder with stride "
                f"{self.stride} needs at least {self.stride} (filter out shorter utterances)"
            )
        x, lengths = stack_frames(x, lengths, self.stride)
        packed = nn.utils.rnn.pack_padded_sequence(
            x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False
        )
        y, _ = self.rnn(packed)
        y, _ = nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])
        y = self.proj(self.output_dropout(y))
        return zero_padding(y, lengths), lengths
