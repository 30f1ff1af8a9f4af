"""benchmarks/separation.py runs and prints its table (tiny sizes; the figures are not checked)."""
from __future__ import annotations

from pathlib import Path

from tests.helpers.scripts import load_script

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "separation.py"


def test_separation_benchmark_prints_a_table(capsys):
    module = load_script(SCRIPT, "separation_benchmark")
    assert module.main(["--presets", "tiny", "--batch", "1", "--seconds", "0.2", "--steps", "1",
                        "--dtypes", "fp32"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| tiny")]
    assert [row.split("|")[3].strip() for row in rows[:2]] == ["speechkit", "conv1d"]
    assert len(rows) == 3 and any("torchaudio" in row for row in rows)


def test_torchaudio_peer_has_our_configuration():
    """Run where torchaudio matches torch (benchmarks/peer_env.sh builds such an environment)."""
    import pytest

    module = load_script(SCRIPT, "separation_benchmark")
    model, reason = module.torchaudio_model("small", 2, "relu")
    if model is None:
        pytest.skip(reason)
    ours = module.ConvTasNet.from_preset("small", num_speakers=2)
    assert module.same_parameter_shapes(ours, model)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in model.parameters())
    assert module.same_parameter_shapes(ours, module.torchaudio_model("small", 3, "relu")[0]) is False
