"""Reverb options that made raw library errors are refused up front, naming the option."""
from __future__ import annotations

import pytest

from speechkit.augment import Reverb
from speechkit.errors import HparamsError


@pytest.mark.parametrize("max_order", [100000, -5, 2.5, True])
def test_reverb_max_order_out_of_bounds_is_refused_before_simulating(max_order):
    with pytest.raises(HparamsError, match=r"Reverb: max_order .* must be an int in \[0, 20\]"):
        Reverb(rooms=1, max_order=max_order)
