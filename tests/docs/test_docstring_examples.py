"""How the package's docstring examples are collected (conftest.py at the root): which modules skip or fail.

The examples themselves run as items of the suite (``testpaths`` names ``speechkit``); these tests check the
rule for modules that cannot be imported: a missing optional dependency skips the module, while a missing
module of speechkit itself (a broken import) fails the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Runs pytest on two modules with one import made impossible for each, as if the package were not installed:
# fastapi (the serve extra) for the server's routes, speechkit's own manifest module for the trimmer.
RUN_WITHOUT = """
import sys
import pytest
sys.modules["fastapi"] = None
sys.modules["speechkit.data.manifest"] = None
raise SystemExit(pytest.main(["-q", "-rA", "-p", "no:randomly", "--continue-on-collection-errors",
                              "speechkit/serve/app.py",
                              "speechkit/data/trim.py", "speechkit/data/fields.py"]))
"""


def run_without_imports() -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-c", RUN_WITHOUT], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=300)
    return result.stdout + result.stderr


@pytest.mark.slow  # a second pytest, importing torch
def test_a_module_needing_a_missing_optional_dependency_skips_and_a_broken_speechkit_import_fails():
    output = run_without_imports()
    lines = output.splitlines()
    skip_reason = "speechkit/serve/app.py: needs the optional dependency 'fastapi'"
    assert any(line.startswith("SKIPPED") and skip_reason in line for line in lines), output
    assert any(line.startswith("ERROR speechkit/data/trim.py") for line in lines), output
    # the modules that import fine still run their examples
    assert any(line.startswith("PASSED speechkit/data/fields.py::") for line in lines), output
