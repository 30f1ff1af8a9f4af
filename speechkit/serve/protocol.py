"""The server's HTTP parser and log redaction: the parts of uvicorn's behaviour ``speechkit serve`` bounds.

- :func:`bounded_http_protocol`: uvicorn's h11 parser with the request head capped in size
  (``--max-header-kb``): a client sending megabytes of headers gets 431 (JSON) once it passes the cap,
  instead of the server buffering all of it (httptools, uvicorn's faster parser, has no such cap); and in
  time (``--request-head-timeout-s``): a connection that has not sent a complete head that long after
  opening or after its previous response gets 408 (JSON) and is closed, so clients dribbling a head a byte
  at a time (or sending nothing) cannot hold every connection slot.
- :class:`RedactTokens`: a logging filter taking tokens out of every record (uvicorn logs a WebSocket's
  path with its query string, ``?token=`` included).

Example:
    >>> record = logging.LogRecord("uvicorn.error", logging.INFO, "", 0, '%s - "WebSocket %s" [accepted]',
    ...                            ("127.0.0.1:5", "/v1/models/asr/stream?token=abc&x=1"), None)
    >>> RedactTokens("abc").filter(record), record.getMessage()
    (True, '127.0.0.1:5 - "WebSocket /v1/models/asr/stream?token=[redacted]&x=1" [accepted]')
"""
from __future__ import annotations

import json
import logging
import re
from typing import Optional

TOKEN_IN_QUERY = re.compile(r"(token=)[^&\s\"']*", re.IGNORECASE)
BEARER = re.compile(r"(bearer\s+)\S+", re.IGNORECASE)


class RedactTokens(logging.Filter):
    """Rewrites a record's message with ``token=...``, ``Bearer ...`` and the token itself redacted; attach
    it to the handlers, so records of every logger (uvicorn's too) pass through it."""

    def __init__(self, token: Optional[str] = None):
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = BEARER.sub(r"\1[redacted]", TOKEN_IN_QUERY.sub(r"\1[redacted]", message))
        if self.token:
            redacted = redacted.replace(self.token, "[redacted]")
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def bounded_http_protocol(max_header_bytes: int, head_timeout_s: Optional[float] = None):
    """uvicorn's h11 protocol class answering 431 (JSON) to a request head over ``max_header_bytes`` and
    408 (JSON) to one not complete ``head_timeout_s`` after the connection opened or its previous response
    ended; pass it as ``uvicorn.Config(http=...)`` with ``h11_max_incomplete_event_size=max_header_bytes``."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11Protocol(H11Protocol):
        head_timer = None
        head_timed_out = False

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._wait_for_head()

        def data_received(self, data: bytes) -> None:
            if self.head_timed_out:
                return  # answered 408: what still arrives is dropped until the connection closes
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # a request head arrived (or the parser failed)
                self._cancel_head_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._wait_for_head()  # the next request's head: the same limit again

        def connection_lost(self, exc) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

        def _wait_for_head(self) -> None:
            self._cancel_head_timer()
            if head_timeout_s:
                self.head_timer = self.loop.call_later(head_timeout_s, self._head_timed_out)

        def _cancel_head_timer(self) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
                self.head_timer = None

        def _head_timed_out(self) -> None:
            self.head_timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            # h11 sends no response before a request, so these bytes are written as they are.
            body = json.dumps({"error": f"no complete request head within {head_timeout_s:g} s "
                                        "(--request-head-timeout-s)"}).encode()
            self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                                 b"connection: close\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
            # Half-close, then close a moment later: closing at once, while the client still sends, would
            # answer its next bytes with a reset that can destroy the 408 before the client reads it.
            self.head_timed_out = True
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self.loop.call_later(1.0, self.transport.close)

        def send_400_response(self, msg: str) -> None:
            if len(self.conn.trailing_data[0]) <= max_header_bytes:
                return super().send_400_response(msg)
            body = json.dumps({"error": f"the request head is larger than the limit of "
                                        f"{max_header_bytes // 1024} KB (--max-header-kb)"}).encode()
            headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
            for event in (h11.Response(status_code=431, headers=headers, reason=b"Request Header Fields Too "
                                       b"Large"), h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event))
            self.transport.close()

    return BoundedH11Protocol
