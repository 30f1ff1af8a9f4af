"""Values that made raw library errors or ran silently are refused up front, naming the option."""
from __future__ import annotations

import pytest

from speechkit.augment import Reverb
from speechkit.cli import main as speechkit_main
from speechkit.errors import HparamsError


@pytest.mark.parametrize("max_order", [100000, -5, 2.5, True])
def test_reverb_max_order_out_of_bounds_is_refused_before_simulating(max_order):
    with pytest.raises(HparamsError, match=r"Reverb: max_order .* must be an int in \[0, 20\]"):
        Reverb(rooms=1, max_order=max_order)


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-20"])
def test_chunk_ms_must_be_a_positive_number(value, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        speechkit_main(["transcribe", str(tmp_path), str(tmp_path / "a.wav"), "--stream", "--chunk-ms",
                        value])
    assert exit_info.value.code == 2
    assert "--chunk-ms" in capsys.readouterr().err


def test_corpus_ranges_are_positive_finite_and_ordered(tmp_path, capsys):
    for flag, values in (("--speed-range", ["0", "0"]), ("--speed-range", ["1.2", "0.9"]),
                         ("--snr-range", ["nan", "10"])):
        with pytest.raises(SystemExit) as exit_info:
            speechkit_main(["corpus", str(tmp_path / "c"), flag, *values])
        assert exit_info.value.code == 2
        assert flag in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
