"""Command-line parsing: real types, overrides, precedence, and the --help texts users read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from speechkit.errors import RunOptionsError
from speechkit.experiment.run_options import RunOptions, parse_arguments

ROOT = Path(__file__).resolve().parents[3]


def test_flags_arrive_with_their_types():
    _, opts, overrides = parse_arguments(
        [
            "hp.yaml",
            "--max_grad_norm",
            "0.5",
            "--noprogressbar",
            "false",
            "--ckpt_interval_minutes=1.5",
            "--debug",
            "--nonfinite_patience",
            "4",
        ]
    )
    assert opts.max_grad_norm == 0.5 and isinstance(opts.max_grad_norm, float)
    assert opts.noprogressbar is False  # "false" must not be truthy
    assert opts.ckpt_interval_minutes == 1.5 and opts.debug is True and opts.nonfinite_patience == 4
    assert overrides == {}


def test_everything_else_is_a_yaml_override_and_abbreviations_are_not_taken_for_flags():
    _, opts, overrides = parse_arguments(["hp.yaml", "--lr=0.1", "--model.dim", "256", "--comp", "1e-3"])
    assert overrides == {"lr": 0.1, "model.dim": 256, "comp": 0.001}
    assert opts.compile is False


def test_bad_flag_values_name_the_option():
    with pytest.raises(RunOptionsError, match="max_grad_norm"):
        parse_arguments(["hp.yaml", "--max_grad_norm", "big"])
    with pytest.raises(RunOptionsError, match="precision"):
        parse_arguments(["hp.yaml", "--precision", "fp8"])
    with pytest.raises(RunOptionsError, match="--lr has no value"):
        parse_arguments(["hp.yaml", "--lr"])


def test_default_then_yaml_then_command_line():
    _, opts, _ = parse_arguments(["hp.yaml", "--precision", "bf16"])
    merged = opts.merged_with({"precision": "fp16", "max_grad_norm": 1, "lr": 3})
    assert merged.precision == "bf16"  # the command line wins
    assert merged.max_grad_norm == 1.0  # the YAML beats the default
    assert RunOptions().merged_with({}).max_grad_norm == 5.0
    # a recipe's data-loading `num_workers` must never turn into self-spawned training processes
    assert RunOptions().merged_with({"num_workers": 4, "worker_id": 1}).num_workers is None


def _run(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_speechkit_help_lists_the_commands():
    result = _run("-m", "speechkit", "--help")
    assert result.returncode == 0
    for command in ("new-recipe", "manifest", "fetch", "transcribe", "export"):
        assert command in result.stdout


@pytest.mark.slow  # starts an interpreter that imports torch
def test_recipe_help_lists_the_run_options():
    result = _run("recipes/minimal/train.py", "recipes/minimal/hparams/train.yaml", "--help")
    assert result.returncode == 0, result.stderr
    for flag in (
        "--precision",
        "--grad_accumulation_factor",
        "--max_grad_norm",
        "--ckpt_interval_minutes",
        "--noprogressbar",
        "--test_only",
        "--log_config",
    ):
        assert flag in result.stdout


def test_a_tagged_override_builds_its_object_and_bad_yaml_names_the_override(tmp_path):
    from speechkit.experiment.hparams import load_hparams

    (tmp_path / "hp.yaml").write_text("rate: 8000\naugmentation: null\n")
    _, _, overrides = parse_arguments([str(tmp_path / "hp.yaml"), "--augmentation",
                                       "!new:speechkit.augment.SpeedPerturb {speed_range: [0.95, 1.05], "
                                       "sample_rate: !ref <rate>}"])
    augmentation = load_hparams(tmp_path / "hp.yaml", overrides)["augmentation"]
    assert type(augmentation).__name__ == "SpeedPerturb"
    assert augmentation.speed_range == (0.95, 1.05) and augmentation.sample_rate == 8000
    for value in ("!new:a.B {b: [}", "[1, 2"):
        with pytest.raises(RunOptionsError, match="override --augmentation is not valid YAML"):
            parse_arguments(["hp.yaml", "--augmentation", value])
