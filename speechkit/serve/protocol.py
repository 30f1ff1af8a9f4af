"""The server's HTTP parser and log redaction: the parts of uvicorn's behaviour ``speechkit serve`` bounds.

- :func:`bounded_http_protocol`: uvicorn's h11 parser with the request head capped
  (``--max-header-kb``): a client sending megabytes of headers gets 431 (JSON) once it passes the cap,
  instead of the server buffering all of it (httptools, uvicorn's faster parser, has no such cap).
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


def bounded_http_protocol(max_header_bytes: int):
    """uvicorn's h11 protocol class answering 431 (JSON) to a request head over ``max_header_bytes``; pass
    it as ``uvicorn.Config(http=...)`` with ``h11_max_incomplete_event_size=max_header_bytes``."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11Protocol(H11Protocol):
        def send_400_response(self, msg: str) -> None:
            if len(self.conn.trailing_data[0]) <= max_header_bytes:
                return super().send_400_response(msg)
            import h11

            body = json.dumps({"error": f"the request head is larger than the limit of "
                                        f"{max_header_bytes // 1024} KB (--max-header-kb)"}).encode()
            headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
            for event in (h11.Response(status_code=431, headers=headers, reason=b"Request Header Fields Too "
                                       b"Large"), h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event))
            self.transport.close()

    return BoundedH11Protocol
