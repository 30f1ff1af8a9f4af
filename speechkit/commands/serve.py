"""``speechkit serve``: serve model folders over HTTP and WebSocket, with a web page at ``/``.

Example::

    speechkit serve results/asr-model sep=results/separator-model --port 8000
    speechkit: serving asr-model (asr), sep (separation) on http://127.0.0.1:8000

It binds 127.0.0.1 unless told otherwise; any other address needs ``--token-file``. Needs the ``serve``
extra (``pip install speechkit[serve]``). See docs/serve.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import logging
import pathlib
import signal
import sys

from speechkit.commands.model_source import add_model_source_arguments, from_hparams_options, model_source
from speechkit.errors import RunOptionsError

MIN_TOKEN_CHARS = 16


class ServeLimitsDefaults:
    """The defaults of :class:`speechkit.serve.limits.ServeLimits`, repeated here so that ``--help`` does not
    import the server (its import needs the serve extra); a unit test keeps the two equal."""

    max_decoded_samples = 60 * 48000 * 2
    max_channels = 8
    max_sample_rate = 192000
    max_header_bytes = 64 * 1024
    request_head_timeout_s = 10.0
    max_connections = 256
    max_streams = 32
    max_stream_buffer_bytes = 16_000_000
    stream_max_s = 600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("models", nargs="+", metavar="MODEL",
                        help="Model folder (local path, Hub repo id or http(s) URL), served under its "
                             "folder's name, or NAME=SOURCE to choose the name.")
    # one --savedir cannot hold several models: a remote model lands in the cache (--cache-dir)
    add_model_source_arguments(parser, model=None, savedir=None)
    parser.add_argument("--host", default="127.0.0.1", help="Address to bind (default: 127.0.0.1; any "
                        "non-loopback address requires --token-file).")
    parser.add_argument("--port", type=int, default=8000, help="Port (default: 8000; 0 picks a free one).")
    parser.add_argument("--token-file", default=None, help="File holding the token every request must carry "
                        f"(Authorization: Bearer TOKEN); at least {MIN_TOKEN_CHARS} characters.")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="An origin (scheme://host[:port]) whose pages may call this server "
                             "(repeatable); other sites' pages are refused.")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="A host name requests may address this server by (repeatable), besides its "
                             "bound address (and localhost on a loopback address): e.g. the name a reverse "
                             "proxy forwards.")
    parser.add_argument("--threads", type=int, default=None, help="Torch threads (default: torch's choice).")
    parser.add_argument("--max-request-mb", type=float, default=20.0, help="Largest request body in MB.")
    parser.add_argument("--max-audio-seconds", type=float, default=60.0,
                        help="Longest audio of one request or stream.")
    parser.add_argument("--max-decoded-samples", type=int, default=ServeLimitsDefaults.max_decoded_samples,
                        help="Most samples (frames x channels) one upload may decode to, checked on its "
                             "header before decoding.")
    parser.add_argument("--max-channels", type=int, default=ServeLimitsDefaults.max_channels,
                        help="Most channels of an upload.")
    parser.add_argument("--max-sample-rate", type=int, default=ServeLimitsDefaults.max_sample_rate,
                        help="Highest sample rate of an upload or stream, in Hz.")
    parser.add_argument("--max-header-kb", type=float, default=ServeLimitsDefaults.max_header_bytes / 1024,
                        help="Largest request head (request line and headers) in KB; larger gets 431.")
    parser.add_argument("--request-head-timeout-s", type=float,
                        default=ServeLimitsDefaults.request_head_timeout_s,
                        help="Longest a connection may take to send a complete request head (from its "
                             "opening or its previous response); slower gets 408 and is closed.")
    parser.add_argument("--max-connections", type=int, default=ServeLimitsDefaults.max_connections,
                        help="Open connections beyond which new requests get 503.")
    parser.add_argument("--max-streams", type=int, default=ServeLimitsDefaults.max_streams,
                        help="Open WebSocket streams beyond which a new one gets 503.")
    parser.add_argument("--max-stream-buffer-mb", type=float,
                        default=ServeLimitsDefaults.max_stream_buffer_bytes / 1e6,
                        help="Most audio one stream may hold, in MB of float32 at the client's rate.")
    parser.add_argument("--stream-max-s", type=float, default=ServeLimitsDefaults.stream_max_s,
                        help="Longest a stream may stay open, in seconds.")
    parser.add_argument("--max-batch-seconds", type=float, default=64.0,
                        help="Most audio seconds in one batched forward pass.")
    parser.add_argument("--max-batch-items", type=int, default=8,
                        help="Most requests in one batch (1 serves one request at a time; default 8 suits a "
                             "CPU, raise it on a GPU).")
    parser.add_argument("--max-wait-ms", type=float, default=10.0,
                        help="How long a batch waits for more requests when others are queued (a request "
                             "alone never waits).")
    parser.add_argument("--queue-size", type=int, default=64,
                        help="Requests waiting per model beyond which new ones get 503.")
    parser.add_argument("--partial-every-s", type=float, default=0.25,
                        help="New stream audio (seconds) between two partial transcripts.")
    parser.add_argument("--stream-idle-s", type=float, default=60.0,
                        help="A stream silent for this long is closed.")
    parser.add_argument("--stream-recognizer", choices=("auto", "redecoding"), default="auto",
                        help="auto: a model that streams is run chunk by chunk (any client rate), others "
                             "re-decode; redecoding: every stream re-decodes all its audio per partial.")
    parser.add_argument("--shutdown-timeout-s", type=int, default=30,
                        help="On SIGTERM, how long requests in flight may take to finish.")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path, host: str):
    """The token of ``--token-file`` (None without one); refuses a non-loopback ``host`` without a token."""
    if path is None:
        if not is_loopback(host):
            raise RunOptionsError(f"--host {host} serves beyond this machine: give --token-file FILE (a "
                                  f"secret of at least {MIN_TOKEN_CHARS} characters every request must "
                                  "carry)")
        return None
    try:
        token = pathlib.Path(path).read_text().strip()
    except OSError as error:
        raise RunOptionsError(f"--token-file {path}: cannot read it ({error.strerror})") from None
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise RunOptionsError(f"--token-file {path}: the token must be at least {MIN_TOKEN_CHARS} characters "
                              "without spaces")
    return token


def run(args: argparse.Namespace) -> int:
    token = read_token(args.token_file, args.host)  # before the slow imports: a refusal comes at once
    try:
        import uvicorn

        from speechkit.serve.app import create_app
    except ImportError as error:
        raise RunOptionsError(f"speechkit serve needs the 'serve' extra (pip install 'speechkit[serve]'): "
                              f"{error}") from None
    import torch

    from speechkit.serve.limits import ServeLimits
    from speechkit.serve.models import load_models, parse_model_spec
    from speechkit.serve.protocol import RedactTokens, bounded_http_protocol

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # every logger's records, uvicorn's included, pass here
        handler.addFilter(RedactTokens(token))
    try:
        limits = ServeLimits(max_request_bytes=int(args.max_request_mb * 1e6),
                             max_audio_seconds=args.max_audio_seconds,
                             max_decoded_samples=args.max_decoded_samples, max_channels=args.max_channels,
                             max_sample_rate=args.max_sample_rate,
                             max_header_bytes=int(args.max_header_kb * 1024),
                             request_head_timeout_s=args.request_head_timeout_s,
                             max_connections=args.max_connections, max_streams=args.max_streams,
                             max_stream_buffer_bytes=int(args.max_stream_buffer_mb * 1e6),
                             stream_max_s=args.stream_max_s,
                             max_batch_seconds=args.max_batch_seconds,
                             max_batch_items=args.max_batch_items, max_wait_ms=args.max_wait_ms,
                             queue_size=args.queue_size, partial_every_s=args.partial_every_s,
                             stream_idle_s=args.stream_idle_s)
    except ValueError as error:
        raise RunOptionsError(str(error)) from None
    if args.threads:
        torch.set_num_threads(args.threads)
    specs = [parse_model_spec(text) for text in args.models]
    specs = [dataclasses.replace(spec, source=model_source(args, spec.source)) for spec in specs]
    models = load_models(specs, device=args.device, **from_hparams_options(args))
    app = create_app(models, limits, token=token, allowed_origins=args.allow_origin,
                     allowed_hosts=args.allow_host, stream_recognizer=args.stream_recognizer)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_config=None, access_log=False,
                            log_level=args.log_level, lifespan="on",
                            http=bounded_http_protocol(limits.max_header_bytes,
                                                       limits.request_head_timeout_s),
                            h11_max_incomplete_event_size=limits.max_header_bytes,
                            limit_concurrency=limits.max_connections,
                            ws_max_size=min(limits.max_request_bytes, limits.max_stream_buffer_bytes) + 1024,
                            timeout_graceful_shutdown=args.shutdown_timeout_s)
    described = ", ".join(f"{name} ({model.kind})" for name, model in models.items())
    server = announcing_server(config, described)
    # uvicorn raises the signal again once it has shut down gracefully; with these handlers in place that
    # second delivery only asks the (stopped) server to stop, so a SIGTERM ends in exit status 0.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, server.handle_exit)
    server.run()
    return 0 if server.started else 1


def announcing_server(config, described: str):
    """uvicorn's server, printing the address really bound (``--port 0`` picks one) once it listens: the
    line a script or test waits for."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets=None):
            await super().startup(sockets)
            if self.started:
                host, port = self.servers[0].sockets[0].getsockname()[:2]
                host = f"[{host}]" if ":" in host else host
                print(f"speechkit: serving {described} on http://{host}:{port}", flush=True)

    return Server(config)
