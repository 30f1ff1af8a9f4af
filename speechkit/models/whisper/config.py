"""Whisper sizes: one dataclass read from and written to a ``transformers`` ``config.json``.

Every published size (tiny ... large-v3, large-v3-turbo) is the same architecture with other numbers; turbo
has 4 decoder layers under a 32-layer encoder, large-v3 128 mel bins instead of 80.

Example:
    >>> config = WhisperConfig(d_model=64, encoder_layers=2, decoder_layers=1, encoder_heads=4,
    ...                        decoder_heads=4)
    >>> config.head_dim, config.num_frames
    (16, 3000)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from speechkit.errors import CheckpointError

#: speechkit field -> transformers config.json key (same meaning, same value).
HF_FIELDS = {
    "vocab_size": "vocab_size", "num_mel_bins": "num_mel_bins", "d_model": "d_model",
    "encoder_layers": "encoder_layers", "encoder_heads": "encoder_attention_heads",
    "encoder_ffn_dim": "encoder_ffn_dim", "decoder_layers": "decoder_layers",
    "decoder_heads": "decoder_attention_heads", "decoder_ffn_dim": "decoder_ffn_dim",
    "max_source_positions": "max_source_positions", "max_target_positions": "max_target_positions",
    "tie_word_embeddings": "tie_word_embeddings", "dropout": "dropout",
    "attention_dropout": "attention_dropout", "activation_dropout": "activation_dropout",
    "pad_token_id": "pad_token_id", "bos_token_id": "bos_token_id", "eos_token_id": "eos_token_id",
    "decoder_start_token_id": "decoder_start_token_id",
}


@dataclass
class WhisperConfig:
    """The numbers of a Whisper model (defaults: ``whisper-tiny``).

    The encoder reads ``num_mel_bins`` x ``2 * max_source_positions`` log-mel frames (30 s at 100 frames a
    second) through two convolutions (the second of stride 2) into ``max_source_positions`` vectors; the
    decoder reads at most ``max_target_positions`` tokens. ``tie_word_embeddings``: the output projection is
    the token embedding (every published checkpoint).
    """

    vocab_size: int = 51865
    num_mel_bins: int = 80
    d_model: int = 384
    encoder_layers: int = 4
    encoder_heads: int = 6
    encoder_ffn_dim: int = 1536
    decoder_layers: int = 4
    decoder_heads: int = 6
    decoder_ffn_dim: int = 1536
    max_source_positions: int = 1500
    max_target_positions: int = 448
    tie_word_embeddings: bool = True
    dropout: float = 0.0
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    pad_token_id: int = 50257
    bos_token_id: int = 50257
    eos_token_id: int = 50257
    decoder_start_token_id: int = 50258

    def __post_init__(self):
        for name, heads in (("encoder_heads", self.encoder_heads), ("decoder_heads", self.decoder_heads)):
            if heads < 1 or self.d_model % heads:
                raise CheckpointError(f"Whisper config: d_model {self.d_model} is not divisible by {name} "
                                      f"{heads}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.encoder_heads

    @property
    def num_frames(self) -> int:
        """Log-mel frames the encoder reads (3000 for every published model)."""
        return 2 * self.max_source_positions

    @classmethod
    def from_huggingface(cls, hf_config: dict, where: str = "config.json") -> WhisperConfig:
        """The config of a transformers ``config.json`` dict (already checked for types and bounds)."""
        if hf_config.get("model_type", "whisper") != "whisper":
            raise CheckpointError(f"{where}: key 'model_type' is {hf_config.get('model_type')!r}, "
                                  "not 'whisper'")
        for key, expected in (("activation_function", "gelu"), ("scale_embedding", False)):
            if hf_config.get(key, expected) != expected:
                raise CheckpointError(f"{where}: key '{key}' is {hf_config[key]!r}; only {expected!r} is "
                                      "supported")
        values = {ours: hf_config[theirs] for ours, theirs in HF_FIELDS.items()
                  if hf_config.get(theirs) is not None}
        try:
            return cls(**values)
        except CheckpointError as error:
            raise CheckpointError(f"{where}: {error}") from None

    def to_huggingface(self) -> dict:
        """A transformers ``config.json`` dict (``WhisperForConditionalGeneration``)."""
        values = asdict(self)
        hf_config = {"model_type": "whisper", "architectures": ["WhisperForConditionalGeneration"],
                     "activation_function": "gelu", "scale_embedding": False, "is_encoder_decoder": True,
                     "num_hidden_layers": self.encoder_layers}
        hf_config.update({theirs: values[ours] for ours, theirs in HF_FIELDS.items()})
        return hf_config
