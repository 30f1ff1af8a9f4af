"""``speechkit serve`` with a speaker model, as a real process on 127.0.0.1: ``/embed`` and ``/verify`` answer
what ``SpeakerRecognition`` answers in Python, every bad input gets its 4xx, and verification requests sent
together are batched without changing a score."""
from __future__ import annotations

import concurrent.futures
import io
import json

import numpy as np
import pytest
import soundfile
import torch

from tests.helpers import job_models
from tests.helpers.serve import ServerProcess, multipart, multipart_files, noise, request, request_json, tone
from tests.helpers.serve import write_discerning_speaker_model as write_speaker_folder

pytestmark = pytest.mark.slow  # a server process (seconds to start)


def wav_bytes(waveform, rate: int = 16000) -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, np.asarray(waveform, dtype=np.float32), rate, format="WAV", subtype="FLOAT")
    return buffer.getvalue()


def verify(server, first: bytes, second: bytes, model: str = "spk") -> tuple:
    body, headers = multipart_files(("first", "a.wav", first), ("second", "b.wav", second))
    return request_json(f"{server.url}/v1/models/{model}/verify", body, headers=headers)


@pytest.fixture(scope="module")
def speaker_folder(tmp_path_factory):
    pytest.importorskip("fastapi", reason="speechkit serve needs the 'serve' extra (fastapi, uvicorn)")
    return write_speaker_folder(tmp_path_factory.mktemp("serve-speaker") / "spk")


@pytest.fixture(scope="module")
def server(speaker_folder, tmp_path_factory):
    asr = job_models.write_model(tmp_path_factory.mktemp("serve-asr") / "asr")
    with ServerProcess([f"spk={speaker_folder}", f"asr={asr}", "--max-request-mb", "1", "--max-audio-seconds",
                        "10", "--max-wait-ms", "50"]) as process:
        yield process


@pytest.fixture(scope="module")
def local(speaker_folder):
    """The same folder loaded in this process: what the server must answer."""
    from speechkit.pretrained import SpeakerRecognition

    return SpeakerRecognition.from_hparams(str(speaker_folder))


def local_embedding(local, waveform: np.ndarray) -> torch.Tensor:
    return local.embed_batch(torch.from_numpy(waveform)[None])[0]


def test_the_model_is_listed_with_its_endpoints_and_threshold(server, local):
    status, listing = request_json(server.url + "/v1/models")
    spk = next(m for m in listing["models"] if m["name"] == "spk")
    assert spk["kind"] == "speaker" and spk["interface"] == "SpeakerRecognition"
    assert spk["endpoints"] == ["/v1/models/spk/embed", "/v1/models/spk/verify"]
    assert spk["threshold"] == pytest.approx(local.threshold)
    status, _, body = request(server.url + "/openapi.json")
    paths = json.loads(body)["paths"]
    assert "/v1/models/{name}/embed" in paths and "/v1/models/{name}/verify" in paths


def test_embed_answers_the_embedding_of_python(server, local):
    speech = noise(1, seconds=1.3)
    status, answer = request_json(f"{server.url}/v1/models/spk/embed", wav_bytes(speech))
    assert status == 200, answer
    assert answer["dim"] == len(answer["embedding"]) == 12
    assert np.allclose(answer["embedding"], local_embedding(local, speech).numpy(), atol=1e-5)
    assert answer["timings"]["audio_seconds"] == pytest.approx(1.3)
    body, content_type = multipart("file", "speech.wav", wav_bytes(speech))
    status, again = request_json(f"{server.url}/v1/models/spk/embed", body,
                                 headers={"Content-Type": content_type})
    assert status == 200 and again["embedding"] == answer["embedding"]


def test_verify_answers_the_score_and_verdict_of_python(server, local):
    same_file = wav_bytes(tone(440))
    status, answer = verify(server, same_file, same_file)
    assert status == 200, answer
    assert answer["score"] == pytest.approx(1.0, abs=1e-5) and answer["same"] is True
    assert answer["threshold"] == pytest.approx(local.threshold)
    assert set(answer["timings"]) == {"first", "second"}
    status, answer = verify(server, wav_bytes(tone(440)), wav_bytes(noise(0)))
    expected = float(local.score(local_embedding(local, tone(440)), local_embedding(local, noise(0))))
    assert status == 200 and answer["score"] == pytest.approx(expected, abs=1e-5)
    assert answer["same"] is False and answer["score"] < answer["threshold"]


def test_verify_converts_rates_and_channels_of_each_file(server, local):
    """A 48 kHz stereo file and an 8 kHz one: each converted as ``load_audio`` converts it."""
    from speechkit.data import audio

    at_48k = audio.resample(torch.from_numpy(noise(2)), 16000, 48000).numpy()
    stereo = np.stack([at_48k, at_48k], axis=1)
    at_8k = audio.resample(torch.from_numpy(noise(3)), 16000, 8000).numpy()
    status, answer = verify(server, wav_bytes(stereo, 48000), wav_bytes(at_8k, 8000))
    assert status == 200, answer
    first = local.embed_batch(audio.resample(torch.from_numpy(at_48k), 48000, 16000)[None])[0]
    second = local.embed_batch(audio.resample(torch.from_numpy(at_8k), 8000, 16000)[None])[0]
    assert answer["score"] == pytest.approx(float(local.score(first, second)), abs=1e-4)


@pytest.mark.parametrize("case, status, words", [
    ("raw body", 400, "takes 2 audio files"),
    ("one file", 400, "has 1 file part(s); this endpoint takes exactly 2"),
    ("three files", 400, "Too many files"),
    ("second not audio", 415, "second file b.wav is not an audio file"),
    ("first empty", 400, "first file a.wav is empty"),
    ("second too long", 413, "second file b.wav holds 11.0 s of audio; the limit is 10 s"),
    ("second non-finite", 400, "second file b.wav holds NaN or infinite samples"),
    ("too large", 413, "larger than the limit"),
    ("unknown model", 404, "no model named 'nope'"),
    ("wrong kind", 400, "is of kind 'asr'; it serves transcribe, stream"),
])
def test_bad_verify_requests_get_a_clear_4xx(server, case, status, words):
    good = wav_bytes(tone(300))
    model, files = "spk", [("first", "a.wav", good), ("second", "b.wav", good)]
    if case == "one file":
        files = files[:1]
    if case == "three files":
        files.append(("third", "c.wav", good))
    if case == "second not audio":
        files[1] = ("second", "b.wav", b"plain text, not a recording")
    if case == "first empty":
        files[0] = ("first", "a.wav", b"")
    if case == "second too long":
        files[1] = ("second", "b.wav", wav_bytes(np.zeros(11 * 8000), 8000))
    if case == "second non-finite":
        files[1] = ("second", "b.wav", wav_bytes(np.array([0.1, np.nan, 0.2] * 100)))
    if case == "too large":
        files[1] = ("second", "b.wav", b"\0" * 1_100_000)
    if case in ("unknown model", "wrong kind"):
        model = {"unknown model": "nope", "wrong kind": "asr"}[case]
    body, headers = multipart_files(*files)
    if case == "raw body":
        body, headers = good, {}
    code, answer = request_json(f"{server.url}/v1/models/{model}/verify", body, headers=headers)
    assert code == status and words in answer["error"], answer
    assert verify(server, good, good)[0] == 200  # ... and the server goes on serving


def test_other_kinds_of_requests_to_a_speaker_model_are_refused(server):
    code, answer = request_json(f"{server.url}/v1/models/spk/transcribe", wav_bytes(tone(300)))
    assert code == 400 and "is of kind 'speaker'; it serves embed, verify" in answer["error"]
    code, answer = request_json(f"{server.url}/v1/models/asr/embed", wav_bytes(tone(300)))
    assert code == 400 and "is of kind 'asr'" in answer["error"]
    code, answer = request_json(f"{server.url}/v1/models/spk/embed", b"")
    assert code == 400 and "upload is empty" in answer["error"]


def test_batched_verifications_equal_verifications_alone(server):
    """Eight pairs of different lengths sent at once are batched (their files padded together), and each
    gets the score it gets alone."""
    rng = np.random.default_rng(5)
    pairs = [(wav_bytes(noise(10 + i, seconds=float(rng.uniform(0.3, 1.5)))),
              wav_bytes(noise(30 + i, seconds=float(rng.uniform(0.3, 1.5))))) for i in range(8)]

    def score(pair):
        status, answer = verify(server, *pair)
        assert status == 200, answer
        return max(t["batch_items"] for t in answer["timings"].values()), answer["score"]

    alone = [score(pair) for pair in pairs]
    with concurrent.futures.ThreadPoolExecutor(len(pairs)) as pool:
        together = list(pool.map(score, pairs))
    assert max(items for items, _ in together) > 2, "the concurrent requests were never batched"
    assert [s for _, s in together] == pytest.approx([s for _, s in alone], abs=1e-5)
