"""Where a module's weights come from: learned in a run, loaded from a file, or left as initialized.

A model folder must hold only weights that something produced: a module that was frozen in training and never
loaded (the LM of an ASR run with ``--lm_weight 0``) still has its random initial weights, and exporting it
would ship noise under a working name. So the toolkit notes each module's origin on the module itself:

- :class:`speechkit.Brain` notes ``trained`` on the modules that learn, and ``untrained`` on frozen modules
  with weights but no origin when ``fit`` starts;
- :func:`speechkit.pretrained.loading.load_into` (and so the ``Pretrainer``) notes the file it loaded;
- :class:`speechkit.checkpoints.Checkpointer` lists the ``untrained`` recoverables in each checkpoint's
  ``meta.json`` (``info.untrained``) and restores the notes when it loads one.

``speechkit export`` refuses to export a checkpoint file listed there unless the inference YAML names it under
``untrained_loadables`` (docs/pretrained.md, "Exporting a model folder").

Example:
    >>> import torch
    >>> lm = torch.nn.Linear(2, 2)
    >>> weights_origin(lm) is None
    True
    >>> note_untrained(lm); is_untrained(lm)
    True
    >>> note_origin(lm, "loaded from lm.ckpt"); is_untrained(lm)
    False
"""
from __future__ import annotations

from typing import Any, Optional

UNTRAINED = "untrained"
_ATTRIBUTE = "_speechkit_weights_origin"


def note_origin(module: Any, origin: str) -> None:
    """Record that ``module``'s weights come from ``origin`` (``"trained"``, ``"loaded from PATH"``)."""
    object.__setattr__(module, _ATTRIBUTE, str(origin))  # a plain attribute: never in the state dict


def note_untrained(module: Any) -> None:
    """Record that ``module`` holds the weights it was built with."""
    note_origin(module, UNTRAINED)


def weights_origin(module: Any) -> Optional[str]:
    """The recorded origin of ``module``'s weights, or ``None`` when nothing was recorded."""
    return getattr(module, _ATTRIBUTE, None)


def is_untrained(module: Any) -> bool:
    return weights_origin(module) == UNTRAINED


def has_weights(module: Any) -> bool:
    """Whether ``module`` has any parameter or buffer (a module without them has nothing to train or load)."""
    import torch

    return isinstance(module, torch.nn.Module) and bool(module.state_dict())
