"""The API reference (docs/api, Sphinx autodoc + napoleon) builds without a warning and lists every module."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.helpers.processes import REPO, clean_env

API = REPO / "docs" / "api"


def test_every_module_is_on_exactly_one_page(tmp_path):
    spec = importlib.util.spec_from_file_location("api_pages", API / "api_pages.py")
    api_pages = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(api_pages)
    packages = api_pages.write_pages(str(API))
    listed = [line.split("::", 1)[1].strip() for package in packages
              for line in (API / "_generated" / f"{package}.rst").read_text().splitlines()
              if line.startswith(".. automodule::")]
    on_disk = {".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
               for path in (REPO / "speechkit").rglob("*.py") if path.name != "__main__.py"}
    assert sorted(listed) == sorted(on_disk)
    assert "speechkit.brain" in (API / "_generated" / "speechkit.rst").read_text()
    assert packages[0] == "speechkit" and "_generated/data" in (API / "index.rst").read_text()


@pytest.mark.slow
def test_the_reference_builds_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    # The dummy builder reads every docstring as the HTML builder does, without writing pages (quicker).
    command = [sys.executable, "-m", "sphinx", "-b", "dummy", "-W", "--keep-going", "-q", str(API),
               str(tmp_path / "build")]
    result = subprocess.run(command, cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"sphinx warnings:\n{result.stderr[-6000:]}\n{result.stdout[-2000:]}"
