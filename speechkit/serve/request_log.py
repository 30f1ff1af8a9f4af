"""One id per request, in the ``X-Request-ID`` answer header and in the server's log line of that request,
so a user who got a 500 can hand over an id that finds the traceback.

Example:
    >>> app = RequestLog(inner_app)  # doctest: +SKIP
    # log: request 3f2a9c1e0b7d POST /v1/models/asr/transcribe -> 200 in 41.2 ms
"""
from __future__ import annotations

import logging
import time
import uuid

logger = logging.getLogger("speechkit.serve")


def new_request_id() -> str:
    return uuid.uuid4().hex[:12]


class RequestLog:
    """ASGI middleware: gives each request ``scope["state"]["request_id"]`` and logs one line when done (the
    path only: a ``?token=`` never reaches the log)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        request_id = new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        started, status = time.perf_counter(), {"code": None}

        async def send_with_id(message):
            if message["type"] in ("http.response.start", "websocket.http.response.start"):
                status["code"] = message["status"]
                message = {**message, "headers": list(message.get("headers", []))
                           + [(b"x-request-id", request_id.encode())]}
            elif message["type"] == "websocket.accept":
                status["code"] = 101
            elif message["type"] == "websocket.close" and status["code"] is None:
                status["code"] = f"closed {message.get('code', 1000)}"
            await send(message)

        method = scope.get("method", "WS")
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            logger.info("request %s %s %s -> %s in %.1f ms", request_id, method, scope["path"],
                        status["code"], (time.perf_counter() - started) * 1000)
