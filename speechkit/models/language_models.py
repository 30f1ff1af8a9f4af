"""Token language models (LSTM and Transformer) for shallow fusion and LM recipes.

Both map ``(tokens, lengths)`` to next-token log-probabilities ``(batch, tokens, vocab)``: position ``i``
predicts token ``i + 1``. Both are causal, so padding after an item's tokens cannot reach its valid positions.
For decoding they share a small step interface: ``state = lm.initial_state()``, then
``log_probs, state = lm.score_next(prefixes, state)`` and ``state = lm.select_state(state, indices)``.

Example:
    >>> lm = LSTMLanguageModel(vocab_size=20, embedding_dim=16, hidden_size=32, num_layers=1)
    >>> lm(torch.randint(0, 20, (2, 5)), torch.tensor([5, 3])).shape
    torch.Size([2, 5, 20])
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import nn

from speechkit.errors import HparamsError
from speechkit.nn.masks import check_lengths
from speechkit.nn.positional import SinusoidalPositionalEncoding
from speechkit.nn.transformer import TransformerEncoderLayer


class LSTMLanguageModel(nn.Module):
    """Embedding, multi-layer LSTM, projection to the vocabulary.

    Args:
        vocab_size: vocabulary size.
        embedding_dim: token embedding size.
        hidden_size: LSTM hidden size.
        num_layers: stacked LSTM layers.
        dropout: dropout on embeddings, between layers and before the projection.

    Shapes: tokens ``(batch, tokens)``, lengths ``(batch,)`` -> ``(batch, tokens, vocab_size)`` (float32).
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 256,
        hidden_size: int = 512,
        num_layers: int = 2,
        dropout: float = 0.1,
    ):
        super().__init__()
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(
            embedding_dim,
            hidden_size,
            num_layers,
            batch_first=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.output = nn.Linear(hidden_size, vocab_size)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        check_lengths(lengths, tokens.shape[1], tokens.shape[0], "LM token lengths")
        hidden, _ = self.lstm(self.dropout(self.embedding(tokens)))
        return self.output(self.dropout(hidden)).float().log_softmax(dim=-1)

    def initial_state(self) -> Optional[Any]:
        return None

    def score_next(self, prefixes: torch.Tensor, state: Optional[Any]) -> tuple[torch.Tensor, Any]:
        """Next-token log-probs ``(n, vocab)`` after ``prefixes`` ``(n, length)``; the state carries the LSTM.

        With a state, only the last token of each prefix is fed; without one, the whole prefix.
        """
        inputs = prefixes if state is None else prefixes[:, -1:]
        hidden, new_state = self.lstm(self.embedding(inputs), state)
        return self.output(hidden[:, -1]).float().log_softmax(dim=-1), new_state

    @staticmethod
    def select_state(state: Any, indices: torch.Tensor) -> Any:
        if state is None:
            return None
        h, c = state
        return h.index_select(1, indices), c.index_select(1, indices)


class TransformerLanguageModel(nn.Module):
    """Causal Transformer LM: embedding, sinusoidal positions, pre-norm layers, final norm, projection.

    Args:
        vocab_size: vocabulary size.
        d_model: width (multiple of ``num_heads``).
        num_heads: attention heads.
        num_layers: layers.
        ffn_dim: feed-forward hidden size.
        dropout: dropout everywhere.

    Shapes: tokens ``(batch, tokens)``, lengths ``(batch,)`` -> ``(batch, tokens, vocab_size)`` (float32).
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
            TransformerEncoderLayer(d_model, num_heads, ffn_dim, dropout) for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(d_model)
        self.output = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        check_lengths(lengths, tokens.shape[1], tokens.shape[0], "LM token lengths")
        x = self.dropout(self.positions(self.embedding(tokens)))
        for layer in self.layers:
            x = layer(x, lengths, causal=True)
        return self.output(self.final_norm(x)).float().log_softmax(dim=-1)

    def initial_state(self) -> Optional[Any]:
        return None

    def score_next(self, prefixes: torch.Tensor, state: Optional[Any]) -> tuple[torch.Tensor, Any]:
        """Next-token log-probs ``(n, vocab)`` after ``prefixes`` ``(n, length)`` (recomputed; no state)."""
        lengths = torch.full(
            (prefixes.shape[0],), prefixes.shape[1], dtype=torch.long, device=prefixes.device
        )
        return self.forward(prefixes, lengths)[:, -1], None

    @staticmethod
    def select_state(state: Any, indices: torch.Tensor) -> Any:
        return None
