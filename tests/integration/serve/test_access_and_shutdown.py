"""Who gets in (127.0.0.1 by default, a token for any other address, named origins only) and how a server
stops (SIGTERM lets the requests in flight finish) or says it is busy (503)."""
from __future__ import annotations

import concurrent.futures
import functools
import http.server
import io
import json
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
import soundfile
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.helpers.processes import clean_env
from tests.helpers.serve import ServerProcess, request, request_json, wait_until
from tests.integration.pretrained import tiny_asr

pytestmark = pytest.mark.slow  # a server process each (seconds to start)

TOKEN = "t0ken-for-the-serve-tests-3f9a"


def speech(text: str = "bad") -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, tiny_asr.synthesize(text).numpy(), 16000, format="WAV")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def guarded(folders, tmp_path_factory):
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(TOKEN + "\n")
    with ServerProcess([f"asr={folders['asr']}", "--token-file", str(token_file), "--allow-origin",
                        "http://app.example:3000", "--allow-host", "speech.lan"]) as process:
        yield process


def test_binds_loopback_by_default(guarded):
    assert guarded.url.startswith("http://127.0.0.1:")


def test_another_address_without_a_token_is_refused(folders):
    done = subprocess.run([sys.executable, "-m", "speechkit", "serve", str(folders["asr"]), "--host",
                           "0.0.0.0", "--port", "0"], capture_output=True, text=True, env=clean_env(),
                          timeout=120)
    assert done.returncode == 1
    assert "--host 0.0.0.0 serves beyond this machine: give --token-file" in done.stderr


def test_every_http_request_needs_the_token(guarded):
    url = guarded.url + "/v1/models/asr/transcribe"
    for headers in ({}, {"Authorization": "Bearer wrong-token-of-some-length"}, {"Authorization": TOKEN}):
        status, answer = request_json(url, speech(), headers=headers)
        assert status == 401 and "missing or wrong token" in answer["error"]
    for path in ("/health", "/", "/v1/models", "/openapi.json"):
        assert request(guarded.url + path)[0] == 401
    status, answer = request_json(url, speech(), headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and answer["text"] == "bad"
    assert request(f"{guarded.url}/?token={TOKEN}")[0] == 200  # the page, opened from a link with its token


def test_every_websocket_needs_the_token(guarded):
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{guarded.ws_url}/v1/models/asr/stream?token=wrong-token-of-some-length", open_timeout=30)
    assert refused.value.response.status_code == 401  # none at all: the first message must carry it (below)
    for options in ({"additional_headers": {"Authorization": f"Bearer {TOKEN}"}}, {}):
        url = f"{guarded.ws_url}/v1/models/asr/stream" + ("" if options else f"?token={TOKEN}")
        with connect(url, open_timeout=30, **options) as socket:
            socket.send(tiny_asr.synthesize("cab").numpy().astype("<f4").tobytes())
            socket.send('{"type": "end"}')
            final = json.loads(socket.recv(timeout=30))
            assert final["type"] == "final" and final["text"] == "cab"


def test_a_websocket_may_carry_its_token_in_the_first_message(guarded):
    url = f"{guarded.ws_url}/v1/models/asr/stream"
    with connect(url, open_timeout=30) as socket:
        socket.send(json.dumps({"type": "start", "sample_rate": 16000, "token": TOKEN}))
        assert json.loads(socket.recv(timeout=30))["type"] == "ready"
        socket.send(tiny_asr.synthesize("cab").numpy().astype("<f4").tobytes())
        socket.send('{"type": "end"}')
        assert json.loads(socket.recv(timeout=30))["text"] == "cab"
    for first in (json.dumps({"type": "start", "token": "wrong-token-of-some-length"}),
                  tiny_asr.synthesize("cab").numpy().astype("<f4").tobytes()):
        with connect(url, open_timeout=30) as socket:
            socket.send(first)
            error = json.loads(socket.recv(timeout=30))
            with pytest.raises(ConnectionClosed) as closed:
                socket.recv(timeout=30)
        assert "missing or wrong token" in error["message"] and "text" not in error
        assert closed.value.rcvd.code == 1008


def test_the_token_never_reaches_the_log(guarded):
    with connect(f"{guarded.ws_url}/v1/models/asr/stream?token={TOKEN}", open_timeout=30) as socket:
        socket.send('{"type": "end"}')
        socket.recv(timeout=30)
    request(f"{guarded.url}/health?token={TOKEN}")
    wait_until(lambda: "token=[redacted]" in guarded.output, what="the WebSocket's line in the log",
               output=lambda: guarded.output)
    assert TOKEN not in guarded.output


def test_a_configured_host_name_is_answered(guarded):
    port = guarded.url.rsplit(":", 1)[1]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert request(guarded.url + "/health", headers={**auth, "Host": f"speech.lan:{port}"})[0] == 200
    status, answer = request_json(guarded.url + "/health", headers={**auth, "Host": f"other.lan:{port}"})
    assert status == 421 and "--allow-host other.lan" in answer["error"]


def test_cross_origin_requests_are_refused_unless_named(guarded):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    status, answer = request_json(guarded.url + "/health", headers={**auth, "Origin": "http://evil.example"})
    assert status == 403 and "origin 'http://evil.example' are not allowed" in answer["error"]
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{guarded.ws_url}/v1/models/asr/stream?token={TOKEN}", open_timeout=30,
                origin="http://evil.example")
    assert refused.value.response.status_code == 403
    status, headers, _ = request(guarded.url + "/health", headers={**auth, "Origin": "http://app.example:3000"})
    assert status == 200 and headers["access-control-allow-origin"] == "http://app.example:3000"
    status, headers, _ = request(guarded.url + "/v1/models/asr/transcribe", method="OPTIONS",
                                 headers={"Origin": "http://app.example:3000",
                                          "Access-Control-Request-Method": "POST"})
    assert status == 204 and "Authorization" in headers["access-control-allow-headers"]
    same_origin = guarded.url  # the served page's own requests
    assert request(guarded.url + "/health", headers={**auth, "Origin": same_origin})[0] == 200


def test_sigterm_finishes_the_requests_in_flight_closes_streams_and_exits_0(folders):
    with ServerProcess([f"slow={folders['slow']}"]) as process:
        with connect(f"{process.ws_url}/v1/models/slow/stream", open_timeout=30) as socket, \
                concurrent.futures.ThreadPoolExecutor(2) as pool:
            socket.send(np.zeros(800, dtype="<f4").tobytes())  # too short for a partial: the stream idles
            answers = [pool.submit(request_json, f"{process.url}/v1/models/slow/transcribe", speech(text))
                       for text in ("bad", "cafe")]

            def all_arrived():
                health = request_json(process.url + "/health")[1]
                return health["queued"]["slow"] + health["running"]["slow"] == 2 and health["open_streams"]

            wait_until(all_arrived, what="both requests and the stream in the server",
                       output=lambda: process.output)
            code = process.stop(signal.SIGTERM)
            results = [future.result(timeout=60) for future in answers]
            with pytest.raises(ConnectionClosed) as closed:
                socket.recv(timeout=30)
    assert code == 0, process.output
    assert [r[0] for r in results] == [200, 200] and [r[1]["text"] for r in results] == ["bad", "cafe"]
    assert closed.value.rcvd.code == 1012  # "service restart": the client may reconnect later
    assert "Shutting down" in process.output


def test_a_full_queue_answers_503_at_once(folders):
    with ServerProcess([f"slow={folders['slow']}", "--queue-size", "1", "--max-batch-items", "1"]) as process:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: request_json(f"{process.url}/v1/models/slow/transcribe",
                                                           speech()), range(4)))
    statuses = sorted(status for status, _ in results)
    assert 200 in statuses and 503 in statuses, results
    busy = next(answer for status, answer in results if status == 503)
    assert "requests waiting (--queue-size)" in busy["error"]
    assert np.all([a["text"] == "bad" for s, a in results if s == 200])


class QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_a_remote_model_folder_is_vetted_by_the_allowlist(folders, tmp_path):
    """A folder served from a URL goes through the same YAML allowlist as ``from_hparams``: refused at
    start-up until the caller allows its classes by name."""
    files = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                            functools.partial(QuietFiles, directory=str(folders["asr"])))
    threading.Thread(target=files.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{files.server_address[1]}"
    env = {"SPEECHKIT_CACHE": str(tmp_path / "cache"), "NO_PROXY": "127.0.0.1,localhost",
           "no_proxy": "127.0.0.1,localhost"}
    try:
        refused = subprocess.run([sys.executable, "-m", "speechkit", "serve", f"asr={url}", "--port", "0"],
                                 capture_output=True, text=True, env=clean_env(**env), timeout=120)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "tests.helpers.job_models.SlowToneEncoder" in refused.stderr, refused.stderr
        allowed = ["--allow", "tests.helpers.job_models.SlowToneEncoder", "--allow",
                   "tests.integration.pretrained.tiny_asr.CharTokenizer"]
        with ServerProcess([f"asr={url}", *allowed], env=env) as process:
            status, answer = request_json(process.url + "/v1/models/asr/transcribe", speech("fade"))
        assert status == 200 and answer["text"] == "fade"
    finally:
        files.shutdown()
        files.server_close()
