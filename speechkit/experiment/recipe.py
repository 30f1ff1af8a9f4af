"""What every recipe script does before its own work: the command line, the YAML, the processes, the
experiment folder, the data preparation; and importing the recipe's helper modules.

A recipe script then reads top to bottom::

    prepare = speechkit.recipe.sibling_module(__file__, "prepare")   # the recipe's prepare.py

    def main(argv):
        run = speechkit.recipe.start(argv, prepare=prepare.prepare_manifests)
        datasets = dataio_prepare(run.hparams, run.manifests)
        ...

    if __name__ == "__main__":
        main(sys.argv[1:])
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Optional, Union

from speechkit import distributed
from speechkit.errors import HparamsError, SpeechkitError
from speechkit.experiment.folder import create_experiment_directory
from speechkit.experiment.hparams import load_hparams
from speechkit.experiment.run_options import RunOptions, parse_arguments


@dataclass
class RecipeRun:
    """A started experiment: ``hparams`` (loaded, overrides applied), ``run_opts``, the YAML path, the
    overrides, and the ``manifests`` the recipe's preparation returned (``{}`` without one)."""

    hparams: dict
    run_opts: RunOptions
    hparams_file: str
    overrides: dict
    manifests: dict = field(default_factory=dict)


def start(argv: Optional[list] = None, prepare: Optional[Callable[..., Any]] = None) -> RecipeRun:
    """Parse ``argv``, load the YAML, join the other processes, create the experiment folder and prepare
    the data.

    ``prepare(hparams, build=...)`` returns ``{split: manifest path}``: it runs first with ``build=True`` on
    the main process only (building or downloading what is missing, once), then, after every process has
    waited for it, with ``build=False`` on every process (only reading what is there).

    Example:
        >>> run = start(["hparams/train.yaml", "--lr", "0.1"], prepare=prepare_manifests)  # doctest: +SKIP
        >>> run.hparams["lr"], sorted(run.manifests)                                      # doctest: +SKIP
        (0.1, ['test', 'train', 'valid'])
    """
    show_errors_briefly(debug=_wants_tracebacks(sys.argv[1:] if argv is None else argv))
    hparams_file, run_opts, overrides = parse_arguments(argv)
    hparams = load_hparams(hparams_file, overrides, run_opts=run_opts)
    distributed.init(run_opts)
    create_experiment_directory(hparams["output_folder"], hparams_file, overrides, run_opts=run_opts)
    manifests: dict = {}
    if prepare is not None:
        distributed.run_on_main(prepare, args=(hparams,), kwargs={"build": True})
        manifests = prepare(hparams, build=False)
    return RecipeRun(hparams, run_opts, hparams_file, overrides, manifests)


#: Set to 1 for full tracebacks of speechkit's own errors (as ``--debug`` does).
TRACEBACK_VARIABLE = "SPEECHKIT_TRACEBACK"


def _wants_tracebacks(argv: list) -> bool:
    flag = os.environ.get(TRACEBACK_VARIABLE, "").strip().lower() in ("1", "true", "yes")
    return flag or any(arg == "--debug" or arg.startswith("--debug=") and arg != "--debug=false"
                       for arg in map(str, argv))


def show_errors_briefly(debug: bool = False) -> None:
    """Make an uncaught :class:`~speechkit.errors.SpeechkitError` (a configuration or data mistake, already
    worded for the user) print as one line, ``error: <message>``, without the traceback, unless ``debug``
    (``--debug`` or ``SPEECHKIT_TRACEBACK=1``). Other exceptions, bugs, keep their traceback; a Ctrl-C outside
    training prints ``interrupted``. Called by :func:`start`; idempotent."""
    previous = sys.excepthook
    if getattr(previous, "speechkit_brief", False):
        previous = previous.previous

    def brief(exc_type, exc, tb):
        if not debug and issubclass(exc_type, SpeechkitError):
            print(f"error: {exc}\n(a full traceback: add --debug, or set {TRACEBACK_VARIABLE}=1)",
                  file=sys.stderr)
        elif not debug and issubclass(exc_type, KeyboardInterrupt):
            print(f"interrupted{': ' + str(exc) if str(exc) else ''}", file=sys.stderr)
        else:
            previous(exc_type, exc, tb)

    brief.speechkit_brief, brief.previous = True, previous
    sys.excepthook = brief


def sibling_module(script: str, name: str) -> ModuleType:
    """Import ``<name>.py`` from the folder of ``script`` (a recipe's ``__file__``) without touching
    ``sys.path``.

    The folder is the script's as called, not resolved: a recipe that links to a template's ``train.py``
    gets its own ``prepare.py``. The module is registered under ``name`` (so that pickling its functions
    for worker processes works); importing the same file twice returns the same module.

    Raises:
        SpeechkitError: no such file next to the script.
    """
    path = Path(script).absolute().parent / f"{name}.py"
    if not path.is_file():
        raise SpeechkitError(f"{path}: not found (the recipe's {name}.py sits next to {Path(script).name})")
    return module_from_file(path, name)


def module_from_file(path: Union[str, os.PathLike], name: str) -> ModuleType:
    """Import the Python file ``path`` as the module ``name`` (e.g. another recipe's ``prepare.py``),
    registered in ``sys.modules`` so that its functions pickle for worker processes; the same file twice gives
    the same module, and a file that fails to import leaves nothing registered.

    Raises:
        SpeechkitError: no such file.
    """
    path = Path(path).absolute()
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    if not path.is_file():
        raise SpeechkitError(f"{path}: not found")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def fit_and_evaluate(brain: Any, hparams: dict, datasets: dict, min_key: Optional[str] = None,
                     max_key: Optional[str] = None) -> float:
    """``brain.fit`` on ``datasets["train"]`` (validating on ``datasets["valid"]``), then ``brain.evaluate``
    on ``datasets[test_set]`` (``test`` by default) with the best checkpoint by ``min_key``/``max_key``;
    returns the test loss.

    Reads the recipe YAML's conventional keys: ``epoch_counter``, ``train_loader_kwargs``,
    ``eval_loader_kwargs`` (valid and test) and ``test_set``, the split the test stage scores (default
    ``test``; e.g. ``test_engine`` of a corpus built with ``--held-out-engine``).

    Raises:
        HparamsError: ``test_set`` names no split of ``datasets``.
    """
    test_set = hparams.get("test_set", "test")
    if test_set not in datasets:
        raise HparamsError(f"test_set: no split {test_set!r} (the splits are {sorted(datasets)})")
    eval_kwargs = hparams.get("eval_loader_kwargs")
    brain.fit(hparams["epoch_counter"], datasets["train"], datasets.get("valid"),
              train_loader_kwargs=hparams.get("train_loader_kwargs"), valid_loader_kwargs=eval_kwargs)
    return brain.evaluate(datasets[test_set], min_key=min_key, max_key=max_key,
                          test_loader_kwargs=eval_kwargs)
