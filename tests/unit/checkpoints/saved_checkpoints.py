"""Three saved checkpoints with known weights and WERs, for the averaging tests (library and command)."""
from __future__ import annotations

import torch

from speechkit.checkpoints import Checkpointer


def save_three(folder):
    """Three checkpoints of a Linear+BatchNorm with WER 30, 10, 20 and weights filled with 1, 2, 3."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    checkpointer = Checkpointer(folder, {"model": model, "counter": torch.nn.Identity()})
    for fill, wer in ((1.0, 30.0), (2.0, 10.0), (3.0, 20.0)):
        with torch.no_grad():
            for p in model.parameters():
                p.fill_(fill)
        model[1].num_batches_tracked.fill_(int(fill))
        checkpointer.save_checkpoint(meta={"WER": wer})
    return model, checkpointer
