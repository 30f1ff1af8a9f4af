"""The limits a server keeps: request sizes, decoded audio, connections, streams and batching.

Example:
    >>> limits = ServeLimits(max_batch_seconds=16.0, max_wait_ms=10.0)
    >>> limits.max_audio_seconds
    60.0
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ServeLimits:
    """What one server accepts and how it batches; every field is a ``speechkit serve`` option.

    Attributes:
        max_request_bytes: largest request body (an upload, a mel file); larger ones get 413.
        max_audio_seconds: longest audio of one request or one stream, after decoding; longer gets 413.
        max_decoded_samples: most samples (frames x channels) one upload may decode to; checked on the file's
            header before anything is decoded, because a small compressed file can declare gigabytes.
        max_channels: most channels of an upload.
        max_sample_rate: highest sample rate of an upload or a stream (the lowest is 4000 Hz).
        max_header_bytes: largest request head (request line and headers); larger gets 431.
        request_head_timeout_s: longest a connection may take to send a complete request head, counted
            from its opening or from its previous response; slower gets 408 and is closed (a client
            sending its head a byte at a time, or nothing, would otherwise hold a connection forever).
        max_connections: open connections (HTTP and WebSocket together) beyond which new requests get 503.
        max_streams: open WebSocket streams beyond which a new handshake gets 503.
        max_stream_buffer_bytes: most audio one stream may hold (float32 at the client's rate); more closes
            it with 1009.
        stream_max_s: longest a stream may stay open, however busy; longer closes it with 1008.
        max_batch_seconds: most audio (seconds, summed over items) in one batched forward pass.
        max_batch_items: most requests in one batch; 1 serves one request at a time. The default suits a
            CPU, where larger batches of a speech model spill out of the caches (docs/serve.md); raise it on
            a GPU.
        max_wait_ms: how long the first request of a batch may wait for others to join it, when others are
            on their way (requests in flight); a request alone never waits (0: never wait).
        queue_size: requests waiting per model beyond which new ones get 503 (a short queue: answer "busy"
            at once rather than make everyone wait).
        partial_every_s: a stream's partial transcript is recomputed after at least this much new audio.
        stream_idle_s: a stream that sends nothing for this long is closed.
    """

    max_request_bytes: int = 20 * 1024 * 1024
    max_audio_seconds: float = 60.0
    max_decoded_samples: int = 60 * 48000 * 2
    max_channels: int = 8
    max_sample_rate: int = 192000
    max_header_bytes: int = 64 * 1024
    request_head_timeout_s: float = 10.0
    max_connections: int = 256
    max_streams: int = 32
    max_stream_buffer_bytes: int = 16_000_000
    stream_max_s: float = 600.0
    max_batch_seconds: float = 64.0
    max_batch_items: int = 8
    max_wait_ms: float = 10.0
    queue_size: int = 64
    partial_every_s: float = 0.25
    stream_idle_s: float = 60.0

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value < 0 or (value == 0 and field.name != "max_wait_ms"):  # waiting is optional
                what = "0 or more" if field.name == "max_wait_ms" else "positive"
                raise ValueError(f"serve limit {field.name} must be {what}, got {value}")
        if self.max_sample_rate < 4000:
            raise ValueError(f"serve limit max_sample_rate must be at least 4000, got {self.max_sample_rate}")
