"""The experiment directory: what was run, with which settings and software, and its log.

:func:`create_experiment_directory` (main process only; the others wait) writes into ``output_folder``:

- ``hyperparams.original.yaml``: the file as given; ``hyperparams.yaml``: after overrides, includes made
  absolute (what actually ran);
- ``command.txt``: the command line; ``env.json``: Python, torch, speechkit versions, CUDA, the machine
  (:func:`speechkit.experiment.machine.machine_line`), the git commit;
- ``log.txt``: the log of every ``speechkit`` logger (``--log_config`` gives another logging configuration).

Before anything is written the main process locks ``output_folder`` for the rest of its life (the lock of
:mod:`speechkit.checkpoints.lock`, dropped by the kernel however the process ends): a second run on a folder
in use stops with an :class:`~speechkit.errors.ExperimentError` naming the run that holds it, and the running
experiment's record stays true.

Example:
    >>> create_experiment_directory("results/exp", "hparams/train.yaml", {"lr": 0.1})  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import logging.config
import os
import platform
import random
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional, Union

from speechkit import distributed
from speechkit.checkpoints.lock import WriterLock
from speechkit.errors import ExperimentError, RunOptionsError

logger = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s - %(name)s - %(levelname)s - %(message)s"

# output folder (resolved) -> the lock this process holds on it, for the rest of the process's life
_EXPERIMENT_LOCKS: dict = {}


def seed_everything(seed: int) -> int:
    """Seed Python, NumPy and torch (CPU and CUDA) generators; returns ``seed`` (usable from YAML ``!apply``).

    Example:
        >>> seed_everything(3)
        3
    """
    import numpy as np
    import torch

    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return seed


def create_experiment_directory(
    output_folder: Union[str, os.PathLike],
    hparams_file: Union[str, os.PathLike],
    overrides: Union[dict, str, None] = None,
    run_opts: Any = None,
) -> Path:
    """Create ``output_folder`` with the hparams, command line, environment record and log (see module doc).

    Runs on the main process only (then every process waits at a barrier); every process gets the logging
    setup (console; ``log.txt`` on the main process).

    Raises:
        ExperimentError: on every process, when another run holds ``output_folder``; nothing is written.
    """
    output_folder = Path(output_folder)
    dist = distributed
    lock_experiment(output_folder)
    dist.run_on_main(_write_directory, args=(output_folder, Path(hparams_file), overrides, run_opts))
    main = dist.is_main()
    setup_logging(output_folder / "log.txt" if main else None, getattr(run_opts, "log_config", None), main)
    if getattr(run_opts, "seed", None) is not None:
        seed_everything(run_opts.seed)
    logger.info("Experiment directory: %s", output_folder)
    return output_folder


def lock_experiment(output_folder: Union[str, os.PathLike]) -> None:
    """Make this run the only one writing ``output_folder`` until the process ends; every process calls it.

    The main process takes the lock; every process raises the same :class:`ExperimentError` when another run
    holds it.
    """
    from speechkit.distributed.runtime import refuse_unknown_place

    refuse_unknown_place("create_experiment_directory")  # every worker would take itself for the main one
    problem = None
    if distributed.is_main():
        key = os.path.realpath(output_folder)
        lock = _EXPERIMENT_LOCKS.get(key) or WriterLock(
            output_folder, why="its hyperparams.yaml, command.txt, env.json and log would no longer describe "
            "the run that writes its results", error=ExperimentError)
        try:
            lock.acquire()
            _EXPERIMENT_LOCKS[key] = lock
        except ExperimentError as error:
            problem = str(error)
    problem = distributed.broadcast_object(problem)
    if problem is not None:
        raise ExperimentError(problem)


def _write_directory(output_folder: Path, hparams_file: Path, overrides: Any, run_opts: Any) -> None:
    from speechkit.experiment.hparams import resolve_hparams_text

    output_folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(hparams_file, output_folder / "hyperparams.original.yaml")
    (output_folder / "hyperparams.yaml").write_text(
        resolve_hparams_text(str(hparams_file), overrides, run_opts)
    )
    (output_folder / "command.txt").write_text(shlex.join([sys.executable, *sys.argv]) + "\n")
    (output_folder / "env.json").write_text(json.dumps(environment_record(), indent=2) + "\n")


def environment_record() -> dict:
    """Versions and the git commit of the working directory's repository (``None`` outside one)."""
    import torch

    import speechkit
    from speechkit.experiment.machine import machine_line

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": machine_line(),  # CPU model and instruction sets: a run's exact losses depend on them
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "speechkit": speechkit.__version__,
        "git_commit": _git_commit(),
    }


def _git_commit() -> Optional[str]:
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None if result.returncode == 0 else None


def setup_logging(
    log_file: Optional[Path] = None, log_config: Optional[str] = None, is_main: bool = True
) -> None:
    """Console logging plus ``log_file``; or a ``logging.config.dictConfig`` YAML file.

    The main process logs INFO to the console; the others only warnings and errors (the same lines from
    every rank would drown the useful ones).
    """
    if log_config:
        import yaml

        try:
            config = yaml.safe_load(Path(log_config).read_text())
            logging.config.dictConfig(config)
        except (OSError, ValueError, TypeError, AttributeError, ImportError, yaml.YAMLError) as error:
            raise RunOptionsError(
                f"--log_config {log_config}: not a usable logging configuration: {error}"
            ) from None
        return
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    formatter = logging.Formatter(LOG_FORMAT)
    if not any(
        getattr(h, "_speechkit", False)
        and isinstance(h, logging.StreamHandler)
        and not isinstance(h, logging.FileHandler)
        for h in root.handlers
    ):
        console = logging.StreamHandler()
        console.setLevel(logging.INFO if is_main else logging.WARNING)
        console.setFormatter(formatter)
        console._speechkit = True
        root.addHandler(console)
    if log_file is not None:
        log_file = Path(log_file).resolve()
        if not any(
            isinstance(h, logging.FileHandler) and Path(h.baseFilename) == log_file for h in root.handlers
        ):
            handler = logging.FileHandler(log_file)
            handler.setFormatter(formatter)
            handler._speechkit = True
            root.addHandler(handler)
