"""The streaming WebSocket of ``speechkit serve``, with a real client: partials while audio arrives, a final
transcript equal to the offline one, a clear error and close code for every malformed message, and the
state of a client that vanishes freed."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
import soundfile
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from speechkit.data import audio
from tests.helpers.serve import request_json, synthesize_held, wait_until
from tests.integration.pretrained import tiny_asr

pytestmark = pytest.mark.slow  # a server process each (seconds to start)


def offline(server, waveform, rate: int, model: str = "asr") -> str:
    buffer = io.BytesIO()
    soundfile.write(buffer, np.asarray(waveform, dtype=np.float32), rate, format="WAV", subtype="FLOAT")
    status, answer = request_json(f"{server.url}/v1/models/{model}/transcribe", buffer.getvalue())
    assert status == 200, answer
    return answer["text"]


def stream(server, waveform, rate=None, chunk: int = 1600, model: str = "asr") -> list:
    """Send ``waveform`` in chunks, then "end"; every message the server sent, until it closed."""
    messages = []
    with connect(f"{server.ws_url}/v1/models/{model}/stream", open_timeout=30) as socket:
        if rate is not None:
            socket.send(json.dumps({"type": "start", "sample_rate": rate}))
        samples = np.asarray(waveform, dtype="<f4")
        for start in range(0, len(samples), chunk):
            socket.send(samples[start:start + chunk].tobytes())
        socket.send(json.dumps({"type": "end"}))
        try:
            while True:
                messages.append(json.loads(socket.recv(timeout=60)))
        except ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == 1000, closed
    return messages


def test_partials_grow_and_the_final_equals_the_offline_transcript(server):
    speech = tiny_asr.synthesize("bad cab face dead egg beef")
    messages = stream(server, speech.numpy())
    partials = [m["text"] for m in messages if m["type"] == "partial"]
    assert messages[-1]["type"] == "final" and len(partials) >= 2
    assert messages[-1]["text"] == offline(server, speech, 16000) == "bad cab face dead egg beef"
    assert all(messages[-1]["text"].startswith(p.rstrip()) for p in partials)  # each partial a prefix
    assert messages[-1]["seconds"] == pytest.approx(len(speech) / 16000)


def test_a_stream_at_another_rate_is_converted_as_the_file_would_be(server):
    at_44k = audio.resample(synthesize_held("bad face"), 16000, 44100).numpy()
    messages = stream(server, at_44k, rate=44100, chunk=4410)
    assert messages[0] == {"type": "ready", "sample_rate": 44100, "model_sample_rate": 16000,
                           "recognizer": "redecoding"}
    assert messages[-1]["text"] == offline(server, at_44k, 44100) == "bad face"


@pytest.mark.parametrize("messages, code, words", [
    (["not json"], 1007, "not JSON"),
    (['{"kind": "start"}'], 1007, '"type"'),
    (['{"type": "pause"}'], 1007, "unknown message type 'pause'"),
    (['{"type": "start", "sample_rate": 12}'], 1007, 'the stream has a sample rate of 12 Hz'),
    (['{"type": "start", "sample_rate": "48k"}'], 1007, '"sample_rate" must be'),
    ([b"\x00\x00\x80"], 1007, "not a whole number of float32 samples"),
    ([np.array([0.1, np.nan], dtype="<f4").tobytes()], 1007, "NaN or infinite"),
    ([b"\0" * 40, '{"type": "start", "sample_rate": 8000}'], 1007, '"start" must come first'),
    ([np.zeros(16000 * 11, dtype="<f4").tobytes()], 1009, "passed 10 s of audio"),
])
def test_malformed_messages_get_an_error_and_a_close_code(server, messages, code, words):
    with connect(f"{server.ws_url}/v1/models/asr/stream", open_timeout=30) as socket:
        for message in messages:
            socket.send(message)
        answer = json.loads(socket.recv(timeout=30))
        assert answer["type"] == "error" and words in answer["message"], answer
        with pytest.raises(ConnectionClosed) as closed:
            socket.recv(timeout=30)
    assert closed.value.rcvd.code == code
    assert stream(server, tiny_asr.synthesize("add").numpy())[-1]["text"] == "add"  # others still served


def test_unknown_model_and_wrong_kind_refuse_the_handshake(server):
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{server.ws_url}/v1/models/nope/stream", open_timeout=30)
    assert refused.value.response.status_code == 404
    assert b"no model named 'nope'" in refused.value.response.body
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{server.ws_url}/v1/models/sep/stream", open_timeout=30)
    assert refused.value.response.status_code == 400


def test_a_client_that_disconnects_mid_stream_frees_its_state(server):
    with connect(f"{server.ws_url}/v1/models/asr/stream", open_timeout=30) as socket:
        socket.send(tiny_asr.synthesize("bad").numpy().astype("<f4").tobytes())
        wait_until(lambda: request_json(server.url + "/health")[1]["open_streams"] == 1,
                   what="one open stream", output=lambda: server.output)
        socket.close_socket()  # gone without a closing handshake, as a crashed client or a lost network
    wait_until(lambda: request_json(server.url + "/health")[1]["open_streams"] == 0, what="the stream freed",
               output=lambda: server.output)


def test_a_silent_stream_is_closed(server):
    with connect(f"{server.ws_url}/v1/models/asr/stream", open_timeout=30) as socket:
        answer = json.loads(socket.recv(timeout=30))
        assert answer["type"] == "error" and answer["message"] == "nothing received for 3 s (--stream-idle-s)"
        with pytest.raises(ConnectionClosed) as closed:
            socket.recv(timeout=30)
    assert closed.value.rcvd.code == 1008 and closed.value.rcvd.reason == answer["message"]


def test_a_streaming_model_is_served_chunk_by_chunk_and_ends_on_the_offline_transcript(server):
    from tests.helpers.export_models import speech_like

    waveform = speech_like([32000], seed=3)[0][0].numpy()
    messages = stream(server, waveform, rate=16000, chunk=2400, model="live")
    assert messages[0]["recognizer"] == "incremental"
    partials = [m for m in messages if m["type"] == "partial"]
    assert len(partials) >= 10  # one answer per chunk: nothing is decoded again
    buffer = io.BytesIO()
    soundfile.write(buffer, waveform, 16000, format="WAV", subtype="FLOAT")
    status, answer = request_json(f"{server.url}/v1/models/live/transcribe", buffer.getvalue())
    assert status == 200 and messages[-1]["type"] == "final" and messages[-1]["text"] == answer["text"]
    assert messages[-1]["tokens"] == answer["tokens"]  # the final carries its token ids, as /transcribe


@pytest.mark.parametrize("rate, chunk", [(48000, 4800), (44100, 1103)])
def test_a_microphone_rate_stream_is_resampled_chunk_by_chunk(server, rate, chunk):
    """A 48 kHz (or 44.1 kHz) stream of a streaming model runs chunk by chunk, a partial answering each
    chunk before the next is sent, and ends on the final of a 16 kHz stream of the same audio resampled
    offline (the audio policy's filter on the whole recording), which is also /transcribe's of the file."""
    from speechkit.data.audio_policy import shared_policy
    from tests.helpers.export_models import speech_like

    recording = audio.resample(speech_like([32000], seed=3)[0][0], 16000, rate)
    samples = recording.numpy().astype("<f4")
    partials = []
    with connect(f"{server.ws_url}/v1/models/live/stream", open_timeout=30) as socket:
        socket.send(json.dumps({"type": "start", "sample_rate": rate}))
        assert json.loads(socket.recv(timeout=30))["recognizer"] == "incremental"
        for start in range(0, len(samples), chunk):
            socket.send(samples[start:start + chunk].tobytes())
            partials.append(json.loads(socket.recv(timeout=30)))  # each chunk answered before the next
        socket.send(json.dumps({"type": "end"}))
        final = json.loads(socket.recv(timeout=30))
    assert all(p["type"] == "partial" for p in partials)
    assert [p["seconds"] for p in partials] == pytest.approx(
        [min(len(samples), (k + 1) * chunk) / rate for k in range(len(partials))])
    texts = [p["text"] for p in partials] + [final["text"]]
    assert texts[-1] and all(after.startswith(before) for before, after in zip(texts, texts[1:]))
    at_16k = shared_policy(16000).apply(recording, rate).numpy()
    reference = stream(server, at_16k, rate=16000, chunk=1600, model="live")[-1]
    assert final["type"] == "final" and final["text"] == reference["text"]
    assert final["tokens"] == reference["tokens"]
    assert final["text"] == offline(server, recording, rate, model="live")


def test_the_redecoding_recognizer_can_be_chosen_and_ends_on_the_same_final(server, folders):
    from tests.helpers.export_models import speech_like
    from tests.helpers.serve import ServerProcess

    recording = audio.resample(speech_like([16000], seed=6)[0][0], 16000, 48000).numpy()
    incremental = stream(server, recording, rate=48000, chunk=4800, model="live")
    with ServerProcess([f"live={folders['live']}", "--stream-recognizer", "redecoding"]) as redecoding_server:
        redecoded = stream(redecoding_server, recording, rate=48000, chunk=4800, model="live")
    assert incremental[0]["recognizer"] == "incremental" and redecoded[0]["recognizer"] == "redecoding"
    assert redecoded[-1]["text"] == incremental[-1]["text"]
    assert redecoded[-1]["tokens"] == incremental[-1]["tokens"]


def test_the_onnx_backend_serves_the_same_transcripts_and_streams(server, folders, tmp_path):
    """A folder written by ``speechkit export --format onnx`` served with ``--backend onnx``: the same
    transcript as the PyTorch server, and a stream run chunk by chunk through the exported step graph."""
    pytest.importorskip("onnxruntime")
    from speechkit.export import export_folder
    from tests.helpers.export_models import speech_like
    from tests.helpers.serve import ServerProcess

    exported = export_folder(folders["live"], tmp_path / "live-onnx", formats=["onnx"])
    waveform = speech_like([24000], seed=5)[0][0].numpy()
    buffer = io.BytesIO()
    soundfile.write(buffer, waveform, 16000, format="WAV", subtype="FLOAT")
    status, expected = request_json(f"{server.url}/v1/models/live/transcribe", buffer.getvalue())
    assert status == 200
    with ServerProcess([f"live={exported}", "--backend", "onnx"]) as onnx_server:
        status, answer = request_json(f"{onnx_server.url}/v1/models/live/transcribe", buffer.getvalue())
        assert status == 200 and answer["text"] == expected["text"]
        messages = stream(onnx_server, waveform, rate=16000, chunk=2400, model="live")
        assert messages[0]["recognizer"] == "incremental" and messages[-1]["text"] == expected["text"]
        assert messages[-1]["tokens"] == expected["tokens"]
