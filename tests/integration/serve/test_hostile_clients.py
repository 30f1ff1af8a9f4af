"""``speechkit serve`` against hostile clients, as a real process: uploads that would decode to gigabytes,
odd rates, truncated files and lying lengths, floods of headers, connections and streams, and streams that
never end. Each is refused with a 4xx JSON error or a WebSocket close code and reason, and where the attack
is about memory the server's peak resident memory (VmHWM) is read before and after."""
from __future__ import annotations

import concurrent.futures
import http.client
import io
import json
import select
import socket
import struct
import time

import numpy as np
import pytest
import soundfile
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.helpers.serve import ServerProcess, request, request_json, wait_until
from tests.integration.pretrained import tiny_asr

pytestmark = pytest.mark.slow  # a server process each (seconds to start)

MB = 1024 * 1024


def peak_rss_mb(server) -> float:
    """The server process's peak resident memory so far (VmHWM), in MB."""
    with open(f"/proc/{server.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


def silent_flac(rate: int, channels: int, seconds: float) -> bytes:
    """A FLAC of silence: a few hundred KB that declares ``rate * channels * seconds`` samples."""
    buffer = io.BytesIO()
    block = np.zeros((rate, channels), dtype=np.int16)
    with soundfile.SoundFile(buffer, "w", rate, channels, "PCM_16", format="FLAC") as handle:
        for _ in range(int(seconds)):
            handle.write(block)
    return buffer.getvalue()


def wav_header_only(rate: int, frames: int = 16000, channels: int = 1) -> bytes:
    """A 16-bit WAV of silence at any rate (soundfile refuses to write some), written field by field."""
    data = bytes(2 * frames * channels)
    fmt = struct.pack("<HHIIHH", 1, channels, rate, (rate * 2 * channels) & 0xFFFFFFFF, 2 * channels, 16)
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt
            + b"data" + struct.pack("<I", len(data)) + data)


def speech_wav(text: str = "bad cab") -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, tiny_asr.synthesize(text).numpy(), 16000, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def transcribe(server, data: bytes, **options) -> tuple:
    return request_json(f"{server.url}/v1/models/asr/transcribe", data, **options)


def port_of(server) -> int:
    return int(server.url.rsplit(":", 1)[1])


# --------------------------------------------------------------------------------- decoded-size bombs
def test_a_decoded_size_bomb_is_refused_from_its_header_without_the_memory(server):
    bomb = silent_flac(655350, 8, 59)  # ~1.2 GB of float32 once decoded
    assert len(bomb) < MB
    under_rate = silent_flac(192000, 8, 9)  # within --max-sample-rate and the 10 s, over the sample budget
    before = peak_rss_mb(server)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda data: transcribe(server, data), [bomb, bomb, under_rate]))
    grown = peak_rss_mb(server) - before
    (s1, a1), (s2, _), (s3, a3) = answers
    assert s1 == s2 == 422 and "655350 Hz" in a1["error"] and "(--max-sample-rate)" in a1["error"]
    assert s3 == 413 and "13,824,000 samples" in a3["error"] and "(--max-decoded-samples)" in a3["error"]
    assert grown < 100, f"the server's peak memory grew by {grown:.0f} MB"  # decoded: 1.2 GB each
    assert request_json(server.url + "/health")[1]["queued"]["asr"] == 0


def test_channels_beyond_the_limit_are_refused(server):
    status, answer = transcribe(server, wav_header_only(8000, 800, channels=9))
    assert status == 422 and "9 channels; the limit is 8 (--max-channels)" in answer["error"]


@pytest.mark.parametrize("rate", [16001, 192001, 2_147_483_647])
def test_odd_sample_rates_get_a_json_422(server, rate):
    status, answer = transcribe(server, wav_header_only(rate))
    assert status == 422, answer
    assert f"sample rate of {rate} Hz" in answer["error"] and answer["request_id"]


def test_a_truncated_wav_says_so(server):
    whole = speech_wav()
    status, answer = transcribe(server, whole[:len(whole) // 2 + 1])
    assert status == 422 and "is truncated: its header declares" in answer["error"], answer
    buffer = io.BytesIO()
    soundfile.write(buffer, tiny_asr.synthesize("bad cab").numpy(), 16000, format="FLAC")
    status, answer = transcribe(server, buffer.getvalue()[:len(buffer.getvalue()) // 2])
    assert status == 422 and "truncated" in answer["error"], answer


def raw_exchange(server, head: bytes, body: bytes = b"", timeout_s: float = 60.0) -> bytes:
    """Send bytes on a plain socket and read the first answer until the server closes or 2 s pass."""
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=timeout_s) as conn:
        conn.sendall(head + body)
        answer = b""
        conn.settimeout(timeout_s)
        while b"\r\n\r\n" not in answer or len(answer) < answer.find(b"\r\n\r\n") + 4 + _length(answer):
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
    return answer


def _length(answer: bytes) -> int:
    for line in answer.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def test_a_content_length_shorter_than_the_file_is_a_truncated_upload(server):
    data = speech_wav()
    head = (f"POST /v1/models/asr/transcribe HTTP/1.1\r\nHost: 127.0.0.1:{port_of(server)}\r\n"
            "Content-Type: application/octet-stream\r\nContent-Length: 100\r\n\r\n").encode()
    answer = raw_exchange(server, head, data)
    assert answer.startswith(b"HTTP/1.1 422"), answer[:200]
    assert b"is truncated" in answer


# --------------------------------------------------------------------------------- host and origin
def test_a_rebound_host_is_refused_over_http_and_websocket(server):
    port = port_of(server)
    evil = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
    status, answer = request_json(server.url + "/health", headers=evil)
    assert status == 421 and "does not answer to host 'evil.example:" in answer["error"]
    with pytest.raises(InvalidStatus) as refused:  # the page's URL names evil.example; its socket reaches us
        connect(f"ws://{evil['Host']}/v1/models/asr/stream", open_timeout=30, origin=evil["Origin"],
                sock=socket.create_connection(("127.0.0.1", port), timeout=30))
    assert refused.value.response.status_code == 421
    # The bound address and localhost are the server's own names; another origin with them is still refused.
    assert request_json(server.url + "/health", headers={"Host": f"localhost:{port}",
                                                         "Origin": f"http://localhost:{port}"})[0] == 200
    status, answer = request_json(server.url + "/health", headers={"Origin": f"http://evil.example:{port}"})
    assert status == 403 and "not allowed" in answer["error"]
    assert request_json(server.url + "/health", headers={"Origin": server.url})[0] == 200


# --------------------------------------------------------------------------------- malformed stream text
def test_a_deeply_nested_text_message_closes_with_a_reason(server):
    with connect(f"{server.ws_url}/v1/models/asr/stream", open_timeout=30, max_size=None) as ws:
        ws.send("[" * 100_000)
        error = json.loads(ws.recv(timeout=30))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert error["type"] == "error" and "100000 characters" in error["message"]
    assert closed.value.rcvd.code == 1007 and "100000 characters" in closed.value.rcvd.reason
    nested = "[" * 2000 + "]" * 2000  # short enough to parse, deep enough for the parser's recursion
    with connect(f"{server.ws_url}/v1/models/asr/stream", open_timeout=30) as ws:
        ws.send(nested)
        assert json.loads(ws.recv(timeout=30))["type"] == "error"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert closed.value.rcvd.code == 1007


def test_a_stream_at_an_odd_rate_is_refused(server):
    with connect(f"{server.ws_url}/v1/models/asr/stream", open_timeout=30) as ws:
        ws.send(json.dumps({"type": "start", "sample_rate": 16001}))
        error = json.loads(ws.recv(timeout=30))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert "16001 Hz" in error["message"] and closed.value.rcvd.code == 1007


# --------------------------------------------------------------------------------- floods
@pytest.fixture(scope="module")
def tight(folders):
    """A server with small caps on connections, streams, stream buffers, stream time and request heads; no
    partials (each would re-decode the stream so far: the memory measured is what the streams hold)."""
    with ServerProcess([f"asr={folders['asr']}", "--max-streams", "3", "--max-stream-buffer-mb", "2",
                        "--partial-every-s", "1000",
                        "--stream-max-s", "4", "--stream-idle-s", "3", "--max-connections", "12",
                        "--max-header-kb", "16", "--max-request-mb", "1",
                        "--request-head-timeout-s", "5"]) as process:
        yield process


def flood_headers(server, megabytes: int) -> bytes:
    """Send a request head of ``megabytes`` of headers (until the server stops reading); its answer."""
    pad = b"X-Pad: " + b"a" * 8000 + b"\r\n"
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=60) as conn:
        conn.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port_of(server)}\r\n".encode())
        try:
            for _ in range(megabytes * MB // len(pad)):
                conn.sendall(pad)
        except OSError:
            pass  # the server answered and closed: what follows is its answer
        answer = b""
        try:
            while chunk := conn.recv(65536):
                answer += chunk
        except OSError:
            pass
    return answer


def test_a_header_flood_gets_431_and_no_memory(tight):
    flood_headers(tight, 1)  # what the first request costs once is not what the floods hold
    before = peak_rss_mb(tight)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: flood_headers(tight, 16), range(24)))  # 384 MB of headers
    grown = peak_rss_mb(tight) - before
    answered = [a for a in answers if a]
    assert answered and all(a.startswith(b"HTTP/1.1 431") and b"--max-header-kb" in a for a in answered)
    assert grown < 100, f"the server's peak memory grew by {grown:.0f} MB"
    assert request_json(tight.url + "/health")[0] == 200


def test_a_head_sent_a_byte_at_a_time_or_not_at_all_gets_408_and_frees_the_connection(tight):
    def dribble(head: bytes, seconds: float) -> bytes:
        """Send ``head`` a byte every 0.2 s for at most ``seconds``, until the server answers; the answer."""
        with socket.create_connection(("127.0.0.1", port_of(tight)), timeout=60) as conn:
            started = time.monotonic()
            for byte in head:
                if time.monotonic() - started > seconds or select.select([conn], [], [], 0.2)[0]:
                    break  # out of time, or the server answered
                conn.sendall(bytes([byte]))
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
            return answer

    head = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port_of(tight)}\r\nX-Pad: {'a' * 200}\r\n\r\n".encode()
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        slow, silent = pool.map(lambda seconds: dribble(head, seconds), [60, 0])  # 0: send one byte only
    assert time.monotonic() - started < 45, "the server kept a connection that sent no complete head"
    for answer in (slow, silent):
        assert answer.startswith(b"HTTP/1.1 408") and b"--request-head-timeout-s" in answer, answer[:200]
    # A client that sends its head in time is not affected, and keeps its connection between requests.
    conn = http.client.HTTPConnection("127.0.0.1", port_of(tight), timeout=60)
    try:
        sockets = []
        for _ in range(2):
            conn.request("GET", "/health")
            sockets.append(conn.sock)
            answer = conn.getresponse()
            assert answer.status == 200 and json.loads(answer.read())["status"] == "ok"
        assert sockets[0] is sockets[1]  # the same connection served both
    finally:
        conn.close()


def test_connections_beyond_the_limit_get_503(tight):
    idle = [socket.create_connection(("127.0.0.1", port_of(tight)), timeout=30) for _ in range(12)]
    try:
        time.sleep(0.5)
        status, _, body = request(tight.url + "/health")
        assert status == 503, body
    finally:
        for conn in idle:
            conn.close()
    wait_until(lambda: request_json(tight.url + "/health")[0] == 200, what="the server answering again",
               output=lambda: tight.output)


def test_streams_beyond_the_limit_are_refused_with_503(tight):
    url = f"{tight.ws_url}/v1/models/asr/stream"
    with connect(url, open_timeout=30), connect(url, open_timeout=30), connect(url, open_timeout=30):
        wait_until(lambda: request_json(tight.url + "/health")[1]["open_streams"] == 3, what="three streams",
                   output=lambda: tight.output)
        with pytest.raises(InvalidStatus) as refused:
            connect(url, open_timeout=30)
        assert refused.value.response.status_code == 503
        assert b"--max-streams" in refused.value.response.body
    wait_until(lambda: request_json(tight.url + "/health")[1]["open_streams"] == 0, what="the streams freed",
               output=lambda: tight.output)


def stream_until_closed(server, megabytes: float, rate: int = 192000) -> tuple:
    """Stream silence at ``rate`` without "end" until the server closes; (close code, reason)."""
    chunk = np.zeros(200_000, dtype="<f4").tobytes()  # 0.8 MB
    with connect(f"{server.ws_url}/v1/models/asr/stream", open_timeout=30) as ws:
        ws.send(json.dumps({"type": "start", "sample_rate": rate}))
        try:
            for _ in range(int(megabytes * MB / len(chunk))):
                ws.send(chunk)
            while True:
                ws.recv(timeout=60)
        except ConnectionClosed as closed:
            return closed.rcvd.code, closed.rcvd.reason
    raise AssertionError("the stream was not closed")


def test_streams_holding_more_audio_than_the_buffer_are_closed_and_free_it(tight):
    # One short stream first: what the first stream costs once (code paths, allocator arenas; up to ~40 MB
    # under load) is not what the streams hold. A server holding the audio would grow by 300 MB.
    stream_until_closed(tight, 4)
    before = peak_rss_mb(tight)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        closes = list(pool.map(lambda _: stream_until_closed(tight, 100), range(3)))
    grown = peak_rss_mb(tight) - before
    assert all(code == 1009 and "--max-stream-buffer-mb" in reason for code, reason in closes), closes
    assert grown < 100, f"the server's peak memory grew by {grown:.0f} MB"


def test_a_stream_is_closed_after_its_total_time(tight):
    with connect(f"{tight.ws_url}/v1/models/asr/stream", open_timeout=30) as ws:
        started = time.monotonic()
        with pytest.raises(ConnectionClosed) as closed:
            while time.monotonic() - started < 60:
                ws.send(np.zeros(160, dtype="<f4").tobytes())  # never idle, never long
                time.sleep(0.5)
    assert closed.value.rcvd.code == 1008 and "(--stream-max-s)" in closed.value.rcvd.reason
