"""``speechkit.weights_origin`` is :mod:`speechkit.checkpoints.weights_origin`
under its former name, still imported by pretrained models' loading and export.

The name is the same module object (not a copy of its names), so attributes set on one are seen by the other.
"""
import sys

from speechkit.checkpoints import weights_origin

sys.modules[__name__] = weights_origin
