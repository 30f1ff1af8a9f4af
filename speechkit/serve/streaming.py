"""The session behind ``/v1/models/{name}/stream``: audio chunks in, partial transcripts out, a final one at
the end.

The protocol (JSON text messages and binary audio, see docs/serve.md):

1. the client may send ``{"type": "start", "sample_rate": 48000}`` first (default: the model's rate; with
   ``"token": TOKEN`` when the server needs one and the handshake carried none);
2. then binary messages, each little-endian float32 mono samples at that rate; the server answers
   ``{"type": "partial", "text": ..., "seconds": ...}`` whenever there is news;
3. ``{"type": "end"}`` asks for ``{"type": "final", "text": ..., "tokens": [...], "seconds": ...}``; the
   server then closes the socket (code 1000).

A malformed message gets ``{"type": "error", "message": ...}`` and the socket is closed with code 1007
(bad data), 1009 (too much audio: ``--max-audio-seconds``, ``--max-stream-buffer-mb``) or 1008 (no or a
wrong token), the message as the close frame's reason.

The recognizer is the model's chunk-by-chunk recognizer (:class:`speechkit.streaming.StreamingASR`: its
state carried from chunk to chunk, the final text the offline one) when the model streams (a causal front
end and a unidirectional encoder, docs/deploy.md), whatever the client's rate: audio at another rate is
resampled chunk by chunk with the audio policy's filter, giving the samples the whole recording would.
Otherwise :class:`RedecodingRecognizer` transcribes all the audio received so far for each partial and the
whole audio at the end (converted as a whole, as a file would be), through the model's batcher, so the
final text equals the offline transcript of the same samples.

Example:
    >>> session = StreamSession(recognizer_factory(asr, transcribe, limits), 16000, limits)  # doctest: +SKIP
    >>> await session.handle_text('{"type": "start", "sample_rate": 48000}')          # doctest: +SKIP
"""
from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable
from typing import Any, Callable, Optional

import torch

from speechkit.data.audio_policy import shared_policy
from speechkit.serve.audio_input import check_rate, decode_pcm
from speechkit.serve.errors import RequestError
from speechkit.serve.limits import ServeLimits

#: Longest text message: the protocol's messages are a few dozen characters; a long one is refused unparsed
#: (a megabyte of "[" would take the JSON parser down into a RecursionError).
MAX_TEXT_CHARS = 4096


class RedecodingRecognizer:
    """Streaming by re-decoding: each partial is the transcript of everything received so far.

    The audio is kept at the client's rate and converted as a whole at each decoding, exactly as a file at
    that rate is (``Pretrained.load_audio``): so the final text is the offline transcript of those samples.

    Args:
        transcribe: async (time,) waveform at the model's rate -> ``{"text", "tokens"}``.
        client_rate, model_rate: the rates of the chunks received and of the model.
        partial_every_s: seconds of new audio between two partials (bounds the cost of re-decoding).
    """

    kind = "redecoding"

    def __init__(self, transcribe: Callable[[torch.Tensor], Awaitable[dict]], client_rate: int,
                 model_rate: int, partial_every_s: float):
        self.transcribe, self.client_rate, self.model_rate = transcribe, client_rate, model_rate
        self.partial_every = max(1, int(partial_every_s * client_rate))
        self.chunks: list = []
        self.samples = 0
        self._decoded_at = 0

    async def accept(self, chunk: torch.Tensor) -> Optional[dict]:
        """Add (time,) samples at the client's rate; a new partial, or None when too little is new."""
        self.chunks.append(chunk)
        self.samples += chunk.shape[0]
        if self.samples - self._decoded_at < self.partial_every:
            return None
        self._decoded_at = self.samples
        return await self.transcribe(self._audio())

    async def finish(self) -> dict:
        """The transcript of the whole audio (the offline one)."""
        if not self.samples:
            return {"text": "", "tokens": []}
        return await self.transcribe(self._audio())

    def _audio(self) -> torch.Tensor:
        waveform = torch.cat(self.chunks)
        self.chunks = [waveform]
        return shared_policy(self.model_rate).apply(waveform, self.client_rate, "the stream")


class InterfaceRecognizer:
    """Adapts a model's streaming object (sync ``accept``/``finish`` on chunks at the model's rate) to the
    session, running it in a thread so the event loop stays free."""

    kind = "incremental"

    def __init__(self, stream):
        self.stream = stream

    async def accept(self, chunk: torch.Tensor) -> Optional[dict]:
        return _as_result(await asyncio.to_thread(self.stream.accept, chunk))

    async def finish(self) -> dict:
        final = _as_result(await asyncio.to_thread(self.stream.finish)) or {"text": "", "tokens": []}
        tokens = getattr(self.stream, "final_tokens", None)  # a streaming object that keeps its final ids
        return {**final, "tokens": list(tokens)} if tokens is not None else final


#: ``--stream-recognizer``: ``auto`` streams a model that can chunk by chunk, ``redecoding`` re-decodes for
#: every model (the final then comes from the batched offline path, at the cost of a pass over everything).
STREAM_RECOGNIZERS = ("auto", "redecoding")


def recognizer_factory(interface, transcribe, limits: ServeLimits,
                       choice: str = "auto") -> Callable[[int], Any]:
    """client rate -> a recognizer: the model's own streaming one when the model streams (chunks at any
    rate, resampled chunk by chunk) and ``choice`` is ``auto``, else re-decoding through ``transcribe``."""
    if choice not in STREAM_RECOGNIZERS:
        raise ValueError(f"stream recognizer must be one of {', '.join(STREAM_RECOGNIZERS)}, got {choice!r}")
    model_rate = int(interface.sample_rate)
    streaming = streaming_recognizer(interface) if choice == "auto" else None

    def make(rate: int):
        if streaming is not None:
            return InterfaceRecognizer(streaming.stream(sample_rate=rate))
        return RedecodingRecognizer(transcribe, rate, model_rate, limits.partial_every_s)

    return make


def streaming_recognizer(interface) -> Optional[Any]:
    """A :class:`speechkit.streaming.StreamingASR` of ``interface``, or None when its model does not stream
    (it reads the future: a bidirectional encoder, per-utterance statistics) or is no CTC recognizer."""
    from speechkit.errors import SpeechkitError
    from speechkit.pretrained import EncoderASR, EncoderDecoderASR
    from speechkit.streaming import StreamingASR

    if not isinstance(interface, EncoderASR) or isinstance(interface, EncoderDecoderASR):
        return None
    try:
        return StreamingASR(interface)
    except (SpeechkitError, KeyError, TypeError):
        return None


class StreamSession:
    """One client's stream: parses its messages, converts its audio to the model's rate, keeps its limits.

    Each ``handle_*`` returns the messages to send back (dicts); a :class:`RequestError` means the message
    was malformed (the caller sends its message and closes).
    """

    def __init__(self, make_recognizer: Callable[[int], Any], model_rate: int, limits: ServeLimits,
                 token: Optional[str] = None):
        self.make_recognizer, self.model_rate, self.limits = make_recognizer, model_rate, limits
        self.token = token  # when set, the handshake carried none: the first message must (``"token"``)
        self.client_rate = model_rate
        self.recognizer = None
        self.started = False  # a start message or audio came: the rate is fixed
        self.received = 0  # samples at the client's rate
        self.finished = False

    async def handle_text(self, text: str) -> list:
        if len(text) > MAX_TEXT_CHARS:
            raise RequestError(400, f"text message of {len(text)} characters; the protocol's messages are "
                                    f"short JSON objects (at most {MAX_TEXT_CHARS} characters)")
        try:
            message = json.loads(text)
        except (ValueError, RecursionError):
            raise RequestError(400, f"text message is not JSON: {text[:80]!r}") from None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise RequestError(400, 'a text message must be a JSON object with a "type" ("start" or "end")')
        self._check_token(message)
        kind = message["type"]
        if kind == "start":
            if self.started:
                raise RequestError(400, '"start" must come first, before any audio, and only once')
            rate = message.get("sample_rate", self.model_rate)
            if not isinstance(rate, int) or isinstance(rate, bool):
                raise RequestError(400, f'"sample_rate" must be an integer number of Hz, got {rate!r}')
            check_rate("the stream", rate, self.model_rate, self.limits)
            self.client_rate = rate
            self._begin()
            return [{"type": "ready", "sample_rate": rate, "model_sample_rate": self.model_rate,
                     "recognizer": self.recognizer.kind}]
        if kind == "end":
            if self.finished:
                raise RequestError(400, '"end" was already sent')
            self._begin()
            self.finished = True
            final = await self.recognizer.finish()
            return [{"type": "final", **final, "seconds": self.received / self.client_rate}]
        raise RequestError(400, f'unknown message type {kind!r}; expected "start" or "end"')

    async def handle_audio(self, data: bytes) -> list:
        self._check_token(None)
        if self.finished:
            raise RequestError(400, 'audio after "end"')
        self._begin()
        chunk = decode_pcm(data, "audio message")
        if chunk.numel() == 0:
            return []
        if not bool(torch.isfinite(chunk).all()):
            raise RequestError(400, "audio message holds NaN or infinite samples")
        self.received += chunk.shape[0]
        if self.received > self.limits.max_audio_seconds * self.client_rate:
            raise RequestError(413, f"the stream passed {self.limits.max_audio_seconds:g} s of audio "
                                    "(--max-audio-seconds)")
        if self.received * 4 > self.limits.max_stream_buffer_bytes:
            raise RequestError(413, f"the stream passed {self.limits.max_stream_buffer_bytes / 1e6:.1f} MB "
                                    "of audio held (--max-stream-buffer-mb)")
        partial = await self.recognizer.accept(chunk)
        if partial is None:
            return []
        return [{"type": "partial", "text": partial.get("text", ""),
                 "seconds": self.received / self.client_rate}]

    def _check_token(self, message: Optional[dict]) -> None:
        """A stream whose handshake carried no token is let in only by a first text message carrying it."""
        if self.token is None:
            return
        offered = message.get("token") if message is not None else None
        if not isinstance(offered, str) or not hmac.compare_digest(offered.encode(), self.token.encode()):
            raise RequestError(401, 'missing or wrong token: send it in the handshake (Authorization: Bearer '
                                    'TOKEN) or in the first message ({"type": "start", "token": "TOKEN"})')
        self.token = None

    def _begin(self) -> None:
        if not self.started:
            self.started = True
            self.recognizer = self.make_recognizer(self.client_rate)


def _as_result(value: Any) -> Optional[dict]:
    """A streaming object's answer (a string, a dict or an object with ``text``) as ``{"text", ...}``."""
    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, str):
        return {"text": value, "tokens": []}
    return {"text": str(getattr(value, "text", value)),
            "tokens": [int(t) for t in getattr(value, "tokens", [])]}
