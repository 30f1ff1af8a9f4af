"""The API reference (docs/api, Sphinx autodoc + napoleon) builds without a warning and lists every module."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.processes import REPO, clean_env

API = REPO / "docs" / "api"


def test_every_module_has_its_place_in_the_reference():
    documented = set()
    for page in API.glob("*.rst"):
        documented |= {line.split("::", 1)[1].strip() for line in page.read_text().splitlines()
                       if line.startswith(".. automodule::")}
    modules = {".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
               for path in (REPO / "speechkit").rglob("*.py") if path.name != "__main__.py"}
    assert modules - documented == set(), "add these modules to a page of docs/api"
    assert documented - modules == set(), "these pages of docs/api name modules that do not exist"


@pytest.mark.slow
def test_the_reference_builds_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    # The dummy builder reads every docstring as the HTML builder does, without writing pages (quicker).
    command = [sys.executable, "-m", "sphinx", "-b", "dummy", "-W", "--keep-going", "-q", str(API),
               str(tmp_path / "build")]
    result = subprocess.run(command, cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"sphinx warnings:\n{result.stderr[-6000:]}\n{result.stdout[-2000:]}"
