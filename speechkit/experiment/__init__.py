"""An experiment's setup: how to run, what to build, where the results go.

- :mod:`~speechkit.experiment.run_options`: the typed run options of the command line (:class:`RunOptions`);
- :mod:`~speechkit.experiment.hparams`: loading a YAML with overrides, checked before anything is built;
  :mod:`~speechkit.experiment.hparams_keys`: the keys a recipe reads, checked against the YAML;
- :mod:`~speechkit.experiment.folder`: the experiment folder (resolved YAML, command, versions, log), the
  seed and the logging; its functions are importable from this package;
- :mod:`~speechkit.experiment.machine`: one line describing the machine, for records and benchmarks;
- :mod:`~speechkit.experiment.recipe`: what every recipe script does first (``speechkit.recipe`` is the same
  module under its shorter, documented name).

Example:
    >>> from speechkit.experiment import create_experiment_directory
    >>> create_experiment_directory.__module__
    'speechkit.experiment.folder'
"""
from speechkit.experiment.folder import (
    LOG_FORMAT,
    create_experiment_directory,
    environment_record,
    lock_experiment,
    seed_everything,
    setup_logging,
)

__all__ = ["LOG_FORMAT", "create_experiment_directory", "environment_record", "lock_experiment",
           "seed_everything", "setup_logging"]
