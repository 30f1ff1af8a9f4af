"""The experiment directory records what ran; logging and seeding helpers."""

from __future__ import annotations

import json
import logging
import random

import pytest
import torch

from speechkit.errors import RunOptionsError
from speechkit.experiment import create_experiment_directory, seed_everything, setup_logging
from speechkit.run_options import parse_arguments


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
    assert "git_commit" in env
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
