"""Who gets in: the host a request names, a bearer token and the origins a browser page may call from,
checked on every HTTP request and WebSocket handshake before any route runs (pure ASGI middleware, so both
kinds pass the same gate).

- Host: the ``Host`` header must name the address the connection came in on (``scope["server"]``: the
  socket's own address and port, never anything the client says), ``localhost`` for a loopback address, or
  a name given with ``--allow-host``; otherwise 421. A page on evil.example whose name was rebound to
  127.0.0.1 (DNS rebinding) sends ``Host: evil.example``, and is refused.
- Origin: a request a browser sends from a page carries ``Origin``; it passes when it is this server's own
  address (the same forms as the host) or was allowed by name (``--allow-origin``); otherwise 403. It is
  never compared with the Host header, which the page's author controls. WebSockets are not covered by the
  browser's CORS rules, so this check is what keeps other sites' pages from opening a stream.
- Token: ``Authorization: Bearer TOKEN`` on any request, or ``?token=TOKEN`` in the URL (the page reads its
  token from its own URL). Compared in constant time; missing or wrong: 401. A WebSocket handshake without
  one is let through marked ``scope["state"]["token_pending"]``: its first message must carry the token
  (browsers cannot set headers on a WebSocket, and a token in the first message stays out of URLs).

Example:
    >>> app = AccessControl(inner, token="s3cret", allowed_origins=["https://app.example"])  # doctest: +SKIP
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import urllib.parse
from collections.abc import Iterable
from typing import Optional


class AccessControl:
    """ASGI middleware: token and origin checks, and the CORS headers of allowed origins."""

    def __init__(self, app, token: Optional[str] = None, allowed_origins: Iterable[str] = (),
                 allowed_hosts: Iterable[str] = ()):
        self.app, self.token = app, token
        self.allowed_origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.allowed_hosts = {h.lower() for h in allowed_hosts}

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        own = own_hosts(scope.get("server"))
        host = headers.get("host", "").lower()
        if host not in own and _hostname(host) not in self.allowed_hosts:
            return await _refuse(scope, receive, send, 421,
                                 f"this server does not answer to host {host!r} (serve with --allow-host "
                                 f"{_hostname(host) or 'NAME'} to name it)")
        origin = headers.get("origin")
        cross = origin is not None and _origin_host(origin) not in own
        if cross and origin.rstrip("/").lower() not in self.allowed_origins:
            return await _refuse(scope, receive, send, 403,
                                 f"requests from origin {origin!r} are not allowed (serve with "
                                 f"--allow-origin {origin} to allow them)")
        if scope["type"] == "http" and scope["method"] == "OPTIONS" and cross:
            return await _preflight(send, origin)  # carries no credentials by design
        if self.token is not None and not self._authorized(scope, headers):
            if scope["type"] == "websocket" and not self._offered(scope, headers):
                # No token in the handshake: the stream's first message must carry it.
                scope.setdefault("state", {})["token_pending"] = True
                return await self.app(scope, receive, send)
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
        return hmac.compare_digest(self._offered(scope, headers).encode(), self.token.encode())

    @staticmethod
    def _offered(scope, headers: dict) -> str:
        """The token a request carries ("" when none)."""
        offered = ""
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            offered = value.strip()
        if not offered:
            query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
            offered = (query.get("token") or [""])[0]
        return offered


def own_hosts(server) -> set:
    """The ``host[:port]`` forms naming the address a connection came in on: ``server`` is the ASGI
    scope's ``(address, port)`` of the accepting socket. A loopback address may also be called
    ``localhost`` (no DNS answer can rebind that name); the default port of http may be left out."""
    if not server:
        return set()
    address, port = str(server[0]).lower(), server[1]
    names = [f"[{address}]" if ":" in address else address]
    try:
        if ipaddress.ip_address(address).is_loopback:
            names.append("localhost")
    except ValueError:
        pass
    forms = {f"{name}:{port}" for name in names}
    if port == 80:
        forms |= set(names)
    return forms


def _hostname(host: str) -> str:
    """The name part of a ``host[:port]`` header value."""
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _origin_host(origin: str) -> str:
    """``host[:port]`` of an http(s) origin; "" for anything else (``null``, other schemes)."""
    parsed = urllib.parse.urlsplit(origin.strip())
    return parsed.netloc.lower() if parsed.scheme in ("http", "https") else ""


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
