"""What a terminal shows: progress bars on a real pseudo-terminal (none in a pipe), log lines printed above
a bar instead of onto it, both progress flags on every command with a bar, and ``speechkit`` alone."""
from __future__ import annotations

import argparse
import fcntl
import importlib
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time

import numpy as np
import pytest
import soundfile

from speechkit.cli import COMMANDS
from speechkit.experiment.run_options import parse_arguments
from tests.helpers.processes import REPO, clean_env

TIMEOUT_S = 180  # seconds of work at most; generous for a loaded 2-core machine


def run_in_terminal(command: list, cwd, timeout: float = TIMEOUT_S) -> tuple:
    """``(exit code, everything written)`` of ``command`` run with stdin, stdout and stderr on a new
    120-column pseudo-terminal, as in an interactive shell."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(command, stdin=terminal, stdout=terminal, stderr=terminal, cwd=cwd,
                               env=clean_env(), close_fds=True)
    os.close(terminal)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 1.0)
            if ready:
                try:
                    data = os.read(controller, 65536)
                except OSError:  # EIO: every holder of the terminal has closed it
                    break
                if not data:
                    break
                chunks.append(data)
            elif process.poll() is not None:
                break
        else:
            process.kill()
            written = b"".join(chunks).decode(errors="replace")
            pytest.fail(f"{command} ran past {timeout} s; it wrote:\n{written}")
        code = process.wait(timeout=30)
    finally:
        os.close(controller)
        if process.poll() is None:
            process.kill()
    return code, b"".join(chunks).decode("utf-8", errors="replace")


def write_tones(folder, count: int) -> None:
    for i in range(count):
        tone = 0.1 * np.sin(np.arange(1600) * (0.05 + 0.01 * i)).astype("float32")
        soundfile.write(folder / f"utt{i}.flac", tone, 16000)


def test_a_long_command_shows_its_bar_on_a_terminal_and_none_in_a_pipe(tmp_path):
    (tmp_path / "audio").mkdir()
    write_tones(tmp_path / "audio", 5)
    command = [sys.executable, "-m", "speechkit", "manifest", "audio", "--ext", "flac", "--workers", "1"]
    code, screen = run_in_terminal(command + ["--dest", "on_terminal"], tmp_path)
    assert code == 0, screen
    assert "manifest: 100%" in screen and "5/5" in screen, screen
    piped = subprocess.run(command + ["--dest", "in_pipe"], cwd=tmp_path, env=clean_env(),
                           capture_output=True, text=True, timeout=TIMEOUT_S)
    assert piped.returncode == 0, piped.stderr
    assert "%|" not in piped.stderr + piped.stdout and "train.json" in piped.stdout
    code, screen = run_in_terminal(command + ["--dest", "off", "--noprogressbar"], tmp_path)
    assert code == 0 and "%|" not in screen and "train.json" in screen, screen


TRAINING = """
import logging, sys, torch, speechkit

class Logs(speechkit.Brain):
    def compute_forward(self, batch, stage):
        if stage is speechkit.Stage.TRAIN and self.step == 3:
            logging.getLogger("user").info("halfway through the epoch")
        return self.modules.model(batch[0].data)

    def compute_objectives(self, predictions, batch, stage):
        return torch.nn.functional.mse_loss(predictions, batch[1].data)

logging.basicConfig(level=logging.INFO, format="LOG %(name)s: %(message)s")
data = torch.utils.data.TensorDataset(torch.randn(6, 3), torch.randn(6, 1))
_, run_opts, _ = speechkit.parse_arguments(sys.argv[1:])
brain = Logs({"model": torch.nn.Linear(3, 1)}, lambda p: torch.optim.SGD(p, lr=0.1), None, run_opts)
brain.fit(range(1, 2), data, train_loader_kwargs={"batch_size": 1})
"""


@pytest.mark.slow  # a process loading torch: 5-20 s on a loaded machine
def test_training_bar_on_a_terminal_with_log_lines_above_it_never_on_its_line(tmp_path):
    (tmp_path / "train.py").write_text(TRAINING)
    code, screen = run_in_terminal([sys.executable, "train.py"], tmp_path)
    assert code == 0, screen
    assert "epoch 1 train:   0%|" in screen and "/6 [" in screen, screen  # cleared at the end (leave=False)
    [line] = [line for line in screen.split("\n") if "halfway through" in line]
    # What stays visible of the line (after its last carriage return) is the log line alone; printed onto the
    # bar's line it would follow the bar's text ("... 3/6 [00:00<...]LOG user: halfway ...").
    assert line.rstrip("\r").split("\r")[-1] == "LOG user: halfway through the epoch", repr(line)


BAR_COMMANDS = ("corpus", "manifest", "prepare-librispeech", "trim-silence", "mixtures", "embed", "separate",
                "transcribe", "infer", "evaluate")


@pytest.mark.parametrize("name", BAR_COMMANDS)
def test_every_command_with_a_bar_takes_both_progress_flags(name):
    parser = argparse.ArgumentParser()
    importlib.import_module(COMMANDS[name][0]).add_arguments(parser)
    for flag in ("--no-progress", "--noprogressbar"):
        action = next(a for a in parser._actions if flag in a.option_strings)
        assert action.dest == "no_progress"
    assert set(BAR_COMMANDS) <= set(COMMANDS)


def test_recipes_take_both_progress_flags():
    for flag in ("--no-progress", "--noprogressbar"):
        _, run_opts, overrides = parse_arguments(["hp.yaml", flag])
        assert run_opts.noprogressbar is True and overrides == {}


def test_speechkit_alone_prints_the_help_and_exits_2():
    result = subprocess.run([sys.executable, "-m", "speechkit"], cwd=REPO, env=clean_env(),
                            capture_output=True, text=True, timeout=TIMEOUT_S)
    assert result.returncode == 2
    assert "COMMAND" in result.stderr and "transcribe" in result.stderr, result.stderr
    helped = subprocess.run([sys.executable, "-m", "speechkit", "--help"], cwd=REPO, env=clean_env(),
                            capture_output=True, text=True, timeout=TIMEOUT_S)
    assert helped.returncode == 0 and "transcribe" in helped.stdout
