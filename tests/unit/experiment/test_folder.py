"""The experiment directory records what ran; logging and seeding helpers."""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from speechkit.errors import ExperimentError, RunOptionsError
from speechkit.experiment import create_experiment_directory, seed_everything, setup_logging
from speechkit.experiment.run_options import parse_arguments


@pytest.fixture(autouse=True)
def _restore_root_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)


def test_directory_holds_hparams_command_environment_and_log(tmp_path):
    hp = tmp_path / "hp.yaml"
    hp.write_text("lr: 0.1\nfolder: !ref out/<lr>\n")
    _, run_opts, overrides = parse_arguments([str(hp), "--lr", "0.5", "--seed", "3"])
    out = create_experiment_directory(tmp_path / "exp", hp, overrides, run_opts=run_opts)
    assert (out / "hyperparams.original.yaml").read_text() == hp.read_text()
    assert "lr: 0.5" in (out / "hyperparams.yaml").read_text()
    assert (out / "command.txt").read_text().strip()
    env = json.loads((out / "env.json").read_text())
    assert env["torch"] == torch.__version__ and env["speechkit"] and env["python"]
    assert "git_commit" in env and env["machine"].startswith("machine: ")  # CPU, instruction sets, threads
    logging.getLogger("speechkit.test").info("hello log")
    assert "hello log" in (out / "log.txt").read_text()


def test_seed_everything_makes_draws_repeat():
    seed_everything(5)
    first = (random.random(), torch.rand(1).item())
    seed_everything(5)
    assert (random.random(), torch.rand(1).item()) == first


def test_bad_log_config_is_a_clear_error(tmp_path):
    config = tmp_path / "log.yaml"
    config.write_text("version: 1\nhandlers: {h: {class: no.such.Handler}}\n")
    with pytest.raises(RunOptionsError, match="log_config.*log.yaml"):
        setup_logging(None, str(config))


HOLDER = """
import sys
from speechkit.experiment import create_experiment_directory
create_experiment_directory(sys.argv[1], sys.argv[2], {"lr": 0.5})
print("ready", flush=True)
sys.stdin.read()  # hold the folder until the test closes our stdin
"""


def test_a_second_run_is_refused_before_it_writes_anything(tmp_path):
    hp = tmp_path / "hp.yaml"
    hp.write_text("lr: 0.1\n")
    out = tmp_path / "exp"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3]), "OMP_NUM_THREADS": "1"}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out), str(hp)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = holder.stdout.readline()
        assert line == "ready\n", f"{line}{holder.stderr.read() if holder.poll() is not None else ''}"
        record = {name: (out / name).read_bytes() for name in
                  ("hyperparams.yaml", "hyperparams.original.yaml", "command.txt", "env.json", "log.txt")}
        other = tmp_path / "other.yaml"
        other.write_text("lr: 0.9\nextra: 1\n")
        _, run_opts, overrides = parse_arguments([str(other), "--seed", "7"])
        with pytest.raises(ExperimentError, match=rf"{out} is in use by another run \(pid {holder.pid} on "
                                                  r"host .*hyperparams.yaml, command.txt, env.json"):
            create_experiment_directory(out, other, overrides, run_opts=run_opts)
        logging.getLogger("speechkit.test").warning("after the refusal")
        # The running experiment's record is untouched, its log included.
        assert {name: (out / name).read_bytes() for name in record} == record
    finally:
        holder.stdin.close()
        holder.wait(60)
    assert holder.returncode == 0, holder.stderr.read()
    # The lock went with the process: the folder is free again.
    create_experiment_directory(out, other, overrides, run_opts=run_opts)
    assert "extra: 1" in (out / "hyperparams.yaml").read_text()
