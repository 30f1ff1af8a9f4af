"""``speechkit serve`` as a real process for the tests: start it on a free port of 127.0.0.1, wait for the
line that says where it listens, stop it with a signal; plus the small model folders the serve tests use.

Example:
    >>> with ServerProcess(["asr=" + str(folder)]) as server:       # doctest: +SKIP
    ...     urllib.request.urlopen(server.url + "/health").read()
"""
from __future__ import annotations

import json
import math
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from tests.helpers import job_models
from tests.helpers.processes import clean_env
from tests.integration.pretrained import tiny_asr

READY = re.compile(r"speechkit: serving .* on (http://\S+)")


class ServerProcess:
    """``python -m speechkit serve ARGS --port 0`` in its own process; ``url`` once it listens.

    Output (stdout and stderr together) is collected in ``output`` by a reader thread, so the server never
    blocks on a full pipe and a failing test can show what the server said.
    """

    def __init__(self, args: list, timeout_s: float = 120.0, env: Optional[dict] = None):
        self.args, self.timeout_s = list(args), timeout_s
        self.env = clean_env(**(env or {}))
        self.lines: list = []
        self.url: Optional[str] = None
        self.process: Optional[subprocess.Popen] = None

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def start(self) -> ServerProcess:
        command = [sys.executable, "-m", "speechkit", "serve", *self.args]
        if "--port" not in self.args:
            command += ["--port", "0"]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=self.env, cwd=str(Path(__file__).resolve().parents[2]))
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + self.timeout_s
        while self.url is None:
            if self.process.poll() is not None:
                time.sleep(0.2)  # let the reader take the last lines
                raise AssertionError(f"the server exited with {self.process.returncode}:\n{self.output}")
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"the server did not listen within {self.timeout_s} s:\n{self.output}")
            time.sleep(0.05)
        return self

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)
            match = READY.search(line)
            if match and self.url is None:
                self.url = match.group(1)

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 60.0) -> int:
        """Send ``sig`` and wait for the exit; returns the exit code (kills it after ``timeout_s``)."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            raise AssertionError(f"the server did not stop within {timeout_s} s of {sig}:\n"
                                 f"{self.output}") from None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def ws_url(self) -> str:
        return "ws" + self.url[len("http"):]


def request(url: str, data: Optional[bytes] = None, headers: Optional[dict] = None,
            method: Optional[str] = None, timeout_s: float = 60.0) -> tuple:
    """``(status, headers, body bytes)`` of one HTTP request; 4xx/5xx are returned, not raised."""
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def request_json(url: str, data: Optional[bytes] = None, **options) -> tuple:
    status, _, body = request(url, data, **options)
    return status, json.loads(body)


def multipart(field: str, filename: str, data: bytes) -> tuple:
    """``(body, content type)`` of a multipart/form-data upload of one file."""
    boundary = "testboundary7d3f"
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{filename}"\r\n'
            f"Content-Type: application/octet-stream\r\n\r\n").encode()
    body += data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def multipart_files(*files) -> tuple:
    """``(body, headers)`` of a multipart/form-data body of ``(field, filename, bytes)`` file parts."""
    boundary = "testfiles9a41c"
    body = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{filename}"'
                    "\r\nContent-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n"
                    for field, filename, data in files)
    content_type = f"multipart/form-data; boundary={boundary}"
    return body + f"--{boundary}--\r\n".encode(), {"Content-Type": content_type}


# ------------------------------------------------------------------------------------------------ models
RAISING_HYPERPARAMS = job_models.HYPERPARAMS.replace(
    "encoder: !new:tests.helpers.job_models.SlowToneEncoder",
    "encoder: !new:tests.helpers.serve.RaisingToneEncoder")


class RaisingToneEncoder(job_models.SlowToneEncoder):
    """The tone encoder, raising for any batch holding a sample louder than 0.9 (a request the test marks
    to make the model fail) and answering every other one exactly."""

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor):
        if bool((wavs.abs() > 0.9).any()):
            raise ValueError("a sample louder than 0.9 (the test's mark of a request that breaks the model)")
        return super().forward(wavs, lengths)


def write_raising_model(folder) -> Path:
    """A tone-model folder whose encoder raises on samples louder than 0.9."""
    folder = job_models.write_model(folder)
    (folder / "hyperparams.yaml").write_text(RAISING_HYPERPARAMS.format(seconds_per_batch=0.0, hold_file="",
                                                                        hold_at_batch=0))
    return folder


def synthesize_held(text: str, frames_per_char: int = 6, amplitude: float = 0.5) -> torch.Tensor:
    """Speech for the tone model that survives a microphone path (resampling, a shift of any number of
    samples): each character a tone held ``frames_per_char`` frames, then as long a silence, so every
    misaligned frame still reads as that character or as blank. (time,) float32 at 16 kHz; no character
    may repeat back to back (a repeat would merge across frames that straddle the silence)."""
    frame = tiny_asr.FRAME
    t = torch.arange(frame * frames_per_char, dtype=torch.float32)
    pieces = [torch.zeros(frame * frames_per_char)]
    for char in text:
        index = tiny_asr.SYMBOLS.index(char)
        pieces += [amplitude * torch.sin(2 * math.pi * tiny_asr.tone_bin(index) * t / frame),
                   torch.zeros(frame * frames_per_char)]
    return torch.cat(pieces)


def wait_until(condition, timeout_s: float = 30.0, what: str = "condition", output=lambda: "") -> None:
    """Poll ``condition()`` until it is true; fail naming ``what`` (and the server's output) after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s} s:\n{output()}")
        time.sleep(0.05)


def tone(hz: float, seconds: float = 1.0, rate: int = 16000) -> np.ndarray:
    """A sine at ``hz`` (amplitude 0.3), float32."""
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * math.pi * hz * t)).astype(np.float32)


def noise(seed: int, seconds: float = 1.0, rate: int = 16000) -> np.ndarray:
    """White noise (standard deviation 0.1), float32."""
    return (0.1 * np.random.default_rng(seed).standard_normal(int(seconds * rate))).astype(np.float32)


def write_discerning_speaker_model(folder) -> Path:
    """The tiny ECAPA-TDNN folder of :func:`job_models.write_speaker_model`, its threshold set halfway
    between the score of ``tone(440)`` against ``noise(0)`` and 1 (a file against itself), so that a served
    model answers both "same" and "different" (random weights score most pairs alike)."""
    from speechkit.pretrained import SpeakerRecognition

    folder = job_models.write_speaker_model(folder)
    model = SpeakerRecognition.from_hparams(str(folder))
    embeddings = [model.embed_batch(torch.from_numpy(x)[None])[0] for x in (tone(440), noise(0))]
    score = float(model.score(*embeddings))
    if score > 0.999:
        raise AssertionError(f"the random speaker model scores a tone against noise {score}: nothing to tell")
    hyperparams = folder / "hyperparams.yaml"
    hyperparams.write_text(hyperparams.read_text().replace("threshold: 0.4", f"threshold: {(score + 1) / 2}"))
    return folder
