"""``speechkit.schedulers`` is :mod:`speechkit.engine.schedulers`
under its documented name, the one recipe YAMLs name (``!new:speechkit.schedulers.NoamScheduler``).

The name is the same module object (not a copy of its names), so attributes set on one are seen by the other.
"""
import sys

from speechkit.engine import schedulers

sys.modules[__name__] = schedulers
