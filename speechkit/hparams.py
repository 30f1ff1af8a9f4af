"""``speechkit.hparams`` is :mod:`speechkit.experiment.hparams`
under its documented name.

The name is the same module object (not a copy of its names), so attributes set on one are seen by the other.
"""
import sys

from speechkit.experiment import hparams

sys.modules[__name__] = hparams
