"""A recipe's configuration or data mistake prints one line naming it, not a traceback; --debug (or
SPEECHKIT_TRACEBACK=1) shows the traceback."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers.processes import REPO

pytestmark = pytest.mark.slow  # two interpreters start

SCRIPT = textwrap.dedent("""
    import sys
    from speechkit.experiment.recipe import start
    start(sys.argv[1:])
""")


def _run(tmp_path, *args):
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "train.yaml").write_text(f"output_folder: {tmp_path / 'out'}\nlm_weight: 0.5\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SPEECHKIT_TRACEBACK", None)
    return subprocess.run([sys.executable, str(tmp_path / "train.py"), str(tmp_path / "train.yaml"), *args],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


def test_a_misspelled_override_prints_one_line_and_debug_the_traceback(tmp_path):
    done = _run(tmp_path, "--lm_wieght", "0.3")
    assert done.returncode == 1
    assert "error: " in done.stderr and "override 'lm_wieght'" in done.stderr, done.stderr
    assert "did you mean 'lm_weight'" in done.stderr and "Traceback" not in done.stderr, done.stderr
    debugging = _run(tmp_path, "--lm_wieght", "0.3", "--debug")
    assert debugging.returncode == 1
    assert "Traceback" in debugging.stderr and "HparamsError" in debugging.stderr, debugging.stderr
