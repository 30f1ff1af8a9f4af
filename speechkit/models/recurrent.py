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

from speechkit.errors import HparamsError
from speechkit.nn.masks import check_features, zero_padding

_RNNS = {"lstm": nn.LSTM, "gru": nn.GRU}


def stack_frames(x: torch.Tensor, lengths: torch.Tensor, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Concatenate each run of ``stride`` frames into one (``stride`` times fewer frames, that much wider).

    Output frame ``t`` holds input frames ``stride*t .. stride*t + stride - 1``; an utterance's last partial
    run is dropped, so valid output frames never contain padding.

    Shapes: x ``(batch, time, dims)``, lengths ``(batch,)`` ->
    ``(batch, time // stride, stride * dims)``, ``(batch,)`` with ``lengths // stride``.
    """
    batch, time, dims = x.shape
    kept = time // stride * stride
    stacked = x[:, :kept].reshape(batch, kept // stride, stride * dims)
    return stacked, torch.div(lengths, stride, rounding_mode="floor")


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse the first ``lengths[i]`` frames of each item in time; the padding after them stays in place.

    Applying it twice gives ``x`` back.

    Shapes: x ``(batch, time, ...)``, lengths ``(batch,)`` -> like x.

    Example:
        >>> reverse_padded(torch.arange(4.0).view(1, 4, 1), torch.tensor([3]))[0, :, 0]
        tensor([2., 1., 0., 3.])
    """
    time = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
    ends = lengths.to(x.device).unsqueeze(1)
    index = torch.where(time < ends, ends - 1 - time, time)
    index = index.view(index.shape + (1,) * (x.dim() - 2)).expand_as(x)
    return x.gather(1, index)


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
        upsample: output frames per recurrent frame. The projection makes ``upsample`` frames of ``d_model``
            from each one, so a CTC head can emit up to ``upsample`` labels per ``stride`` input frames: fast
            speech read in 40 ms frames has close to one character per frame, more than CTC's alignment
            (with blanks between repeated letters) can follow, while a smaller stride makes the recurrent
            layers, where the time goes, read more frames.

    Each direction runs on the padded batch as one dense sequence: the forward direction reads frames
    ``0..t`` only, and the backward direction runs forward over each utterance reversed within its own length
    (:func:`reverse_padded`), so padding only ever follows the frames that matter and no valid output reads
    it: an utterance's output is what it would be alone. Frames past an utterance's length are zero. (Packed
    sequences give the same outputs, but on CPU the packed kernels are about twice as slow as the dense ones
    once the lengths in a batch differ, even by one frame.)

    Shapes: x ``(batch, frames, input_size)``, lengths ``(batch,)`` ->
    ``(batch, frames // stride * upsample, d_model)``, ``(batch,)`` with ``lengths // stride * upsample``.
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
        upsample: int = 1,
    ):
        super().__init__()
        if rnn not in _RNNS:
            raise HparamsError(f"RecurrentEncoder rnn must be one of {sorted(_RNNS)}, got {rnn!r}")
        if stride < 1:
            raise HparamsError(f"RecurrentEncoder stride must be >= 1, got {stride}")
        if upsample < 1:
            raise HparamsError(f"RecurrentEncoder upsample must be >= 1, got {upsample}")
        self.input_size = input_size
        self.stride, self.upsample, self.d_model = stride, upsample, d_model
        directions = 2 if bidirectional else 1
        # layers[i][0] reads forward in time, layers[i][1] (when bidirectional) reads each utterance reversed.
        self.layers = nn.ModuleList(
            nn.ModuleList(
                _RNNS[rnn](input_size * stride if i == 0 else hidden_size * directions, hidden_size,
                           batch_first=True)
                for _ in range(directions)
            )
            for i in range(num_layers)
        )
        self.dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(hidden_size * directions, d_model * upsample)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        owner = f"RecurrentEncoder with stride {self.stride}"
        check_features(x, lengths, self.input_size, self.stride, owner)
        x, lengths = stack_frames(x, lengths, self.stride)
        for index, directions in enumerate(self.layers):
            if index:
                x = self.dropout(x)  # between layers, as in nn.LSTM(dropout=...)
            outputs = [directions[0](x)[0]]
            if len(directions) == 2:
                outputs.append(reverse_padded(directions[1](reverse_padded(x, lengths))[0], lengths))
            x = torch.cat(outputs, dim=-1)
        y = self.proj(self.dropout(x))
        # (batch, frames, upsample * d_model) -> (batch, frames * upsample, d_model): consecutive outputs.
        y = y.reshape(y.shape[0], y.shape[1] * self.upsample, self.d_model)
        lengths = lengths * self.upsample
        return zero_padding(y, lengths), lengths
