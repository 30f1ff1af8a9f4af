"""``speechkit.recipe`` is :mod:`speechkit.experiment.recipe`
under its documented name, the one recipe scripts import.

The name is the same module object (not a copy of its names), so attributes set on one are seen by the other.
"""
import sys

from speechkit.experiment import recipe

sys.modules[__name__] = recipe
