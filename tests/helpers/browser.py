"""Headless Chromium driven over the Chrome DevTools Protocol (a WebSocket and JSON; no driver binary), for
the tests of pages a server shows: navigate, run JavaScript, pick a file in an ``<input type=file>``, take a
screenshot. A WAV file can stand in for the microphone.

Example:
    >>> with Chromium(tmp_path, fake_microphone="speech.wav") as browser:     # doctest: +SKIP
    ...     browser.navigate("http://127.0.0.1:8000/")
    ...     browser.evaluate("document.title")
    'speechkit serve'
"""
from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Optional

import pytest

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> Optional[str]:
    return next((path for path in map(shutil.which, NAMES) if path), None)


def require_chromium() -> str:
    """The browser's path, or skip the test saying how to get one."""
    path = find_chromium()
    if path is None:
        pytest.skip("no Chromium on this machine (tools/setup_env.sh installs Debian's chromium; or "
                    "apt-get install chromium)")
    return path


class Chromium:
    """One headless Chromium process and a DevTools connection to its page.

    Args:
        folder: where the browser's profile (and its output) goes.
        fake_microphone: a WAV file the page's microphone plays (once, then silence); None for no audio.
        timeout_s: how long any one step may take.
    """

    def __init__(self, folder, fake_microphone=None, timeout_s: float = 60.0, size=(1100, 1000)):
        self.folder, self.timeout_s = Path(folder), timeout_s
        self.profile = self.folder / "chromium-profile"
        self.profile.mkdir(parents=True, exist_ok=True)
        self.command = [require_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
                        "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                        "--remote-debugging-port=0", f"--user-data-dir={self.profile}",
                        f"--window-size={size[0]},{size[1]}", "--autoplay-policy=no-user-gesture-required",
                        "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"]
        if fake_microphone is not None:
            self.command.append(f"--use-file-for-fake-audio-capture={fake_microphone}%noloop")
        self.command.append("about:blank")
        self.process: Optional[subprocess.Popen] = None
        self.socket = None
        self._stack = contextlib.ExitStack()
        self._ids = itertools.count(1)
        self.console: list = []

    def __enter__(self):
        from websockets.sync.client import connect

        self.log = open(self.folder / "chromium.log", "w")
        self.process = subprocess.Popen(self.command, stdout=self.log, stderr=subprocess.STDOUT)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise AssertionError(f"Chromium did not start: {self.output()}")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=self.timeout_s) as answer:
            pages = [t for t in json.loads(answer.read()) if t["type"] == "page"]
        self.socket = self._stack.enter_context(connect(pages[0]["webSocketDebuggerUrl"], max_size=None,
                                                        open_timeout=self.timeout_s))
        self.call("Runtime.enable")
        self.call("Page.enable")
        return self

    def __exit__(self, *exc):
        self._stack.close()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.log.close()

    def output(self) -> str:
        path = self.folder / "chromium.log"
        return path.read_text()[-4000:] if path.exists() else ""

    def call(self, method: str, **params) -> dict:
        """Send one DevTools command and wait for its answer (events met meanwhile are kept as console)."""
        message_id = next(self._ids)
        self.socket.send(json.dumps({"id": message_id, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout_s
        while True:
            message = json.loads(self.socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == message_id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message.get("result", {})
            if message.get("method") == "Runtime.consoleAPICalled":
                self.console.append(" ".join(str(a.get("value", a.get("description"))) for a in
                                             message["params"]["args"]))

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", what=f"{url} loaded")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression (promises awaited); a thrown error fails the test."""
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str, timeout_s: Optional[float] = None):
        """Poll a JavaScript expression until it is truthy; returns its value."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                status = self.evaluate("(document.getElementById('status') || {}).textContent")
                raise AssertionError(f"{what}: not so within the time limit (page status: {status!r}; "
                                     f"console: {self.console[-5:]})")
            time.sleep(0.1)

    def choose_file(self, selector: str, path) -> None:
        """Put ``path`` in the ``<input type=file>`` found by ``selector``, as a user picking it would."""
        document = self.call("DOM.getDocument")
        node = self.call("DOM.querySelector", nodeId=document["root"]["nodeId"], selector=selector)
        self.call("DOM.setFileInputFiles", files=[str(path)], nodeId=node["nodeId"])

    def screenshot(self, path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)
