"""Every long command shows a bar counting its work when stderr is a terminal, and its output lines still
reach stdout whole. The commands run in this process (the models are tiny) with stderr replaced by a stream
that says it is a terminal; tests/integration/test_terminal.py shows the bars on a real pseudo-terminal."""
from __future__ import annotations

import io
import json
import shutil
import sys

import pytest

from speechkit.cli import main
from tests.helpers.job_models import write_manifest, write_model, write_separation_model, write_vocoder_model

ITEMS = 5


class TerminalStream(io.StringIO):
    """stderr as a terminal would be: keeps what is written, and says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("progress")
    manifest = write_manifest(folder / "data", count=ITEMS)
    rows = json.loads(manifest.read_text())
    speakers = {item_id: {**row, "spk": f"spk{index % 3}"}
                for index, (item_id, row) in enumerate(rows.items())}
    (folder / "speakers.json").write_text(json.dumps(speakers))
    return {"asr": write_model(folder / "asr"), "separator": write_separation_model(folder / "separator"),
            "vocoder": write_vocoder_model(folder / "vocoder"), "manifest": manifest,
            "speakers": folder / "speakers.json", "audio": [row["wav"] for row in rows.values()]}


def run_on_terminal(monkeypatch, argv: list) -> str:
    terminal = TerminalStream()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(argv) == 0, terminal.getvalue()
    monkeypatch.undo()
    return terminal.getvalue()


@pytest.mark.parametrize("command", ["transcribe", "separate", "embed", "mixtures", "trim-silence"])
def test_the_command_counts_its_work_on_a_terminal_and_prints_its_output_whole(command, files, tmp_path,
                                                                                 monkeypatch, capsys):
    out = str(tmp_path / "out")
    argv, unit = {
        "transcribe": (["transcribe", str(files["asr"]), *files["audio"], "--batch-size", "2"], "file"),
        "separate": (["separate", str(files["separator"]), *files["audio"], "--out", out], "file"),
        "embed": (["embed", str(files["vocoder"]), str(files["manifest"]), "-o", out], "array"),
        "mixtures": (["mixtures", str(files["speakers"]), out, "--num-mixtures", str(ITEMS)], "mix"),
        "trim-silence": (["trim-silence", str(files["manifest"]), out + ".json", "--workers", "1"], "file"),
    }[command]
    screen = run_on_terminal(monkeypatch, argv)
    assert f"{command}: 100%" in screen and f"{ITEMS}/{ITEMS} [" in screen and unit in screen, screen
    printed = capsys.readouterr().out
    if command == "transcribe":  # one whole "path<TAB>text" line per file, the bar never inside
        assert [line.split("\t")[0] for line in printed.splitlines()] == files["audio"], printed
    quiet = run_on_terminal(monkeypatch, argv + ["--noprogressbar"])
    assert "%|" not in quiet, quiet


@pytest.mark.skipif(shutil.which("flite") is None or shutil.which("festival") is None,
                    reason="flite/festival not installed")
def test_corpus_counts_utterances_on_a_terminal(tmp_path, monkeypatch, capsys):
    screen = run_on_terminal(monkeypatch, [
        "corpus", str(tmp_path / "corpus"), "--num-train", "2", "--num-valid", "0", "--num-test", "1",
        "--voices", "kal,kal-hi,ked", "--test-voices", "kal-hi", "--valid-voices", "",
        "--num-sentences", "10", "--num-workers", "1"])
    assert "corpus: 100%" in screen and "3/3 [" in screen, screen
    assert "corpus: 3 utterances" in capsys.readouterr().out


def test_prepare_librispeech_counts_the_files_of_every_split_on_a_terminal(tmp_path, monkeypatch):
    from tests.unit.data.librispeech_tree import make_librispeech

    root = make_librispeech(tmp_path / "LibriSpeech")  # 3 files in dev-clean, 1 in test-clean
    screen = run_on_terminal(monkeypatch, ["prepare-librispeech", str(root), "--dest", str(tmp_path / "m"),
                                           "--workers", "1"])
    assert "prepare-librispeech: 100%" in screen and "4/4 [" in screen, screen
