"""Sphinx configuration of speechkit's API reference (built from the docstrings).

Build: ``python -m sphinx -W --keep-going -b html docs/api build/api`` (``-W``: a warning fails the build,
as in tests/docs/test_api_reference.py).
"""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

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
nitpicky = False

# The task registry imports the modules of the shipped tasks; importing it first gives them that order.
import speechkit.jobs.tasks  # noqa: E402,F401
