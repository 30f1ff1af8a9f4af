"""``speechkit.pretrained.fetching`` is :mod:`speechkit.pretrained.sources.fetching` under its former name.

Kept because model folders' YAMLs may name a class under it
(``!new:speechkit.pretrained.fetching.FetchSource``, on the allowlist); new code imports
:mod:`speechkit.pretrained.sources.fetching`. The name is the same module object (not a copy of its names),
so attributes set on one are seen by the other.
"""
import sys

from speechkit.pretrained.sources import fetching

sys.modules[__name__] = fetching
