"""Who gets in: a bearer token and the origins a browser page may call from, checked on every HTTP request
and WebSocket handshake before any route runs (pure ASGI middleware, so both kinds pass the same gate).

- Token: ``Authorization: Bearer TOKEN`` on any request, or ``?token=TOKEN`` in the URL (a browser cannot
  set headers on a WebSocket, and the page reads its token from its own URL). Compared in constant time.
  Missing or wrong: 401.
- Origin: a request a browser sends from another site's page carries ``Origin``; it is refused (403)
  unless that origin was allowed by name (``--allow-origin``). Same-origin requests (the served page) pass.
  WebSockets are not covered by the browser's CORS rules, so this check is what keeps other sites' pages
  from opening a stream.

Example:
    >>> app = AccessControl(inner, token="s3cret", allowed_origins=["https://app.example"])  # doctest: +SKIP
"""
from __future__ import annotations

import hmac
import json
import urllib.parse
from collections.abc import Iterable
from typing import Optional


class AccessControl:
    """ASGI middleware: token and origin checks, and the CORS headers of allowed origins."""

    def __init__(self, app, token: Optional[str] = None, allowed_origins: Iterable[str] = ()):
        self.app, self.token = app, token
        self.allowed_origins = {o.rstrip("/") for o in allowed_origins}

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        origin = headers.get("origin")
        cross = origin is not None and not _same_origin(origin, headers.get("host", ""))
        if cross and origin.rstrip("/") not in self.allowed_origins:
            return await _refuse(scope, receive, send, 403,
                                 f"requests from origin {origin!r} are not allowed (serve with "
                                 f"--allow-origin {origin} to allow them)")
        if scope["type"] == "http" and scope["method"] == "OPTIONS" and cross:
            return await _preflight(send, origin)  # carries no credentials by design
        if self.token is not None and not self._authorized(scope, headers):
            return await _refuse(scope, receive, send, 401, "missing or wrong token: send 'Authorization: "
                                 "Bearer TOKEN' (or ?token=TOKEN in the URL)")
        if not cross or scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_cors(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": list(message.get("headers", [])) + _cors_headers(origin)}
            await send(message)

        return await self.app(scope, receive, send_with_cors)

    def _authorized(self, scope, headers: dict) -> bool:
        offered = ""
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            offered = value.strip()
        if not offered:
            query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
            offered = (query.get("token") or [""])[0]
        return hmac.compare_digest(offered.encode(), self.token.encode())


def _same_origin(origin: str, host: str) -> bool:
    parsed = urllib.parse.urlsplit(origin)
    return parsed.scheme in ("http", "https") and parsed.netloc.lower() == host.lower()


def _cors_headers(origin: str) -> list:
    return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]


async def _preflight(send, origin: str) -> None:
    headers = _cors_headers(origin) + [(b"access-control-allow-methods", b"GET, POST, OPTIONS"),
                                       (b"access-control-allow-headers", b"Authorization, Content-Type"),
                                       (b"access-control-max-age", b"600"), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _refuse(scope, receive, send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await receive()  # the websocket.connect event comes first
    if "websocket.http.response" in scope.get("extensions", {}):  # a real HTTP answer to the handshake
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
