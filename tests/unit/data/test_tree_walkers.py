"""Walkers of a tree (``speechkit manifest``, ``prepare-librispeech``) skip FIFOs, sockets and devices with
a warning: opening a FIFO would wait for a writer for ever. Each test runs under a timeout, so a walker that
opens one fails the test instead of hanging it."""
from __future__ import annotations

import json
import os
import socket

import pytest
import torch

from speechkit import cli
from speechkit.data import audio
from speechkit.data.librispeech import prepare_librispeech
from speechkit.data.manifest import find_audio_files, is_regular_file
from tests.unit.data.test_librispeech import make_librispeech

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def unix_socket(tmp_path):
    """A bound socket file (closed at the end); AF_UNIX paths are short, so it lives in a short folder."""
    made = []

    def bind(path):
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        made.append(server)

    yield bind
    for server in made:
        server.close()


def test_manifest_skips_fifos_sockets_devices_and_broken_links(tmp_path, unix_socket, capsys, caplog):
    root = tmp_path / "t"
    for name in ("a", "b"):
        audio.write(root / "spk" / f"{name}.flac", torch.zeros(1600), 16000)
    os.mkfifo(root / "spk" / "fifo.flac")
    unix_socket(root / "spk" / "s.flac")
    os.symlink("/dev/null", root / "spk" / "device.flac")
    os.symlink(root / "gone.flac", root / "spk" / "broken.flac")
    with caplog.at_level("WARNING"):
        assert find_audio_files(root) == [os.path.join("spk", "a.flac"), os.path.join("spk", "b.flac")]
    for name, kind in (("fifo", "a FIFO"), ("s", "a socket"), ("device", "a character device"),
                       ("broken", "unreadable")):
        assert f"skipping {root / 'spk' / name}.flac: {kind}" in caplog.text
    code = cli.main(["manifest", str(root), "--dest", str(tmp_path / "m"), "--valid-percent", "0",
                     "--workers", "1"])
    assert code == 0
    rows = json.loads((tmp_path / "m" / "train.json").read_text())
    assert sorted(rows) == ["a", "b"]


def test_prepare_librispeech_skips_a_fifo_transcript_and_a_fifo_recording(tmp_path, caplog):
    root = make_librispeech(tmp_path / "LibriSpeech")
    chapter = root / "dev-clean" / "84" / "121123"
    os.mkfifo(chapter / "84-121123.extra.trans.txt")
    (chapter / "84-121123-0001.flac").unlink()
    os.mkfifo(chapter / "84-121123-0001.flac")  # listed in the transcript, but a FIFO
    with caplog.at_level("WARNING"):
        written = prepare_librispeech(str(root), str(tmp_path / "out"), ["dev-clean"])
    dev = json.loads(open(written["dev-clean"]).read())
    assert sorted(dev) == ["174-50561-0005", "84-121123-0000"]
    assert "84-121123.extra.trans.txt: a FIFO" in caplog.text and "84-121123-0001.flac: a FIFO" in caplog.text


def test_is_regular_file():
    assert is_regular_file(__file__) and not is_regular_file("/dev/null", warn=False)
    assert not is_regular_file(os.path.dirname(__file__), warn=False)
