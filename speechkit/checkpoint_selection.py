"""``speechkit.checkpoint_selection`` is :mod:`speechkit.checkpoints.selection`
under its former name, still imported by the export command.

The name is the same module object (not a copy of its names), so attributes set on one are seen by the other.
"""
import sys

from speechkit.checkpoints import selection

sys.modules[__name__] = selection
