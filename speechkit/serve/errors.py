"""The error a request gets: an HTTP status and a message naming what is wrong with the request.

Example:
    >>> error = RequestError(413, "upload is 30.0 MB; the limit is 20.0 MB (--max-request-mb)")
    >>> error.status
    413
"""
from __future__ import annotations

from speechkit.errors import SpeechkitError


class RequestError(SpeechkitError):
    """A request the server refuses (4xx) or cannot answer now (503); ``status`` is the HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = int(status)
        self.message = message
