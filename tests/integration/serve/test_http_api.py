"""``speechkit serve`` over HTTP, as a real process on 127.0.0.1: answers, conversions, every bad input's
4xx, a model's 500 with its request id in the log, and batching that never changes an answer."""
from __future__ import annotations

import concurrent.futures
import io
import json
import re
import zipfile

import numpy as np
import pytest
import soundfile
import torch

from speechkit.data import audio
from tests.helpers import job_models
from tests.helpers.serve import multipart, request, request_json, synthesize_held, wait_until
from tests.integration.pretrained import tiny_asr

pytestmark = pytest.mark.slow  # a server process each (seconds to start)


def wav_bytes(waveform, rate: int, subtype: str = "PCM_16") -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, np.asarray(waveform, dtype=np.float32), rate, format="WAV", subtype=subtype)
    return buffer.getvalue()


def transcribe(server, data: bytes, model: str = "asr", **options) -> tuple:
    return request_json(f"{server.url}/v1/models/{model}/transcribe", data, **options)


def test_health_and_models(server):
    status, health = request_json(server.url + "/health")
    assert status == 200 and health["models"] == ["asr", "sep", "voc", "broken", "ctc", "live"]
    status, listing = request_json(server.url + "/v1/models")
    kinds = {m["name"]: m["kind"] for m in listing["models"]}
    assert kinds == {"asr": "asr", "sep": "separation", "voc": "vocoder", "broken": "asr", "ctc": "asr",
                     "live": "asr"}
    sep = next(m for m in listing["models"] if m["name"] == "sep")
    assert sep["num_speakers"] == 2 and sep["sample_rate"] == 8000
    status, _, body = request(server.url + "/openapi.json")
    assert status == 200 and "/v1/models/{name}/transcribe" in json.loads(body)["paths"]


def test_transcribe_raw_and_multipart(server):
    data = wav_bytes(tiny_asr.synthesize("bad cab"), 16000)
    status, answer = transcribe(server, data)
    assert status == 200, answer
    assert answer["text"] == "bad cab" and len(answer["tokens"]) == 7
    assert answer["timings"]["audio_seconds"] == pytest.approx(len(tiny_asr.synthesize("bad cab")) / 16000)
    assert re.fullmatch(r"[0-9a-f]{12}", answer["request_id"])
    body, content_type = multipart("file", "speech.wav", data)
    status, answer = transcribe(server, body, headers={"Content-Type": content_type})
    assert status == 200 and answer["text"] == "bad cab"


def test_other_rates_formats_and_channels_are_converted(server):
    speech = synthesize_held("face")
    at_48k = audio.resample(speech, 16000, 48000)
    stereo = torch.stack([at_48k, at_48k], dim=1).numpy()
    status, answer = transcribe(server, wav_bytes(stereo, 48000))
    assert status == 200 and answer["text"] == "face"
    buffer = io.BytesIO()
    soundfile.write(buffer, audio.resample(speech, 16000, 8000).numpy(), 8000, format="FLAC")
    status, answer = transcribe(server, buffer.getvalue())
    assert status == 200 and answer["text"] == "face"


@pytest.mark.parametrize("case, status, words", [
    ("empty", 400, "empty"),
    ("not audio", 415, "not an audio file"),
    ("no samples", 400, "no audio samples"),
    ("too large", 413, "larger than the limit"),
    ("too large, length not declared", 413, "larger than the limit"),
    ("too long", 413, "the limit is 10 s"),
    ("unknown model", 404, "no model named 'nope'"),
    ("wrong kind", 400, "is of kind 'separation'"),
    ("multipart without file", 400, "no file part"),
    ("malformed multipart", 400, "multipart"),
    ("non-finite", 400, "NaN or infinite"),
])
def test_bad_input_gets_a_clear_4xx(server, case, status, words):
    model, headers = "asr", {}
    data = {"empty": b"", "not audio": b"this is plain text, not a recording",
            "no samples": wav_bytes(np.zeros(0), 16000),
            "too large": b"\0" * 1_100_000,
            "too long": wav_bytes(np.zeros(11 * 8000), 8000),
            "non-finite": wav_bytes(np.array([0.1, np.nan, 0.2] * 100), 16000, subtype="FLOAT")}.get(case)
    if case == "too large, length not declared":  # chunked: refused once 1 MB has come
        data = iter([b"\0" * 65536] * 17)
        headers = {"Content-Type": "application/octet-stream", "Transfer-Encoding": "chunked"}
    if case == "unknown model":
        model, data = "nope", wav_bytes(tiny_asr.synthesize("a"), 16000)
    if case == "wrong kind":
        model, data = "sep", wav_bytes(tiny_asr.synthesize("a"), 16000)
    if case == "multipart without file":
        data = b'--b\r\nContent-Disposition: form-data; name="x"\r\n\r\nhello\r\n--b--\r\n'
        headers = {"Content-Type": "multipart/form-data; boundary=b"}
    if case == "malformed multipart":
        data, headers = b"--b\r\nno headers end", {"Content-Type": "multipart/form-data; boundary=b"}
    code, answer = transcribe(server, data, model=model, headers=headers)
    assert code == status and words in answer["error"], answer
    # ... and the server goes on serving everyone else
    assert transcribe(server, wav_bytes(tiny_asr.synthesize("egg"), 16000))[1]["text"] == "egg"


def test_a_model_that_raises_gives_500_with_the_request_id_in_the_log(server):
    loud = wav_bytes(np.full(1600, 0.95), 16000)
    status, answer = transcribe(server, loud, model="broken")
    assert status == 500 and answer["request_id"] in answer["error"]
    request_id = answer["request_id"]
    wait_until(lambda: f"request {request_id}: model 'broken' raised ValueError" in server.output,
               what="the failure's log line", output=lambda: server.output)
    log = server.output[server.output.index(f"request {request_id}: model"):]
    assert "Traceback" in log and "louder than 0.9" in log
    good = wav_bytes(tiny_asr.synthesize("bead"), 16000)
    assert transcribe(server, good, model="broken")[1]["text"] == "bead"


def test_separate_as_zip_and_multipart(server):
    rng = np.random.default_rng(0)
    mixture = (0.1 * rng.standard_normal(4000)).astype(np.float32)
    status, headers, body = request(server.url + "/v1/models/sep/separate", wav_bytes(mixture, 8000))
    assert status == 200 and headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        assert archive.namelist() == ["s1.wav", "s2.wav"]
        sources = [soundfile.read(io.BytesIO(archive.read(n))) for n in archive.namelist()]
    assert all(rate == 8000 and len(wave) == 4000 for wave, rate in sources)
    status, headers, body = request(server.url + "/v1/models/sep/separate?format=multipart",
                                    wav_bytes(mixture, 8000))
    assert status == 200 and headers["content-type"].startswith("multipart/form-data; boundary=")
    assert body.count(b"Content-Type: audio/wav") == 2 and b'filename="s2.wav"' in body
    status, answer = request_json(server.url + "/v1/models/sep/separate?format=tar", wav_bytes(mixture, 8000))
    assert status == 400 and "format must be" in answer["error"]


def test_generate_from_a_mel_array_and_from_audio(server):
    mel = np.random.default_rng(0).standard_normal((50, 16)).astype(np.float32)
    buffer = io.BytesIO()
    np.save(buffer, mel)
    status, headers, body = request(server.url + "/v1/models/voc/generate", buffer.getvalue())
    assert status == 200 and headers["content-type"] == "audio/wav"
    wave, rate = soundfile.read(io.BytesIO(body))
    assert rate == 16000 and len(wave) == 50 * 64
    status, _, body = request(server.url + "/v1/models/voc/generate", wav_bytes(np.zeros(6400), 16000))
    assert status == 200 and len(soundfile.read(io.BytesIO(body))[0]) > 0
    buffer = io.BytesIO()
    np.save(buffer, mel[:, :8])
    status, answer = request_json(server.url + "/v1/models/voc/generate", buffer.getvalue())
    assert status == 400 and "expected (frames, 16)" in answer["error"]


def test_batched_answers_equal_answers_alone(server):
    """Requests sent together are batched (batch_items > 1), and each gets exactly what it gets alone."""
    rng = np.random.default_rng(1)
    mixtures = [(0.1 * rng.standard_normal(int(n))).astype(np.float32) for n in rng.integers(800, 6000, 8)]

    def separate(mixture):
        status, headers, body = request(server.url + "/v1/models/sep/separate", wav_bytes(mixture, 8000))
        assert status == 200
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            waves = [soundfile.read(io.BytesIO(archive.read(n)), dtype="int16")[0]
                     for n in archive.namelist()]
        return int(headers["x-batch-items"]), np.stack(waves)

    alone = [separate(m) for m in mixtures]
    assert all(items == 1 for items, _ in alone)
    with concurrent.futures.ThreadPoolExecutor(len(mixtures)) as pool:
        together = list(pool.map(separate, mixtures))
    assert max(items for items, _ in together) > 1, "the concurrent requests were never batched"
    for (_, single), (_, batched) in zip(alone, together):
        assert np.abs(single.astype(int) - batched.astype(int)).max() <= 1  # 16-bit rounding of equal floats


def test_batched_transcripts_equal_transcripts_alone(server):
    """The same for a Transformer-CTC recognizer, whose attention would mix padding into an item's answer if
    its lengths were ignored: clips of different lengths, alone and together, get the same tokens."""
    rng = np.random.default_rng(3)
    clips = [wav_bytes(0.1 * rng.standard_normal(int(n)), 16000) for n in rng.integers(4000, 24000, 8)]

    def tokens(data):
        status, answer = transcribe(server, data, model="ctc")
        assert status == 200, answer
        return answer["timings"]["batch_items"], answer["tokens"]

    alone = [tokens(c) for c in clips]
    with concurrent.futures.ThreadPoolExecutor(len(clips)) as pool:
        together = list(pool.map(tokens, clips))
    assert max(items for items, _ in together) > 1, "the concurrent requests were never batched"
    assert [t for _, t in together] == [t for _, t in alone]
    assert any(len(t) > 0 for _, t in alone)  # random weights still say something to compare


def test_bad_requests_mixed_with_good_ones_under_load(server):
    """32 clients at once: good requests all answered correctly, bad ones refused, breaking ones 500."""
    rng = np.random.default_rng(2)
    jobs = []
    for index in range(96):
        kind = ["good", "good", "not audio", "empty", "breaks"][index % 5]
        words = " ".join(rng.choice(job_models.WORDS, size=int(rng.integers(1, 4))))
        jobs.append((kind, words))

    def send(job):
        kind, words = job
        data = {"good": wav_bytes(tiny_asr.synthesize(words), 16000), "not audio": b"RIFF....WAVEnot",
                "empty": b"", "breaks": wav_bytes(np.full(3200, 0.95), 16000)}[kind]
        return kind, words, transcribe(server, data, model="broken")

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        results = list(pool.map(send, jobs))
    for kind, words, (status, answer) in results:
        expected = {"good": 200, "not audio": 415, "empty": 400, "breaks": 500}[kind]
        assert status == expected, (kind, answer)
        if kind == "good":
            assert answer["text"] == words

