"""The web page of ``speechkit serve`` in headless Chromium: a WAV file as the microphone, the transcript
growing while it plays and ending equal to the offline transcript of that file; an upload; separated sources
side by side; two recordings compared by a speaker model; a screenshot of the page saved for the docs."""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile

from tests.helpers.browser import Chromium, require_chromium
from tests.helpers.serve import ServerProcess, multipart_files, noise, request_json, synthesize_held, tone
from tests.helpers.serve import write_discerning_speaker_model as write_speaker_folder
from tests.integration.pretrained import tiny_asr

pytestmark = pytest.mark.slow
TEXT = "bad face dead"


@pytest.fixture(scope="module")
def page_server(folders):
    require_chromium()
    args = [f"asr={folders['asr']}", f"sep={folders['sep']}", "--partial-every-s", "0.2"]
    with ServerProcess(args) as server:
        yield server


def offline_transcript(server, path: Path) -> str:
    status, answer = request_json(f"{server.url}/v1/models/asr/transcribe", path.read_bytes())
    assert status == 200, answer
    return answer["text"]


def test_microphone_streaming_shows_the_offline_transcript(page_server, tmp_path):
    speech = tmp_path / "speech.wav"
    # Two seconds of silence first: the fake microphone starts playing when the page asks for it, and on a
    # loaded machine the page's audio thread may start a moment later; what it misses must be silence.
    held = np.concatenate([np.zeros(32000, dtype=np.float32), synthesize_held(TEXT).numpy()])
    soundfile.write(speech, held, 16000, subtype="PCM_16")
    expected = offline_transcript(page_server, speech)
    assert expected == TEXT
    with Chromium(tmp_path, fake_microphone=speech) as browser:
        browser.navigate(page_server.url + "/")
        browser.wait_for("document.querySelectorAll('#model option').length === 2", "the models listed")
        browser.evaluate("document.getElementById('record').click()")
        # Partials while the file plays: the transcript grows before the recording stops.
        partial = browser.wait_for("(() => { const t = document.getElementById('transcript');"
                                   " return t.dataset.state === 'partial' && t.textContent.length > 0"
                                   " && t.textContent; })()", "a partial transcript", timeout_s=60)
        assert TEXT.startswith(partial.strip())
        time.sleep(len(held) / 16000 + 1.0)  # the whole file played, then some silence
        browser.evaluate("document.getElementById('stop').click()")
        shown = browser.wait_for("document.getElementById('transcript').dataset.state === 'final' && "
                                 "document.getElementById('transcript').textContent", "a final transcript")
        assert shown == expected
        screenshot = browser.screenshot(_screenshot_path(tmp_path, "serve-page-stream.png"))
    assert screenshot.stat().st_size > 10_000


def test_upload_transcribes_and_separates(page_server, tmp_path):
    speech = tmp_path / "upload.wav"
    soundfile.write(speech, tiny_asr.synthesize("cab egg").numpy(), 16000)
    mixture = tmp_path / "mixture.wav"
    soundfile.write(mixture, 0.1 * np.random.default_rng(0).standard_normal(8000), 8000)
    with Chromium(tmp_path) as browser:
        browser.navigate(page_server.url + "/")
        browser.wait_for("document.querySelectorAll('#model option').length === 2", "the models listed")
        browser.choose_file("#file", speech)
        browser.evaluate("document.getElementById('send').click()")
        shown = browser.wait_for("document.getElementById('transcript').dataset.state === 'final' && "
                                 "document.getElementById('transcript').textContent",
                                 "the upload's transcript")
        assert shown == offline_transcript(page_server, speech) == "cab egg"
        browser.evaluate("(() => { const s = document.getElementById('model'); s.value = 'sep';"
                         " s.dispatchEvent(new Event('change')); })()")
        browser.choose_file("#file", mixture)
        browser.evaluate("document.getElementById('send').click()")
        names = browser.wait_for("document.querySelectorAll('#sources audio').length === 2 && [...document"
                                 ".querySelectorAll('#sources audio')].map(a => a.dataset.source)",
                                 "two sources shown")
        assert names == ["s1", "s2"]
        durations = browser.wait_for("(() => { const d = [...document.querySelectorAll('#sources audio')]"
                                     ".map(a => a.duration); return d.every(x => x > 0) && d; })()",
                                     "the sources playable")
        assert durations == pytest.approx([1.0, 1.0], abs=0.01)
        browser.screenshot(_screenshot_path(tmp_path, "serve-page-separate.png"))


def test_an_error_clears_the_previous_file_and_the_spectrogram_has_axes(page_server, tmp_path):
    speech = tmp_path / "upload.wav"
    soundfile.write(speech, tiny_asr.synthesize("cab egg").numpy(), 16000)
    not_audio = tmp_path / "notes.wav"
    not_audio.write_text("these are not samples")
    painted = ("(id, x0, x1) => { const c = document.getElementById(id); const d = c.getContext('2d')"
               ".getImageData(x0, 0, x1 - x0, c.height).data; let n = 0;"
               " for (let i = 3; i < d.length; i += 4) n += d[i] > 0; return n; }")
    with Chromium(tmp_path) as browser:
        browser.navigate(page_server.url + "/")
        browser.wait_for("document.querySelectorAll('#model option').length === 2", "the models listed")
        browser.choose_file("#file", speech)
        browser.evaluate("document.getElementById('send').click()")
        browser.wait_for("document.getElementById('transcript').dataset.state === 'final'", "the transcript")
        # The frequency labels left of the image and the time labels below it are drawn.
        assert browser.evaluate(f"({painted})('spectrogram', 0, 40)") > 50
        assert browser.evaluate(f"({painted})('waveform', 0, 900)") > 100
        browser.choose_file("#file", not_audio)
        browser.evaluate("document.getElementById('send').click()")
        browser.wait_for("document.getElementById('status').className === 'error'", "the error shown")
        assert browser.evaluate("document.getElementById('transcript').textContent") == ""
        assert browser.evaluate(f"({painted})('waveform', 0, 900)") == 0
        assert browser.evaluate(f"({painted})('spectrogram', 0, 900)") == 0


def test_two_recordings_compared_by_a_speaker_model(tmp_path):
    """The "same speaker?" view: two files to /verify, the verdict and score the API gives, both recordings
    shown; a missing second file or a bad one is said, and clears the previous verdict."""
    pytest.importorskip("fastapi", reason="speechkit serve needs the 'serve' extra (fastapi, uvicorn)")
    require_chromium()
    folder = write_speaker_folder(tmp_path / "spk")
    paths = {}
    for name, samples in {"tone.wav": tone(440), "tone-again.wav": tone(440), "noise.wav": noise(0)}.items():
        paths[name] = tmp_path / name
        soundfile.write(paths[name], samples, 16000, subtype="FLOAT")
    not_audio = tmp_path / "notes.wav"
    not_audio.write_text("these are not samples")
    verdict = ("document.getElementById('verdict').dataset.same !== '' && [document.getElementById('verdict')"
               ".textContent, Number(document.getElementById('verdict').dataset.score)]")
    with ServerProcess([f"spk={folder}"]) as server, Chromium(tmp_path) as browser:
        expected = {}
        for second in ("tone-again.wav", "noise.wav"):
            body, headers = multipart_files(("first", "tone.wav", paths["tone.wav"].read_bytes()),
                                            ("second", second, paths[second].read_bytes()))
            status, answer = request_json(f"{server.url}/v1/models/spk/verify", body, headers=headers)
            assert status == 200, answer
            expected[second] = ["Same speaker" if answer["same"] else "Different speakers", answer["score"]]
        assert [label for label, _ in expected.values()] == ["Same speaker", "Different speakers"]
        browser.navigate(server.url + "/")
        browser.wait_for("document.querySelectorAll('#model option').length === 1", "the model listed")
        assert browser.evaluate("document.getElementById('send').textContent") == "Compare"
        assert browser.evaluate("document.getElementById('verify-box').classList.contains('hidden')") is False
        browser.choose_file("#file", paths["tone.wav"])
        browser.evaluate("document.getElementById('send').click()")
        browser.wait_for("document.getElementById('status').className === 'error'", "the missing file said")
        assert "second file" in browser.evaluate("document.getElementById('status').textContent")
        for second, (label, score) in expected.items():
            browser.choose_file("#file2", paths[second])
            browser.evaluate("document.getElementById('send').click()")
            shown = browser.wait_for(f"{verdict} && document.getElementById('verdict').textContent === "
                                     f"'{label}' && {verdict}", f"the verdict on {second}")
            assert shown == [label, pytest.approx(score, abs=1e-9)]
            names = browser.wait_for("(() => { const a = [...document.querySelectorAll('#pair audio')];"
                                     " return a.length === 2 && a.every(x => x.duration > 0) &&"
                                     " a.map(x => x.dataset.source); })()", "both recordings playable")
            assert names == ["tone.wav", second]
        browser.screenshot(_screenshot_path(tmp_path, "serve-page-verify.png"))
        browser.choose_file("#file2", not_audio)
        browser.evaluate("document.getElementById('send').click()")
        browser.wait_for("document.getElementById('status').className === 'error'", "the error shown")
        assert "second file notes.wav is not an audio file" in browser.evaluate(
            "document.getElementById('status').textContent")
        assert browser.evaluate("document.getElementById('verdict').textContent") == ""
        assert browser.evaluate("document.querySelectorAll('#pair figure').length") == 0


def test_the_api_page_works_offline(page_server, tmp_path):
    """``/docs`` renders every endpoint from /openapi.json with nothing loaded from elsewhere."""
    from tests.helpers.serve import request

    status, _, body = request(page_server.url + "/docs")
    assert status == 200 and b"<script src=" not in body and b"https://" not in body
    with Chromium(tmp_path) as browser:
        browser.navigate(page_server.url + "/docs")
        paths = browser.wait_for("document.querySelectorAll('#paths section').length >= 5 && [...document"
                                 ".querySelectorAll('#paths section code')].map(c => c.textContent)",
                                 "the endpoints listed")
    assert "/v1/models/{name}/transcribe" in paths and "/health" in paths


def _screenshot_path(tmp_path, name: str) -> Path:
    """Screenshots go to $SPEECHKIT_SCREENSHOTS when set (to refresh the docs' picture), else tmp_path."""
    folder = Path(os.environ.get("SPEECHKIT_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


