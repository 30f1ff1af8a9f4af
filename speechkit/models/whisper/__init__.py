"""Whisper (encoder-decoder speech recognition and translation), loaded exactly from ``transformers`` folders.

- :class:`WhisperConfig`: sizes, read from and written to ``config.json``;
- :class:`WhisperFrontEnd`: the log-mel front end;
- :class:`WhisperModel`: encoder and decoder with a key/value cache;
- :class:`WhisperTokenizer`: the checkpoint's byte-level BPE and special tokens;
- :mod:`~speechkit.models.whisper.search`: greedy and beam search with the reference's suppression rules;
- :mod:`~speechkit.models.whisper.long_form`: sequential 30 s windows with timestamps and temperature
  fallback.

Example:
    >>> from speechkit.models.whisper import WhisperConfig, WhisperModel
    >>> WhisperModel(WhisperConfig()).config.d_model
    384
"""
from speechkit.models.whisper.config import WhisperConfig
from speechkit.models.whisper.frontend import WhisperFrontEnd, mel_filters
from speechkit.models.whisper.model import DecoderCache, WhisperDecoder, WhisperEncoder, WhisperModel

__all__ = ["DecoderCache", "WhisperConfig", "WhisperDecoder", "WhisperEncoder", "WhisperFrontEnd",
           "WhisperModel", "mel_filters"]
