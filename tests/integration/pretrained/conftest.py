"""Real HTTP servers on 127.0.0.1 for the fetching tests: a plain file server and a Hub-compatible server.

Both run in a thread of the test process on a free port and count the requests they answer, so tests can
check how many downloads really happened.
"""
from __future__ import annotations

import collections
import hashlib
import http.server
import os
import threading
import time
import urllib.parse

import pytest

from tests.helpers import download_cache


class _Server:
    """A threading HTTP server with request counters; subclasses give the handler's behaviour."""

    def __init__(self):
        self.counts = collections.Counter()  # (method, path) -> requests answered
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 (http.server's naming)
                server._count("GET", self.path)
                server.answer(self, head=False)

            def do_HEAD(self):  # noqa: N802
                server._count("HEAD", self.path)
                server.answer(self, head=True)

            def log_message(self, *args):  # keep test output quiet
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def _count(self, method, path):
        with self._lock:
            self.counts[(method, urllib.parse.unquote(path))] += 1

    def gets(self, path: str) -> int:
        return self.counts[("GET", path)]

    def send_body(self, handler, data: bytes, head: bool, headers: dict, drop_after=None, delay_s=0.0,
                  ranges: bool = False):
        start = 0
        requested = handler.headers.get("Range", "")
        if_range = handler.headers.get("If-Range")
        unchanged = if_range is None or if_range == headers.get("ETag")  # else: the whole (new) file
        if ranges and requested.startswith("bytes=") and not head and unchanged:  # resume: "bytes=N-"
            start = int(requested[len("bytes="):].split("-")[0])
            headers = {**headers, "Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"}
        handler.send_response(206 if start else 200)
        data = data[start:]
        for key, value in {**headers, "Content-Length": str(len(data))}.items():
            handler.send_header(key, value)
        handler.end_headers()
        if head:
            return
        if drop_after is not None:  # promise the whole file, send part of it, then cut the connection
            handler.wfile.write(data[:drop_after])
            handler.wfile.flush()
            handler.close_connection = True
            handler.connection.shutdown(2)
            return
        for start in range(0, len(data), 4096):
            if delay_s:
                time.sleep(delay_s)
            handler.wfile.write(data[start:start + 4096])

    def send_endless(self, handler, block: bytes, limit_s: float = 60.0):
        """A body without Content-Length that never ends (until the client hangs up, or ``limit_s``)."""
        path = urllib.parse.urlsplit(handler.path).path
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        deadline = time.monotonic() + limit_s
        try:
            while time.monotonic() < deadline:
                handler.wfile.write(block)
                self.endless_sent[path] += len(block)
        except OSError:
            pass  # the client stopped reading: what a bounded download does

    def send_stalling(self, handler, sent: int, silent_s: float = 30.0):
        """Promise a MiB, send ``sent`` bytes, then say nothing for ``silent_s``."""
        handler.send_response(200)
        handler.send_header("Content-Length", str(1 << 20))
        handler.end_headers()
        handler.wfile.write(b"x" * sent)
        handler.wfile.flush()
        handler.close_connection = True
        time.sleep(silent_s)

    def send_dripping(self, handler, every_s: float, limit_s: float = 30.0):
        """Promise a MiB and send it one byte every ``every_s``: never silent long enough to stall."""
        handler.send_response(200)
        handler.send_header("Content-Length", str(1 << 20))
        handler.send_header("ETag", '"drip"')
        handler.end_headers()
        handler.close_connection = True
        deadline = time.monotonic() + limit_s
        try:
            while time.monotonic() < deadline:
                handler.wfile.write(b"x")
                handler.wfile.flush()
                time.sleep(every_s)
        except OSError:
            pass  # the client hung up

    def send_error(self, handler, status: int, headers=None):
        handler.send_response(status)
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class FileServer(_Server):
    """Serves ``files`` (URL path -> bytes) with an ETag, and byte ranges unless ``ranges`` is False; a path
    in ``statuses`` gets that error status, any other unknown path a 404.
    ``drop_after[path] = n`` cuts the connection after n bytes; ``delay_s`` slows every 4 KiB chunk (to make
    concurrent downloads overlap); ``range_requests`` lists the ``Range`` headers received, in order; a
    request whose ``If-None-Match`` matches gets a 304 (counted in ``not_modified``) unless ``validators`` is
    False (then no ETag is sent either)."""

    def __init__(self):
        super().__init__()
        self.files = {}
        self.drop_after = {}
        self.delay_s = 0.0
        self.ranges = True
        self.range_requests = []
        self.validators = True  # send an ETag, and answer 304 to a matching If-None-Match
        self.endless = {}  # path -> a block of bytes sent again and again, without Content-Length
        self.stall_after = {}  # path -> bytes sent (of a promised MiB) before the server falls silent
        self.endless_sent = collections.Counter()  # path -> bytes of endless bodies sent
        self.not_modified = collections.Counter()  # path -> 304 answers
        self.redirects = {}  # path -> the Location of a 302 answer
        self.drip_s = {}  # path -> seconds between the single bytes of a 1 MiB body
        self.statuses = {}  # path -> an error status answered instead of the file (500, 403, ...)

    def answer(self, handler, head):
        path = urllib.parse.unquote(urllib.parse.urlsplit(handler.path).path)
        if path in self.statuses:
            return self.send_error(handler, self.statuses[path])
        if path in self.redirects:
            return self.send_error(handler, 302, {"Location": self.redirects[path]})
        if path in self.drip_s:
            return self.send_dripping(handler, self.drip_s[path])
        if path in self.endless:
            return self.send_endless(handler, self.endless[path])
        if path in self.stall_after:
            return self.send_stalling(handler, self.stall_after[path])
        if path not in self.files:
            return self.send_error(handler, 404)
        if not head:
            self.range_requests.append(handler.headers.get("Range"))
        data = self.files[path]
        etag = f'"{hashlib.sha256(data).hexdigest()}"'
        if self.validators and handler.headers.get("If-None-Match") == etag:
            self.not_modified[path] += 1
            return self.send_error(handler, 304, {"ETag": etag})
        headers = {"Content-Type": "application/octet-stream"}
        if self.validators:
            headers["ETag"] = etag
        self.send_body(handler, data, head, headers, drop_after=self.drop_after.get(path),
                       delay_s=self.delay_s, ranges=self.ranges)


class HubServer(_Server):
    """Answers the Hub's file-resolution requests: ``HEAD|GET /{repo_id}/resolve/{revision}/{filename}``.

    ``repos[repo_id][revision] = {filename: bytes}``; every revision name maps to one commit hash (sent as
    ``X-Repo-Commit``), and the ETag is the file's sha256, as the Hub does for large files.
    """

    def __init__(self):
        super().__init__()
        self.repos = {}
        self.delay_s = 0.0
        self.drops_left = 0  # how many GETs still get cut mid-file (after drop_after bytes)
        self.drop_after = 0

    @staticmethod
    def commit_of(repo_id: str, revision: str) -> str:
        return hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()

    def answer(self, handler, head):
        path = urllib.parse.unquote(urllib.parse.urlsplit(handler.path).path).lstrip("/")
        parts = path.split("/resolve/", 1)
        if len(parts) != 2 or "/" not in parts[1]:
            return self.send_error(handler, 404, {"X-Error-Code": "RepoNotFound"})
        repo_id, rest = parts
        revision, filename = rest.split("/", 1)
        if repo_id not in self.repos:
            return self.send_error(handler, 401, {"X-Error-Code": "RepoNotFound"})
        revisions = self.repos[repo_id]
        commit_names = {self.commit_of(repo_id, name): name for name in revisions}
        name = commit_names.get(revision, revision)
        if name not in revisions:
            return self.send_error(handler, 404, {"X-Error-Code": "RevisionNotFound"})
        commit = self.commit_of(repo_id, name)
        if filename not in revisions[name]:
            return self.send_error(handler, 404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit})
        data = revisions[name][filename]
        headers = {"ETag": f'"{hashlib.sha256(data).hexdigest()}"', "X-Repo-Commit": commit,
                   "Content-Type": "application/octet-stream"}
        drop = None
        if not head and self.drops_left > 0:
            self.drops_left -= 1
            drop = self.drop_after
        self.send_body(handler, data, head, headers, drop_after=drop, delay_s=self.delay_s, ranges=True)


@pytest.fixture
def file_server():
    with FileServer() as server:
        yield server


@pytest.fixture
def hub_server(monkeypatch, tmp_path):
    with HubServer() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        yield server


_isolated_cache = download_cache._isolated_cache  # autouse, shared: pytest finds it under this name


HERE = str(__import__("pathlib").Path(__file__).parent)


@pytest.fixture(scope="module")
def whisper_folder(tmp_path_factory):
    """A tiny random Whisper folder written by transformers (config.json, weights, tokenizer, generation
    config; no hyperparams.yaml)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from tests.helpers.whisper_folders import build_whisper_folder

    transformers.logging.set_verbosity_error()
    path = tmp_path_factory.mktemp("whisper-folder")
    build_whisper_folder(str(path), eos_scale=1.3, generation_overrides={"max_length": 12})
    return path


@pytest.fixture
def tiny_asr(monkeypatch):
    """The tiny test model's module (importable by name, for YAML tags and subprocesses)."""
    import importlib

    monkeypatch.syspath_prepend(HERE)
    monkeypatch.setenv("PYTHONPATH", HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return importlib.import_module("tiny_asr")
