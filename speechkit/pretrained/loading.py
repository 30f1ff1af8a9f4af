"""Load weights safely and put them into modules, reporting what did not fit.

Weights are tensors, never code: ``.safetensors`` files load with safetensors, every other file with
``torch.load(weights_only=True)``, which refuses pickled objects other than tensors and plain containers.

Example:
    >>> import torch
    >>> report = load_into(torch.nn.Linear(2, 2), {"weight": torch.zeros(2, 2)}, "w.ckpt", partial=True)
    >>> report.missing
    ['bias']
"""
from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass, field
from typing import Optional

import torch

from speechkit.checkpoints.weights_origin import note_origin
from speechkit.errors import CheckpointError, HparamsError


@dataclass
class LoadReport:
    """What happened when a file was loaded into an object (keys are state-dict keys)."""

    path: str
    missing: list = field(default_factory=list)  # in the module, not in the file
    unexpected: list = field(default_factory=list)  # in the file, not in the module
    mismatched: list = field(default_factory=list)  # in both, with different shapes (skipped)

    @property
    def complete(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched)


#: Set to 1 to load weights holding NaN or inf anyway (a model being debugged); by default they are refused.
ALLOW_NONFINITE_VARIABLE = "SPEECHKIT_ALLOW_NONFINITE_WEIGHTS"


def load_weights(path, allow_nonfinite: Optional[bool] = None) -> dict:
    """Read a state dict (name -> tensor) from ``path`` without running any pickled code.

    Args:
        path: a ``.safetensors`` file or a ``torch.save`` file.
        allow_nonfinite: accept floating tensors holding NaN or inf. Default: refuse them, unless the
            environment sets ``SPEECHKIT_ALLOW_NONFINITE_WEIGHTS=1`` (a model full of NaN would otherwise load
            and output nonsense, or nothing, with no error).

    Raises:
        CheckpointError: naming the file when it is missing, not a weights file, or holds pickled objects;
            naming the file and the tensor when a tensor holds NaN or inf.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: weights file not found")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(os.fspath(path), device="cpu")
        else:
            state = torch.load(os.fspath(path), map_location="cpu", weights_only=True)
    except Exception as error:  # pickle and safetensors raise many unrelated types
        first_line = (str(error).splitlines() or [""])[0][:300]
        raise CheckpointError(f"{path}: cannot be loaded as weights (only tensors and plain containers are "
                              f"accepted; {type(error).__name__}: {first_line})") from None
    if allow_nonfinite is None:
        allow_nonfinite = os.environ.get(ALLOW_NONFINITE_VARIABLE, "").strip().lower() in ("1", "true", "yes")
    if not allow_nonfinite:
        check_finite(state, path)
    return state


def check_finite(state, path, prefix: str = "") -> None:
    """Raise :class:`CheckpointError` naming ``path`` and the first tensor of ``state`` (a state dict, nested
    containers allowed) that holds NaN or inf."""
    if isinstance(state, dict):
        items = state.items()
    else:
        items = enumerate(state) if isinstance(state, (list, tuple)) else ()
    for key, value in items:
        name = f"{prefix}{key}"
        if isinstance(value, torch.Tensor):
            if (value.is_floating_point() or value.is_complex()) and not bool(torch.isfinite(value).all()):
                bad = int((~torch.isfinite(value)).sum())
                raise CheckpointError(
                    f"{path}: tensor '{name}' holds {bad} non-finite value(s) (NaN or inf) of "
                    f"{value.numel()}: "
                    f"the file is damaged or comes from a diverged run; set {ALLOW_NONFINITE_VARIABLE}=1 (or "
                    "pass allow_nonfinite=True) to load it anyway")
        elif isinstance(value, (dict, list, tuple)):
            check_finite(value, path, prefix=f"{name}.")


def save_weights(state_dict: dict, path) -> None:
    """Write ``state_dict`` as safetensors (``.safetensors``) or with torch.save (any other suffix)."""
    path = pathlib.Path(path)
    tensors = {k: v.detach().cpu().contiguous() for k, v in state_dict.items()}
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(tensors, os.fspath(path))
        mask = os.umask(0o022)  # safetensors writes 0600; a weight file is as private as any other file
        os.umask(mask)
        os.chmod(path, 0o666 & ~mask)
    else:
        torch.save(tensors, os.fspath(path))


def load_into(obj, state_dict: dict, path, partial: bool = False) -> LoadReport:
    """Load ``state_dict`` (read from ``path``) into ``obj``.

    With ``partial=False`` every key must match in name and shape, else :class:`CheckpointError` lists the
    differences. With ``partial=True`` matching tensors load, and the rest is reported (for fine-tuning from
    a model with, e.g., another output vocabulary).
    """
    report = LoadReport(str(path))
    if not isinstance(obj, torch.nn.Module):
        obj.load_state_dict(state_dict)
        return report
    own = obj.state_dict()
    report.missing = sorted(k for k in own if k not in state_dict)
    report.unexpected = sorted(k for k in state_dict if k not in own)
    report.mismatched = sorted(k for k in state_dict
                               if k in own and tuple(own[k].shape) != tuple(state_dict[k].shape))
    if not partial and not report.complete:
        raise CheckpointError(f"{path}: does not fit {type(obj).__name__}: {_describe(report)} "
                              "(load with partial=True to load the matching part)")
    fitting = {k: v for k, v in state_dict.items() if k in own and k not in report.mismatched}
    obj.load_state_dict(fitting, strict=False)
    note_origin(obj, f"loaded from {path}")  # its weights are no longer the initial ones (export checks)
    return report


def load_encoder_checkpoint(encoder: torch.nn.Module, path) -> None:
    """Load an ``encoder.ckpt`` of speechkit's own pretraining into ``encoder`` (a ``Wav2Vec2Model``), its
    sizes checked first, so that a mismatch names each ``config`` field that differs, not only tensors.

    Example:
        >>> load_encoder_checkpoint(encoder, "results/pretrain/1234/encoder.ckpt")  # doctest: +SKIP
    """
    from speechkit.models.wav2vec2 import check_encoder_sizes

    state = load_weights(path)
    check_encoder_sizes(encoder.config, state, path)
    load_into(encoder, state, path)


def load_best_checkpoint(modules: dict, checkpoints_dir, min_key: Optional[str] = None) -> list:
    """Load into each of ``modules`` its ``<name>.ckpt`` from the best checkpoint of another run's
    ``checkpoints_dir`` (its ``save_folder``): the lowest ``min_key``, or the newest without a key. Modules
    the checkpoint lacks keep their weights. Returns the names loaded (fine-tuning starts from them).

    Raises:
        CheckpointError: no checkpoint (with ``min_key``) in the folder, or none of ``modules`` in it, or a
            file that does not fit its module.

    Example:
        >>> load_best_checkpoint({"separator": model}, "results/sep/1234/save", "loss")  # doctest: +SKIP
        ['separator']
    """
    from speechkit.checkpoints import Checkpointer

    best = Checkpointer(checkpoints_dir).find_checkpoint(min_key=min_key)
    if best is None:
        keyed = f" with the key '{min_key}'" if min_key else ""
        raise CheckpointError(f"{checkpoints_dir}: no checkpoint{keyed} to start from (train that run first, "
                              "or point pretrained_checkpoints at its save folder)")
    found = {name: best.path / f"{name}.ckpt" for name in modules if (best.path / f"{name}.ckpt").is_file()}
    if not found:
        raise CheckpointError(f"{best.path}: holds none of {sorted(modules)} (a checkpoint of another "
                              "recipe?)")
    for name, path in found.items():
        load_into(modules[name], load_weights(path), path)
    return list(found)


def load_language_model(lm: torch.nn.Module, path: Optional[str], lm_weight: float,
                        learns: bool = False) -> bool:
    """Load a recipe's LM from ``path`` when that file exists; True when it was loaded.

    A run that would decode with the LM (``lm_weight`` > 0) while it neither exists nor learns in this run
    fails here, before training, not when the test set is decoded.

    Example:
        >>> load_language_model(torch.nn.Linear(2, 2), "missing/lm.ckpt", lm_weight=0.0)
        False
    """
    if path and os.path.isfile(path):
        load_into(lm, load_weights(path), path)
        return True
    if lm_weight and not learns:
        raise HparamsError(f"lm_weight is {lm_weight} but lm_checkpoint={path} does not exist: train the LM "
                           "(the speech recognition template's LM step: python train.py hparams/lm.yaml) "
                           "or pass --lm_weight 0")
    return False


def _describe(report: LoadReport, limit: int = 5) -> str:
    parts = []
    for name in ("missing", "unexpected", "mismatched"):
        keys = getattr(report, name)
        if keys:
            shown = ", ".join(keys[:limit]) + (f", ... ({len(keys)} in all)" if len(keys) > limit else "")
            parts.append(f"{name} keys: {shown}")
    return "; ".join(parts)


def describe_report(report: LoadReport) -> str:
    """One line for logs, e.g. 'missing keys: out.bias; mismatched keys: out.weight'."""
    return _describe(report) or "all keys loaded"
