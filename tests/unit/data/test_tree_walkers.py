"""Walkers of a tree (``prepare-librispeech``'s; ``speechkit manifest``'s in tests/unit/commands) skip
FIFOs, sockets and devices with a warning: opening a FIFO would wait for a writer for ever. Each test runs
under a timeout, so a walker that opens one fails the test instead of hanging it."""
from __future__ import annotations

import json
import os

import pytest

from speechkit.data.librispeech import prepare_librispeech
from speechkit.data.manifest import is_regular_file
from tests.unit.data.librispeech_tree import make_librispeech

pytestmark = pytest.mark.timeout(30)


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
