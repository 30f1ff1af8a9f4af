"""Which optimizer hyperparameters a resumed run uses: the checkpoint's or the hparams'.

Loading an optimizer's state also loads its hyperparameters (``lr``, ``weight_decay``, ``betas``, ...), so a
run resumed after editing ``lr`` in the YAML would silently keep the old value. The run option
``--resume_optimizer_hparams`` chooses: ``checkpoint`` (the default: continue exactly the saved run) or
``hparams`` (apply the values the YAML and the command line give). Either way every value that differs is
logged once, with the side that wins. With a learning-rate scheduler, ``lr`` is the scheduler's business (its
settings come from the hparams, its position from the checkpoint) and is left out of the comparison.

Example:
    >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    >>> wanted = optimizer_hyperparameters({"optimizer": opt})
    >>> opt.param_groups[0]["lr"] = 0.5                     # what a checkpoint brought back
    >>> reconcile_optimizers({"optimizer": opt}, wanted, "hparams", "save/CKPT+x")
    >>> opt.param_groups[0]["lr"]
    0.1
"""

from __future__ import annotations

import logging

import torch

logger = logging.getLogger(__name__)

RESUME_CHOICES = ("checkpoint", "hparams")
# Keys of a param group that are bookkeeping, not hyperparameters a user sets.
_NOT_HYPERPARAMETERS = {"params", "param_names", "initial_lr"}


def optimizer_hyperparameters(optimizers: dict) -> dict:
    """``{name: [{key: value} per param group]}`` as built from the hparams (call before recovery)."""
    return {
        name: [{k: _copy(v) for k, v in group.items() if k not in _NOT_HYPERPARAMETERS}
               for group in optimizer.param_groups]
        for name, optimizer in optimizers.items()
    }


def reconcile_optimizers(optimizers: dict, wanted: dict, policy: str, checkpoint, skip: tuple = ()) -> None:
    """After recovery, log where the checkpoint's hyperparameters differ from ``wanted``; apply them if asked.

    Args:
        optimizers: ``{name: torch.optim.Optimizer}`` holding the recovered states.
        wanted: :func:`optimizer_hyperparameters` taken before recovery.
        policy: ``"checkpoint"`` keeps the recovered values, ``"hparams"`` writes ``wanted`` back.
        checkpoint: the recovered checkpoint's folder (for the log line).
        skip: keys another object sets (``("lr",)`` under a learning-rate scheduler).
    """
    if policy not in RESUME_CHOICES:
        raise ValueError(f"policy must be one of {RESUME_CHOICES}, got {policy!r}")
    differences = []
    for name, optimizer in optimizers.items():
        groups = wanted.get(name, [])
        for index, (group, target) in enumerate(zip(optimizer.param_groups, groups)):
            for key, value in target.items():
                if key in group and key not in skip and not _same(group[key], value):
                    where = name if len(optimizer.param_groups) == 1 else f"{name} group {index}"
                    differences.append(f"{where} {key}: checkpoint {group[key]!r}, hparams {value!r}")
                    if policy == "hparams":
                        group[key] = _copy(value)
    if differences:
        winner = "the checkpoint's values are kept" if policy == "checkpoint" else "the hparams' values apply"
        logger.warning(
            "Resuming from %s with other optimizer hyperparameters (%s); %s "
            "(--resume_optimizer_hparams %s)", checkpoint, "; ".join(differences), winner, policy,
        )


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return torch.equal(torch.as_tensor(a).float(), torch.as_tensor(b).float())
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _copy(value):
    return value.clone() if isinstance(value, torch.Tensor) else value
