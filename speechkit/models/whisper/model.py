"""The Whisper encoder-decoder: log-mel frames -> encoder states; tokens + encoder states -> next-token
logits.

Module and parameter names follow the ``transformers`` checkpoints' (``encoder.layers.0.self_attn.q_proj``)
without their ``model.`` prefix, so loading and writing a folder is a prefix change
(:mod:`speechkit.models.whisper.huggingface`). Pre-norm layers, GELU, queries scaled before the product,
keys without bias, sinusoidal encoder positions and learned decoder positions, as the published models.

Decoding keeps a :class:`DecoderCache`: the cross-attention keys and values are computed once per
recording, the self-attention ones are written into preallocated tensors step by step, so one step costs
one token's work.

Example:
    >>> import torch
    >>> config = WhisperConfig(vocab_size=100, d_model=32, encoder_layers=1, decoder_layers=1, pad_token_id=0,
    ...                        encoder_heads=2, decoder_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64)
    >>> model = WhisperModel(config).eval()
    >>> states = model.encoder(torch.zeros(1, 80, 3000))
    >>> model.decoder(torch.tensor([[1, 2, 3]]), states).shape
    torch.Size([1, 3, 100])
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from speechkit.models.whisper.config import WhisperConfig


def sinusoids(length: int, channels: int, max_timescale: float = 10000.0) -> torch.Tensor:
    """(length, channels) sinusoidal positions: sines in the first half of the channels, cosines in the
    second, timescales geometric from 1 to ``max_timescale``."""
    increment = math.log(max_timescale) / (channels // 2 - 1)
    inverse = torch.exp(-increment * torch.arange(channels // 2))
    angles = torch.arange(length).view(-1, 1) * inverse.view(1, -1)
    return torch.cat([angles.sin(), angles.cos()], dim=1)


class Attention(nn.Module):
    """Multi-head attention with Whisper's parameters (``k_proj`` without bias).

    ``forward(x, keys, values, mask, transposed=False)``: x (batch, queries, d_model); keys and values
    (batch, heads, length, head_dim) already projected (see :meth:`project_keys_values`), the keys as
    (batch, heads, head_dim, length) when ``transposed`` (the decoder cache's cross-attention keys); mask
    broadcastable to (batch, heads, queries, length), True where attention is allowed, or None.
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0):
        super().__init__()
        self.heads, self.head_dim, self.dropout = heads, d_model // heads, dropout
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_dim).transpose(1, 2)

    def project_keys_values(self, x: torch.Tensor) -> tuple:
        return self.split(self.k_proj(x)), self.split(self.v_proj(x))

    def project_cross_keys_values(self, states: torch.Tensor) -> tuple:
        """(batch, frames, d_model) encoder states -> keys (batch, heads, head_dim, frames) and values
        (batch, heads, frames, head_dim), both contiguous: the layout a decoding step reads without copying.

        One matrix product computes both (the two weights stacked, a zero bias for the keys): the numbers
        of two up to rounding, once per recording; storing the values contiguous saves a copy at every step.
        """
        batch, frames = states.shape[:2]
        weight = torch.cat([self.k_proj.weight, self.v_proj.weight])
        bias = torch.cat([torch.zeros_like(self.v_proj.bias), self.v_proj.bias])
        both = F.linear(states, weight, bias).view(batch, frames, 2, self.heads, self.head_dim)
        return both[:, :, 0].permute(0, 2, 3, 1).contiguous(), both[:, :, 1].transpose(1, 2).contiguous()

    def forward(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                mask: Optional[torch.Tensor] = None, transposed: bool = False) -> torch.Tensor:
        # Scaled before the product, as the reference: the order changes the rounding.
        queries = self.split(self.q_proj(x) * self.scaling)
        if transposed and x.shape[1] == 1 and mask is None and not self.training:
            # One query over the 1500 encoder states (a decoding step): two plain matrix products over keys
            # stored transposed are several times faster on CPU than the fused kernel, built for many queries.
            out = torch.softmax(queries @ keys, dim=-1) @ values
        else:
            keys = keys.transpose(-1, -2) if transposed else keys
            out = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, scale=1.0,
                                                 dropout_p=self.dropout if self.training else 0.0)
        return self.out_proj(out.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1))


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, heads: int, ffn_dim: int, dropout: float, attention_dropout: float,
                 activation_dropout: float):
        super().__init__()
        self.self_attn = Attention(d_model, heads, attention_dropout)
        self.self_attn_layer_norm = nn.LayerNorm(d_model)
        self.fc1, self.fc2 = nn.Linear(d_model, ffn_dim), nn.Linear(ffn_dim, d_model)
        self.final_layer_norm = nn.LayerNorm(d_model)
        self.dropout, self.activation_dropout = dropout, activation_dropout

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = F.dropout(F.gelu(self.fc1(self.final_layer_norm(x))), self.activation_dropout, self.training)
        return x + F.dropout(self.fc2(hidden), self.dropout, self.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = self.self_attn_layer_norm(x)
        x = x + F.dropout(self.self_attn(normed, *self.self_attn.project_keys_values(normed)), self.dropout,
                          self.training)
        return self.feed_forward(x)


class WhisperEncoder(nn.Module):
    """(batch, num_mel_bins, 3000) log-mel frames -> (batch, 1500, d_model) states.

    Whisper reads whole 30 s windows (shorter audio is padded with silence before the front end), so there
    are no lengths: every item has all 3000 frames.
    """

    def __init__(self, config: WhisperConfig):
        super().__init__()
        self.config = config
        self.conv1 = nn.Conv1d(config.num_mel_bins, config.d_model, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(config.d_model, config.d_model, kernel_size=3, stride=2, padding=1)
        self.embed_positions = nn.Embedding(config.max_source_positions, config.d_model)
        self.embed_positions.weight.data.copy_(sinusoids(config.max_source_positions, config.d_model))
        self.embed_positions.requires_grad_(False)
        self.layers = nn.ModuleList(
            EncoderLayer(config.d_model, config.encoder_heads, config.encoder_ffn_dim, config.dropout,
                         config.attention_dropout, config.activation_dropout)
            for _ in range(config.encoder_layers))
        self.layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if features.dim() != 3 or features.shape[1:] != (self.config.num_mel_bins, self.config.num_frames):
            raise ValueError(f"WhisperEncoder reads (batch, {self.config.num_mel_bins}, "
                             f"{self.config.num_frames}) log-mel features, got {tuple(features.shape)}")
        x = F.gelu(self.conv2(F.gelu(self.conv1(features)))).transpose(1, 2)
        x = F.dropout(x + self.embed_positions.weight, self.config.dropout, self.training)
        for layer in self.layers:
            x = layer(x)
        return self.layer_norm(x)


class DecoderLayer(EncoderLayer):
    def __init__(self, d_model: int, heads: int, ffn_dim: int, dropout: float, attention_dropout: float,
                 activation_dropout: float):
        super().__init__(d_model, heads, ffn_dim, dropout, attention_dropout, activation_dropout)
        self.encoder_attn = Attention(d_model, heads, attention_dropout)
        self.encoder_attn_layer_norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, self_keys: torch.Tensor, self_values: torch.Tensor,
                cross_keys: torch.Tensor, cross_values: torch.Tensor, mask: Optional[torch.Tensor],
                cross_transposed: bool = False):
        x = x + F.dropout(self.self_attn(self.self_attn_layer_norm(x), self_keys, self_values, mask),
                          self.dropout, self.training)
        x = x + F.dropout(self.encoder_attn(self.encoder_attn_layer_norm(x), cross_keys, cross_values,
                                            transposed=cross_transposed), self.dropout, self.training)
        return self.feed_forward(x)


class DecoderCache:
    """Keys and values a decoder has computed: cross-attention ones per layer (fixed; the keys stored
    transposed, (batch, heads, head_dim, frames), the values (batch, heads, frames, head_dim), both
    contiguous, for the one-query products), self-attention ones in
    preallocated (batch, heads, capacity, head_dim) tensors of which the first ``length`` positions hold.

    Example:
        >>> model = WhisperModel(WhisperConfig())   # whisper-tiny's sizes, random weights
        >>> states = model.encoder(torch.randn(1, 80, 3000))   # 30 s of log-mels -> (1, 1500, 384)
        >>> cache = model.decoder.new_cache(states, capacity=448)
        >>> logits = model.decoder.step(torch.tensor([[50258, 50259]]), cache)   # the prompt's first tokens
        >>> logits.shape, cache.length
        (torch.Size([1, 51865]), 2)
    """

    def __init__(self, cross: list, self_keys: list, self_values: list):
        self.cross, self.self_keys, self.self_values = cross, self_keys, self_values
        self.length = 0

    @property
    def capacity(self) -> int:
        return self.self_keys[0].shape[2] if self.self_keys else 0

    def reorder(self, index: torch.Tensor) -> None:
        """Row i takes row ``index[i]``'s keys and values (beam search: the beam each new beam continues);
        only the filled positions are copied."""
        for tensors in (self.self_keys, self.self_values):
            for tensor in tensors:
                tensor[:, :, :self.length] = tensor[index, :, :self.length]

    def select(self, index: torch.Tensor) -> None:
        """Keep rows ``index`` of everything, cross-attention included (items leaving a batch)."""
        self.self_keys = [k.index_select(0, index) for k in self.self_keys]
        self.self_values = [v.index_select(0, index) for v in self.self_values]
        self.cross = [(k.index_select(0, index), v.index_select(0, index)) for k, v in self.cross]


class WhisperDecoder(nn.Module):
    """Tokens and encoder states -> (batch, tokens, vocab_size) logits.

    ``forward(tokens, states, lengths=None)`` runs a whole (right-padded) token batch, for training and
    scoring; ``new_cache`` and ``step`` decode incrementally.
    """

    def __init__(self, config: WhisperConfig):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
        self.embed_positions = nn.Embedding(config.max_target_positions, config.d_model)
        self.layers = nn.ModuleList(
            DecoderLayer(config.d_model, config.decoder_heads, config.decoder_ffn_dim, config.dropout,
                         config.attention_dropout, config.activation_dropout)
            for _ in range(config.decoder_layers))
        self.layer_norm = nn.LayerNorm(config.d_model)
        self.proj_out = None if config.tie_word_embeddings else nn.Linear(config.d_model, config.vocab_size,
                                                                          bias=False)

    def output_weight(self) -> torch.Tensor:
        return self.embed_tokens.weight if self.proj_out is None else self.proj_out.weight

    def forward(self, tokens: torch.Tensor, states: torch.Tensor,
                lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        """tokens (batch, length) int64, states (batch, frames, d_model), lengths (batch,) int64 valid tokens
        (right padding; logits at padded positions are meaningless) -> (batch, length, vocab_size)."""
        length = tokens.shape[1]
        self._check_length(length)
        mask = torch.ones(length, length, dtype=torch.bool, device=tokens.device).tril()[None, None]
        if lengths is not None:
            keys_valid = torch.arange(length, device=tokens.device)[None,
                                                                    :] < lengths.to(tokens.device)[:, None]
            mask = mask & keys_valid[:, None, None, :]
        x = self.embed_tokens(tokens) + self.embed_positions.weight[:length]
        x = F.dropout(x, self.config.dropout, self.training)
        for layer in self.layers:
            normed = layer.self_attn_layer_norm(x)
            self_kv = layer.self_attn.project_keys_values(normed)
            cross_kv = layer.encoder_attn.project_keys_values(states)
            x = layer(x, *self_kv, *cross_kv, mask)
        return F.linear(self.layer_norm(x), self.output_weight())

    def new_cache(self, states: torch.Tensor, capacity: Optional[int] = None) -> DecoderCache:
        """A cache for decoding ``states`` (batch, frames, d_model), room for ``capacity`` tokens."""
        capacity = capacity or self.config.max_target_positions
        self._check_length(capacity)
        batch, heads = states.shape[0], self.config.decoder_heads
        shape = (batch, heads, capacity, self.config.d_model // heads)
        cross = [layer.encoder_attn.project_cross_keys_values(states) for layer in self.layers]
        empty = [states.new_zeros(shape) for _ in self.layers]
        return DecoderCache(cross, empty, [states.new_zeros(shape) for _ in self.layers])

    def step(self, tokens: torch.Tensor, cache: DecoderCache) -> torch.Tensor:
        """Feed ``tokens`` (batch, new) after the cache's tokens; returns the logits of the last one
        (batch, vocab_size) and advances the cache."""
        start, new = cache.length, tokens.shape[1]
        end = start + new
        if end > cache.capacity:
            raise ValueError(f"WhisperDecoder: {end} tokens do not fit a cache of {cache.capacity}")
        x = self.embed_tokens(tokens) + self.embed_positions.weight[start:end]
        mask = None
        if new > 1:  # the prompt: causal among its own tokens (one new token sees every earlier one)
            mask = torch.ones(new, end, dtype=torch.bool, device=tokens.device).tril(diagonal=start)
        for index, layer in enumerate(self.layers):
            normed = layer.self_attn_layer_norm(x)
            keys, values = layer.self_attn.project_keys_values(normed)
            cache.self_keys[index][:, :, start:end] = keys
            cache.self_values[index][:, :, start:end] = values
            x = layer(x, cache.self_keys[index][:, :, :end], cache.self_values[index][:, :, :end],
                      *cache.cross[index], mask, cross_transposed=True)
        cache.length = end
        return F.linear(self.layer_norm(x[:, -1]), self.output_weight())

    def _check_length(self, length: int) -> None:
        if length > self.config.max_target_positions:
            raise ValueError(f"WhisperDecoder: {length} tokens, more than max_target_positions "
                             f"{self.config.max_target_positions}")


class WhisperModel(nn.Module):
    """Encoder and decoder of one Whisper checkpoint.

    ``forward(features, tokens, lengths=None)`` -> (batch, tokens, vocab_size) logits (teacher forcing).
    """

    def __init__(self, config: WhisperConfig):
        super().__init__()
        self.config = config
        self.encoder = WhisperEncoder(config)
        self.decoder = WhisperDecoder(config)

    def forward(self, features: torch.Tensor, tokens: torch.Tensor,
                lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.decoder(tokens, self.encoder(features), lengths)
