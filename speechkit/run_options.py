"""``speechkit.run_options`` is :mod:`speechkit.experiment.run_options`
under its documented name.

The name is the same module object (not a copy of its names), so attributes set on one are seen by the other.
"""
import sys

from speechkit.experiment import run_options

sys.modules[__name__] = run_options
