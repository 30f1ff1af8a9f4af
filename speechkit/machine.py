"""``speechkit.machine`` is :mod:`speechkit.experiment.machine`
under its former name, still imported by benchmarks.

The name is the same module object (not a copy of its names), so attributes set on one are seen by the other.
"""
import sys

from speechkit.experiment import machine

sys.modules[__name__] = machine
