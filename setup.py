"""The configuration lives in pyproject.toml; this file adds one build step: the recipe templates.

``templates/`` sits at the repository's top (recipes and docs refer to ``templates/<name>``); a wheel carries
it as package data, ``speechkit/templates/``, so that ``speechkit new-recipe`` works from a regular install
too (``speechkit.templating.templates_root`` looks there first). An editable install reads the checkout's
folder directly and gets no copy.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

TEMPLATES = Path(__file__).resolve().parent / "templates"
#: The outputs of a template run in place are never shipped (speechkit.templating.IGNORED_NAMES).
IGNORED = ("__pycache__", "results", ".pytest_cache", "*.pyc")


class BuildPyWithTemplates(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False) or not TEMPLATES.is_dir():
            return
        target = Path(self.build_lib) / "speechkit" / "templates"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(TEMPLATES, target, ignore=shutil.ignore_patterns(*IGNORED))


setup(cmdclass={"build_py": BuildPyWithTemplates})
