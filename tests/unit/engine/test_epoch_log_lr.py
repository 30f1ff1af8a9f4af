"""The epoch log's learning rate: where the schedule stood at the end of the epoch, with where it started when
a warmup moved it (`lr: 0.001 (from 1.5e-05)`), not the first value alone; plot-log reads the end value."""
from __future__ import annotations

import torch

import speechkit
from speechkit.checkpoints import EpochCounter
from speechkit.engine.progress import summary_line
from speechkit.engine.schedulers import WarmupCosineScheduler
from speechkit.plot_log import parse_train_log


def test_summary_line_shows_the_last_value_and_where_it_started():
    assert "| lr: 0.001 (from 1.5e-05) |" in summary_line("train", 1, 0.5, 1.0, (1.5e-05, 0.001))
    assert "| lr: 0.001 |" in summary_line("train", 2, 0.5, 1.0, (0.001, 0.001))
    assert "| lr: 0.001 |" in summary_line("train", 2, 0.5, 1.0, 0.001)
    assert "lr" not in summary_line("valid", 2, 0.5, 1.0, None)


def test_a_warmup_epoch_logs_its_range_and_plot_log_reads_the_end(tmp_path):
    class Regression(speechkit.Brain):
        def compute_forward(self, batch, stage):
            return self.modules.model(batch[0])

        def compute_objectives(self, predictions, batch, stage):
            return torch.nn.functional.mse_loss(predictions, batch[1])

    data = torch.utils.data.TensorDataset(torch.randn(16, 2), torch.randn(16, 1))
    log = tmp_path / "train_log.txt"
    brain = Regression({"model": torch.nn.Linear(2, 1)}, lambda p: torch.optim.SGD(p, lr=0.1),
                       {"lr_scheduler": WarmupCosineScheduler(0.1, warmup_steps=8), "noprogressbar": True,
                        "train_log": str(log), "num_threads": 1})
    brain.fit(EpochCounter(2), data, train_loader_kwargs={"batch_size": 2,
                                                          "collate_fn": torch.utils.data.default_collate})
    first_epoch = log.read_text().splitlines()[0]
    end, start = first_epoch.split("| lr: ")[1].split(" |")[0].replace("(from ", "").rstrip(")").split()
    assert 0 < float(start) < float(end), first_epoch  # warming up: the epoch ended higher than it began
    assert float(end) == parse_train_log(log)["train"]["lr"][0][1]
