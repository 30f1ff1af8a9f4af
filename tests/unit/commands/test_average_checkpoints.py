"""``speechkit average-checkpoints``: writes the average of the best checkpoints and says where the
weights came from; refuses to average fewer than asked."""
from __future__ import annotations

import json

import torch

from speechkit.checkpoints import Checkpointer
from speechkit.cli import main as speechkit_main
from tests.unit.checkpoints.saved_checkpoints import save_three


def test_cli_writes_averaged_weights_and_their_sources(tmp_path, capsys):
    save_three(tmp_path / "save")
    out = tmp_path / "avg"
    assert speechkit_main(["average-checkpoints", str(tmp_path / "save"), "--num", "3", "--min-key", "WER",
                           "--output", str(out)]) == 0
    weights = torch.load(out / "model.ckpt", weights_only=True)
    assert torch.equal(weights["0.bias"], torch.full((2,), 2.0))
    record = json.loads((out / "averaged.json").read_text())
    assert record["modules"] == ["model"] and len(record["checkpoints"]) == 3  # the counter is no weights
    assert speechkit_main(["average-checkpoints", str(tmp_path / "none"), "--output", str(out)]) == 1
    assert "no checkpoint" in capsys.readouterr().err


def test_cli_refuses_fewer_checkpoints_than_asked(tmp_path, capsys):
    model = torch.nn.Linear(2, 2)
    Checkpointer(tmp_path / "save", {"model": model}).save_checkpoint(meta={"WER": 5.0})
    out = tmp_path / "avg"
    assert speechkit_main(["average-checkpoints", str(tmp_path / "save"), "--num", "2", "--min-key", "WER",
                           "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert "holds 1 checkpoint(s) with the key 'WER', not the 2 asked for (--num 2)" in err
    assert "ckpt_keep" in err and not out.exists()
