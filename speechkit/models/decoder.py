"""Transformer attention decoder for joint CTC/attention ASR.

Example:
    >>> dec = TransformerDecoder(vocab_size=30, d_model=32, num_heads=4, num_layers=2, ffn_dim=64)
    >>> memory, memory_lengths = torch.randn(2, 20, 32), torch.tensor([20, 11])
    >>> tokens, token_lengths = torch.randint(1, 30, (2, 6)), torch.tensor([6, 3])
    >>> dec(tokens, token_lengths, memory, memory_lengths).shape
    torch.Size([2, 6, 30])
"""

from __future__ import annotations

import torch
from torch import nn

from speechkit.errors import HparamsError
from speechkit.nn.masks import check_lengths
from speechkit.nn.positional import SinusoidalPositionalEncoding
from speechkit.nn.transformer import TransformerDecoderLayer


class TransformerDecoder(nn.Module):
    """Token embedding, sinusoidal positions, pre-norm decoder layers, output projection.

    Training feeds ``<bos> y1 .. yn`` and predicts ``y1 .. yn <eos>`` (teacher forcing); decoding calls
    :meth:`score_next` on prefixes.

    Args:
        vocab_size: output vocabulary (including the bos/eos ids).
        d_model: width (multiple of ``num_heads``).
        num_heads: attention heads.
        num_layers: decoder layers.
        ffn_dim: feed-forward hidden size.
        dropout: dropout everywhere.

    Shapes: tokens ``(batch, tokens)``, token_lengths ``(batch,)``, memory ``(batch, frames, d_model)``,
    memory_lengths ``(batch,)`` -> log-probabilities ``(batch, tokens, vocab_size)`` (float32).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 256,
        num_heads: int = 4,
        num_layers: int = 6,
        ffn_dim: int = 1024,
        dropout: float = 0.1,
    ):
        super().__init__()
        if d_model % num_heads:
            raise HparamsError(f"d_model ({d_model}) must be a multiple of num_heads ({num_heads})")
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.positions = SinusoidalPositionalEncoding(d_model)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            TransformerDecoderLayer(d_model, num_heads, ffn_dim, dropout) for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(d_model)
        self.output = nn.Linear(d_model, vocab_size)

    def forward(
        self,
        tokens: torch.Tensor,
        token_lengths: torch.Tensor,
        memory: torch.Tensor,
        memory_lengths: torch.Tensor,
    ) -> torch.Tensor:
        check_lengths(token_lengths, tokens.shape[1], tokens.shape[0], "decoder token lengths")
        check_lengths(memory_lengths, memory.shape[1], memory.shape[0], "decoder memory lengths")
        x = self.dropout(self.positions(self.embedding(tokens)))
        for layer in self.layers:
            x = layer(x, token_lengths, memory, memory_lengths)
        return self.output(self.final_norm(x)).float().log_softmax(dim=-1)

    def score_next(
        self, prefixes: torch.Tensor, memory: torch.Tensor, memory_lengths: torch.Tensor
    ) -> torch.Tensor:
        """Log-probabilities ``(n, vocab)`` of the token after each full prefix ``(n, length)``.

        All prefixes have the same length (beam search keeps them aligned), so no token padding is needed.
        """
        lengths = torch.full(
            (prefixes.shape[0],), prefixes.shape[1], dtype=torch.long, device=prefixes.device
        )
        return self.forward(prefixes, lengths, memory, memory_lengths)[:, -1]
