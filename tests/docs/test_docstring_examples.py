"""How the package's docstring examples are collected (conftest.py at the root): which modules skip or fail.

The examples themselves run as items of the suite (``testpaths`` names ``speechkit``); these tests check the
rule for modules that cannot be imported: a missing optional dependency skips the module, while a missing
module of speechkit itself (a broken import) fails the run; and that a module kept under a former name runs
its examples once, and stays the new module under its former name after the collection.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Runs pytest on two modules with one import made impossible for each, as if the package were not installed:
# fastapi (the serve extra) for the server's routes, speechkit's own manifest module for the trimmer; and a
# module under its former name, already imported.
RUN_WITHOUT = """
import sys
import pytest
sys.modules["fastapi"] = None
sys.modules["speechkit.data.manifest"] = None
import speechkit.weights_origin  # as the package's own modules import it, before their collection
raise SystemExit(pytest.main(["-q", "-rA", "-p", "no:randomly", "--continue-on-collection-errors",
                              "speechkit/serve/app.py",
                              "speechkit/data/trim.py", "speechkit/data/fields.py",
                              "speechkit/weights_origin.py", "speechkit/checkpoints/weights_origin.py"]))
"""


# Collects the whole package as a whole run does (running only the schedules' examples), then looks at the
# former name a recipe YAML uses: ``!new:speechkit.schedulers.NoamScheduler`` resolves through the attribute.
COLLECT_THEN_LOOK = """
import sys
import pytest
code = pytest.main(["-q", "-p", "no:randomly", "speechkit", "-k", "schedulers"])
from speechkit import schedulers
print("FORMER NAME:", schedulers is sys.modules["speechkit.engine.schedulers"],
      hasattr(schedulers, "NoamScheduler"))
raise SystemExit(code)
"""


def run_script(script: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=300)
    return result.stdout + result.stderr


@pytest.mark.slow  # a second pytest, importing torch
def test_missing_optional_dependencies_skip_broken_imports_fail_and_former_names_run_once():
    output = run_script(RUN_WITHOUT)
    lines = output.splitlines()
    skip_reason = "speechkit/serve/app.py: needs the optional dependency 'fastapi'"
    assert any(line.startswith("SKIPPED") and skip_reason in line for line in lines), output
    assert any(line.startswith("ERROR speechkit/data/trim.py") for line in lines), output
    # the modules that import fine still run their examples
    assert any(line.startswith("PASSED speechkit/data/fields.py::") for line in lines), output
    # a module kept under a former name is its new module: its examples run once, from the new file
    assert any(line.startswith("PASSED speechkit/checkpoints/weights_origin.py::") for line in lines), output
    assert not any(line.startswith("PASSED speechkit/weights_origin.py") for line in lines), output


@pytest.mark.slow  # a second pytest, importing the whole package
def test_a_former_name_is_still_the_new_module_after_the_examples_are_collected():
    output = run_script(COLLECT_THEN_LOOK)
    assert "passed" in output and "failed" not in output, output
    assert "FORMER NAME: True True" in output.splitlines(), output
