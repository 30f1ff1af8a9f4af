"""Checkpoint averaging: the N best by a key, floating tensors averaged, an averaged checkpoint loaded by
evaluation, and Brain's run option (the command alone: tests/unit/commands/test_average_checkpoints.py)."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from speechkit.brain import Brain
from speechkit.checkpoints import read_checkpoint
from speechkit.checkpoints.averaging import average_state_dicts, best_checkpoints
from speechkit.checkpoints.selection import select_checkpoint
from speechkit.cli import main as speechkit_main
from speechkit.errors import CheckpointError, RunOptionsError
from tests.unit.checkpoints.saved_checkpoints import save_three


def test_best_checkpoints_by_key_and_their_average(tmp_path):
    save_three(tmp_path)
    best = best_checkpoints(tmp_path, 2, min_key="WER")
    assert [c.meta["WER"] for c in best] == [10.0, 20.0]
    assert [c.meta["WER"] for c in best_checkpoints(tmp_path, 5, max_key="WER")] == [30.0, 20.0, 10.0]
    states = [torch.load(c.path / "model.ckpt", weights_only=True) for c in best]
    averaged = average_state_dicts(states)
    assert torch.equal(averaged["0.weight"], torch.full((2, 2), 2.5))
    assert int(averaged["1.num_batches_tracked"]) == 2  # an integer counter: the best checkpoint's
    with pytest.raises(CheckpointError, match="no checkpoint with the key 'CER'"):
        best_checkpoints(tmp_path, 2, min_key="CER")
    with pytest.raises(CheckpointError, match="different keys"):
        average_state_dicts([{"a": torch.zeros(1)}, {"b": torch.zeros(1)}])


class Identity(Brain):
    def compute_forward(self, batch, stage):
        return self.modules.model(batch[0])

    def compute_objectives(self, predictions, batch, stage):
        return predictions.sum() * 0


def test_evaluate_uses_the_average_of_the_best_checkpoints(tmp_path):
    model, checkpointer = save_three(tmp_path)
    brain = Identity({"model": model}, None, None, {"noprogressbar": True, "average_checkpoints": 2},
                     checkpointer)
    data = torch.utils.data.TensorDataset(torch.zeros(4, 2))
    brain.evaluate(data, min_key="WER", test_loader_kwargs={"batch_size": 2,
                                                            "collate_fn": torch.utils.data.default_collate})
    assert torch.equal(model[0].weight, torch.full((2, 2), 2.5))  # WER 10 (2.0) and 20 (3.0)


def test_an_averaged_checkpoint_is_a_checkpoint_that_evaluation_loads(tmp_path, capsys):
    model, checkpointer = save_three(tmp_path / "save")
    out = tmp_path / "avg"
    assert speechkit_main(["average-checkpoints", str(tmp_path / "save"), "--num", "2", "--min-key", "WER",
                           "--output", str(out)]) == 0
    averaged = read_checkpoint(out)  # meta.json, files checked, like a run's checkpoint
    assert averaged.info["averaged"]["key"] == "WER"
    assert [c["WER"] for c in averaged.info["averaged"]["meta"]] == [10.0, 20.0]
    assert averaged.info["files"] == ["model.ckpt"]
    assert select_checkpoint(out) == averaged
    with pytest.raises(CheckpointError, match="is one checkpoint: there is nothing to choose by 'WER'"):
        select_checkpoint(out, min_key="WER")
    # Averaging again replaces the earlier average; a folder that is not a checkpoint is left alone.
    assert speechkit_main(["average-checkpoints", str(tmp_path / "save"), "--num", "3", "--output",
                           str(out)]) == 0
    assert len(read_checkpoint(out).info["averaged"]["checkpoints"]) == 3
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    assert speechkit_main(["average-checkpoints", str(tmp_path / "save"), "--num", "2", "--output",
                           str(tmp_path / "other")]) == 1
    assert "is not a checkpoint folder" in capsys.readouterr().err
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
    speechkit_main(["average-checkpoints", str(tmp_path / "save"), "--num", "2", "--min-key", "WER",
                    "--output", str(out)])

    # --test_only --eval_checkpoint: the average is what is evaluated (the counter has no file there).
    brain = Identity({"model": model}, None, None, {"noprogressbar": True, "test_only": True,
                                                    "eval_checkpoint": str(out)}, checkpointer)
    data = torch.utils.data.TensorDataset(torch.zeros(4, 2))
    kwargs = {"batch_size": 2, "collate_fn": torch.utils.data.default_collate}
    brain.fit(None, data)  # skipped: --test_only
    brain.evaluate(data, min_key="WER", test_loader_kwargs=kwargs)
    assert torch.equal(model[0].weight, torch.full((2, 2), 2.5))  # WER 10 (2.0) and 20 (3.0)
    # Any checkpoint of the run can be chosen the same way, e.g. the worst one.
    worst = max(checkpointer.list_checkpoints(), key=lambda c: c.meta["WER"])
    brain.run_opts = dataclasses.replace(brain.run_opts, eval_checkpoint=str(worst.path))
    brain.evaluate(data, test_loader_kwargs=kwargs)
    assert torch.equal(model[0].weight, torch.full((2, 2), 1.0))
    brain.run_opts = dataclasses.replace(brain.run_opts, eval_checkpoint=str(tmp_path / "nothing"))
    with pytest.raises(CheckpointError, match="nothing: not a checkpoint"):
        brain.evaluate(data, test_loader_kwargs=kwargs)
    brain.run_opts = dataclasses.replace(brain.run_opts, eval_checkpoint=str(out), average_checkpoints=2)
    with pytest.raises(RunOptionsError, match="--eval_checkpoint and --average_checkpoints"):
        brain.evaluate(data, test_loader_kwargs=kwargs)


def test_an_averaged_checkpoint_lacking_a_module_is_refused(tmp_path):
    model, checkpointer = save_three(tmp_path / "save")
    assert speechkit_main(["average-checkpoints", str(tmp_path / "save"), "--num", "2", "--output",
                           str(tmp_path / "avg"), "--modules", "model"]) == 0
    other = torch.nn.Linear(2, 2)
    brain = Identity({"model": model, "head": other}, None, None,
                     {"noprogressbar": True, "eval_checkpoint": str(tmp_path / "avg")})
    with pytest.raises(CheckpointError, match=r"holds no weights for 'head' \(expected head.ckpt\)"):
        brain.evaluate(torch.utils.data.TensorDataset(torch.zeros(2, 2)),
                       test_loader_kwargs={"batch_size": 2, "collate_fn": torch.utils.data.default_collate})
