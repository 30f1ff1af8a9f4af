"""Installed from a wheel (not ``pip install -e``), ``speechkit new-recipe`` finds the templates shipped in
the package and copies one whose paths stay inside the copy.

The wheel is built from a copy of the sources (no build folder left in the checkout), without build isolation
(no download), and installed without dependencies into a fresh virtual environment that sees the test
environment's packages (torch is not installed again) but not its editable speechkit.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers.processes import REPO

pytestmark = pytest.mark.slow  # a build and an install: about 20 s

SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "speechkit", "templates")


def _run(command: list, cwd: Path, env: dict) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_new_recipe_from_an_installed_wheel(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        copy(REPO / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__", "results")}
                                           if (REPO / name).is_dir() else {}))
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "SPEECHKIT_TEMPLATES")}
    env["PIP_NO_INDEX"] = "1"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
          str(tmp_path / "dist"), str(source)], tmp_path, env)
    wheel = next((tmp_path / "dist").glob("speechkit-*.whl"))

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     tmp_path, env).strip())
    # After the venv's own packages: torch and the rest, without the editable speechkit's finder (a plain
    # path line does not run that folder's .pth files).
    (site / "test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
         tmp_path, env)

    work = tmp_path / "work"
    work.mkdir()
    where = _run([str(python), "-c", "import speechkit, speechkit.templating as t; "
                  "print(speechkit.__file__); print(t.templates_root())"], work, env).split()
    assert where[0].startswith(str(site)), where  # the installed package, not the checkout
    assert Path(where[1]) == site / "speechkit" / "templates", where
    listed = _run([str(python), "-m", "speechkit", "new-recipe", "--list"], work, env).split()
    assert {"speech_recognition", "separation"} <= set(listed) and "speech_recognition/ASR" not in listed

    _run([str(python), "-m", "speechkit", "new-recipe", "speech_recognition", "my_asr"], work, env)
    train_yaml = (work / "my_asr" / "ASR" / "hparams" / "train.yaml").read_text()
    assert "data_folder: ../data/SynthSpeech\n" in train_yaml  # inside the copy, not in site-packages
    assert str(site) not in train_yaml
    assert not list((site / "speechkit" / "templates").rglob("results")), "nothing written into the package"
