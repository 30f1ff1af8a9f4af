"""Streaming recognition: feed audio chunks, get partial transcripts, the offline transcript at the end.

Example:
    >>> from speechkit.pretrained import EncoderASR
    >>> stream = EncoderASR.from_hparams("results/streaming-model").stream()   # doctest: +SKIP
    >>> stream.accept(chunk)                                                    # doctest: +SKIP
    'HEL'
    >>> stream.finish()                                                         # doctest: +SKIP
    'HELLO WORLD'
"""
from speechkit.streaming.asr import Stream, StreamBatch, StreamingASR
from speechkit.streaming.features import StreamingFbank
from speechkit.streaming.recurrent import StreamingRecurrentEncoder

__all__ = ["Stream", "StreamBatch", "StreamingASR", "StreamingFbank", "StreamingRecurrentEncoder"]
