"""Sphinx configuration of speechkit's API reference (built from the docstrings).

Build: ``python -m sphinx -W --keep-going -b html docs/api build/api`` (``-W``: a warning fails the build,
as in tests/docs/test_api_reference.py).
"""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

project = "speechkit"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
# Docstrings are Google style (Args:, Returns:, Raises:, Example:), which napoleon reads.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the signatures say it; annotations of torch types would only add noise
autodoc_default_options = {"members": True, "show-inheritance": True}
# Optional extras are imported only by the modules that need them; keep the build independent of them.
autodoc_mock_imports = ["torchaudio", "matplotlib", "tensorboard", "scipy", "mir_eval", "transformers"]
html_theme = "alabaster"
exclude_patterns = ["_build"]
master_doc = "index"
nitpicky = False

# One page per package, written at each build from the modules on disk, so a new module is in the reference
# (and its docstrings checked) without anyone listing it.
from api_pages import write_pages  # noqa: E402

# The task registry imports the modules of the shipped tasks; importing it first gives them that order.
import speechkit.jobs.tasks  # noqa: E402,F401

write_pages(os.path.dirname(os.path.abspath(__file__)))
