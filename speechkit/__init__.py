"""speechkit: train, evaluate and serve speech models from YAML recipes.

The names most recipes need are importable from the top level::

    import speechkit
    hparams_file, run_opts, overrides = speechkit.parse_arguments(sys.argv[1:])
    hparams = speechkit.load_hparams(hparams_file, overrides)
"""
from __future__ import annotations

from speechkit.lazy_exports import lazy_exports

__version__ = "0.1.0"

# Imported on first use so that `import speechkit` stays light (no torch import for the CLI's --help).
_LAZY = {
    "Brain": "speechkit.brain",
    "Stage": "speechkit.stage",
    "load_hparams": "speechkit.experiment.hparams",
    "parse_arguments": "speechkit.experiment.run_options",
    "RunOptions": "speechkit.experiment.run_options",
    "create_experiment_directory": "speechkit.experiment",
    "Checkpointer": "speechkit.checkpoints",
    "distributed": ("speechkit.distributed", None),
}

__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = sorted(_LAZY)
