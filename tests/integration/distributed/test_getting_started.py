"""The getting-started recipes run unchanged under torchrun and the self-spawning launcher (2 gloo workers).

Neither script calls ``speechkit.distributed.init`` itself: ``speechkit.recipe.start`` parses the command line
(starting the workers when self-spawning), loads the YAML and joins the process group. The README's script is
taken from README.md itself, so the test fails when the README stops being runnable.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.integration.distributed.conftest import REPO

pytestmark = pytest.mark.slow

LIMIT_S = 240  # a few seconds of work; generous for a loaded 2-core machine


def readme_recipe(folder: Path) -> tuple:
    """Write the YAML and the script of README's "A recipe in one screen" into ``folder``, as printed."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## A recipe in one screen"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    [yaml_text] = [body for language, body in blocks if language == "yaml"]
    [script] = [body for language, body in blocks if language == "python"]
    (folder / "train.yaml").write_text(yaml_text)
    (folder / "train.py").write_text(script)
    return folder / "train.py", folder / "train.yaml", []


def minimal_recipe(folder: Path) -> tuple:
    recipe = REPO / "recipes" / "minimal"
    return recipe / "train.py", recipe / "hparams" / "train.yaml", [
        "--output_folder", str(folder / "results"), "--number_of_epochs", "1"]


def command(launcher: str, torchrun_exe: str, script: Path, hparams: Path, overrides: list) -> list:
    if launcher == "torchrun":
        return [torchrun_exe, "--standalone", "--nproc_per_node=2", str(script), str(hparams), *overrides,
                "--noprogressbar"]
    return [sys.executable, str(script), "--num-workers", "2", "--", str(hparams), *overrides,
            "--noprogressbar"]


@pytest.mark.parametrize("launcher", ["torchrun", "self-spawning"])
@pytest.mark.parametrize("recipe", ["README", "recipes/minimal"])
def test_recipe_runs_unchanged_on_two_workers(tmp_path, processes, make_env, torchrun_exe, launcher, recipe):
    script, hparams, overrides = (readme_recipe if recipe == "README" else minimal_recipe)(tmp_path)
    group = processes(timeout=LIMIT_S)
    group.start(command(launcher, torchrun_exe, script, hparams, overrides), make_env(), cwd=tmp_path)
    [(code, output, _)] = group.wait()
    assert code == 0, output
    assert "DistributedError" not in output, output
    [log] = (tmp_path / "results").glob("**/log.txt")  # one experiment directory, written by rank 0 only
    log_text = log.read_text()
    assert "Effective batch: 2 process(es)" in log_text, log_text
    assert (log.parent / "hyperparams.yaml").is_file() and (log.parent / "env.json").is_file()
    assert "stage: valid" in (log.parent / "train_log.txt").read_text()
    if launcher == "self-spawning":
        assert "speechkit launcher: worker 0 exited with code 0" in output
        assert "speechkit launcher: worker 1 exited with code 0" in output
