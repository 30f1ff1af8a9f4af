"""A unidirectional :class:`~speechkit.models.RecurrentEncoder` run chunk by chunk on a batch of streams.

Each stream keeps the feature frames of its incomplete stack (``stride`` frames make one recurrent step)
and every layer's recurrent state. Streams in a batch may bring different numbers of new steps: the layers
run one step at a time over the batch, and a stream without a step at that time keeps its state, so each
stream's outputs are what it gives alone, and what the whole recording gives offline. When every stream
brings the same number of steps (a lone stream always does), each layer runs them in one call.

Example:
    >>> from speechkit.models import RecurrentEncoder
    >>> encoder = RecurrentEncoder(16, d_model=8, hidden_size=8, num_layers=2, bidirectional=False).eval()
    >>> stream = StreamingRecurrentEncoder(encoder, batch_size=2)
    >>> outs = stream.accept([torch.randn(9, 16), torch.randn(3, 16)])
    >>> [tuple(o.shape) for o in outs]    # 2 steps of stride 4 -> 2 frames; 0 steps yet
    [(2, 8), (0, 8)]
"""
from __future__ import annotations

import torch

from speechkit.errors import SpeechkitError
from speechkit.models.recurrent import RecurrentEncoder


class StreamingRecurrentEncoder:
    """State of ``batch_size`` streams through ``encoder`` (kept in eval mode).

    ``accept(list of (frames_i, input_size)) -> list of (outputs_i, d_model)``.
    """

    def __init__(self, encoder: RecurrentEncoder, batch_size: int):
        if not isinstance(encoder, RecurrentEncoder):
            raise SpeechkitError(f"streaming needs a RecurrentEncoder, got {type(encoder).__name__} (it may "
                                 "read future frames)")
        if any(len(directions) != 1 for directions in encoder.layers):
            raise SpeechkitError("the RecurrentEncoder is bidirectional: its backward direction reads the "
                                 "whole recording; a streaming model needs bidirectional: False")
        self.encoder = encoder
        self.batch_size = batch_size
        self.pending = [torch.zeros(0, encoder.input_size) for _ in range(batch_size)]
        self.states = [None] * len(encoder.layers)  # per layer: h or (h, c), batch on dim 1

    @torch.no_grad()
    def accept(self, features: list) -> list:
        enc = self.encoder
        stacked = []
        for i, new in enumerate(features):
            frames = torch.cat([self.pending[i], new.reshape(-1, enc.input_size).to(torch.float32)])
            usable = frames.shape[0] // enc.stride * enc.stride
            stacked.append(frames[:usable].reshape(-1, enc.stride * enc.input_size))
            self.pending[i] = frames[usable:]
        steps = torch.tensor([s.shape[0] for s in stacked])
        most = int(steps.max()) if steps.numel() else 0
        if most == 0:
            return [torch.zeros(0, enc.d_model) for _ in features]
        x = torch.zeros(len(stacked), most, enc.stride * enc.input_size)
        for i, s in enumerate(stacked):
            x[i, :s.shape[0]] = s
        for layer_index, directions in enumerate(enc.layers):
            x = self._run_layer(directions[0], layer_index, x, steps)
        y = enc.proj(x).reshape(len(stacked), most * enc.upsample, enc.d_model)
        return [y[i, :int(steps[i]) * enc.upsample] for i in range(len(stacked))]

    def _run_layer(self, rnn: torch.nn.Module, layer_index: int, x: torch.Tensor, steps: torch.Tensor):
        """(batch, most, in) -> (batch, most, hidden); step t updates only the streams with a step t."""
        state = self.states[layer_index]
        if state is None:
            zeros = torch.zeros(1, x.shape[0], rnn.hidden_size)
            state = (zeros, zeros.clone()) if isinstance(rnn, torch.nn.LSTM) else zeros
        if bool((steps == x.shape[1]).all()):  # every stream has every step (one stream always): one call
            out, self.states[layer_index] = rnn(x, state)
            return out
        outputs = []
        for t in range(x.shape[1]):
            out, new_state = rnn(x[:, t:t + 1], state)
            active = (steps > t).view(1, -1, 1)
            if isinstance(new_state, tuple):
                state = tuple(torch.where(active, n, o) for n, o in zip(new_state, state))
            else:
                state = torch.where(active, new_state, state)
            outputs.append(out)
        self.states[layer_index] = state
        return torch.cat(outputs, dim=1)
