"""Run options: how to run an experiment (devices, precision, processes), not what to run (the YAML).

Every option is a field of :class:`RunOptions` with its real type and a help text, so ``--help`` documents it
and ``--max_grad_norm 0.5`` arrives as a float. Each option resolves as default < hparams YAML < command line:
:func:`parse_arguments` records which options the command line set, and :meth:`RunOptions.merged_with` lets a
top-level YAML key of the same name fill in the others.

Example:
    >>> hparams_file, run_opts, overrides = parse_arguments(["hp.yaml", "--precision", "bf16", "--lr=0.1"])
    >>> run_opts.precision, overrides
    ('bf16', {'lr': 0.1})
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError as RuamelYAMLError

from speechkit.errors import RunOptionsError

PRECISIONS = ("fp32", "fp16", "bf16")
#: torch.compile's modes; "reduce-overhead" records CUDA graphs (one per input shape) and replays them.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
#: Options never read from the hparams YAML (see RunOptions.merged_with).
LAUNCHER_ONLY = frozenset({"worker_id", "num_workers", "device_id", "local_rank", "sync_protocol"})


def _opt(default: Any, help: str, choices: Optional[tuple] = None, aliases: tuple = (),
         minimum: Optional[float] = None) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices, "aliases": aliases,
                                            "minimum": minimum})


@dataclass
class RunOptions:
    """Options that say how an experiment runs; none of them changes what the recipe computes."""

    # Devices and precision
    device: Optional[str] = _opt(
        None,
        "Device to run on: cpu, cuda, cuda:N. Default: cuda:<local rank> when CUDA is available, else cpu.",
    )
    precision: str = _opt(
        "fp32",
        "Training precision (autocast): fp32, fp16 (CUDA, with a gradient scaler) or bf16 (CPU and CUDA).",
        PRECISIONS,
    )
    eval_precision: str = _opt("fp32", "Precision for validation and test.", PRECISIONS)
    compile: bool = _opt(
        False, "Compile the modules listed in `compile_modules` (all by default) with torch.compile."
    )
    compile_modules: Optional[list] = _opt(
        None, "Names of the modules --compile compiles (YAML list or comma-separated); default: all."
    )
    compile_mode: Optional[str] = _opt(
        None,
        "torch.compile mode for --compile; reduce-overhead records CUDA graphs (best with the loader option "
        "pad_to_multiple, so that batches come in few shapes).",
        COMPILE_MODES,
    )
    num_threads: Optional[int] = _opt(
        None,
        "CPU threads torch uses in each process. Default: OMP_NUM_THREADS when set, else the cores available "
        "to the process (affinity, cgroup quota) shared by the processes on the machine, less each one's "
        "data-loader workers and the load of other work (docs/training.md).",
        minimum=1,
    )
    # Optimization
    grad_accumulation_factor: Optional[Union[int, str]] = _opt(
        None,
        "Micro-batches per optimizer step, or 'auto' to derive it from global_batch_size / "
        "global_batch_seconds and the world size. Default: auto when one of those is set, else 1.",
    )
    global_batch_size: Optional[int] = _opt(
        None, "Items per optimizer step over all workers; the accumulation follows from it "
        "(grad_accumulation_factor auto).",
        minimum=1,
    )
    global_batch_seconds: Optional[float] = _opt(
        None,
        "Seconds of audio per optimizer step over all workers (dynamic batching); the accumulation "
        "follows from it (grad_accumulation_factor auto).",
    )
    max_grad_norm: float = _opt(
        5.0, "Clip the gradient's global L2 norm to this value; 0 disables clipping.", minimum=0
    )
    nonfinite_patience: int = _opt(
        3,
        "Consecutive optimizer steps skipped for a non-finite loss (or "
        "gradients) tolerated before training stops with an error.",
        minimum=0,
    )
    skip_nonfinite_grads: bool = _opt(
        False,
        "Check the gradients for inf/NaN even without clipping and skip "
        "such steps (with clipping or several processes they are always checked).",
    )
    optimizer_step_limit: Optional[int] = _opt(
        None, "Stop training after this many optimizer steps.", minimum=1
    )
    early_stopping_patience: Optional[int] = _opt(
        None,
        "Stop training when the validation value early_stopping_key has not improved for this many "
        "epochs; the best epoch's checkpoint is kept. Default: off (train to the epoch or step limit).",
        minimum=0,
    )
    early_stopping_key: str = _opt(
        "loss", "The validation value early stopping watches: loss, or a metric on_stage_end returns (WER)."
    )
    early_stopping_mode: str = _opt(
        "min", "Whether lower (min) or higher (max) values of the key are better.", ("min", "max")
    )
    early_stopping_min_delta: float = _opt(
        0.0, "An epoch counts as an improvement only when it beats the best value by more than this.",
        minimum=0,
    )
    # Checkpoints
    ckpt_interval_minutes: float = _opt(
        0.0, "Save an intra-epoch checkpoint every this many minutes; 0: off.",
        minimum=0,
    )
    ckpt_interval_steps: int = _opt(
        0, "Save an intra-epoch checkpoint every this many optimizer steps; 0: off.",
        minimum=0,
    )
    resume_optimizer_hparams: str = _opt(
        "checkpoint",
        "On resume, whose optimizer hyperparameters (lr, weight_decay, betas, ...) win where they differ: "
        "checkpoint (continue the saved run exactly) or hparams (apply the YAML and command line); "
        "the differences are logged either way.",
        ("checkpoint", "hparams"),
    )
    ckpt_keep: int = _opt(
        1, "End-of-epoch checkpoints kept: the best this many by validation loss.", minimum=1
    )
    average_checkpoints: int = _opt(
        1, "Evaluate the average of this many best checkpoints (keep at least as many: ckpt_keep).",
        minimum=1,
    )
    eval_checkpoint: Optional[str] = _opt(
        None, "Evaluate this checkpoint folder (a CKPT+ folder, or one written by speechkit "
        "average-checkpoints) instead of the best one."
    )
    # Debugging, logging, progress
    debug: bool = _opt(False, "Run a few batches of a few epochs to check that everything runs.")
    debug_batches: int = _opt(2, "Batches per stage with --debug.", minimum=1)
    debug_epochs: int = _opt(2, "Epochs with --debug.", minimum=1)
    noprogressbar: bool = _opt(
        False, "Hide the progress bar (shown only when stderr is a terminal).", aliases=("--no-progress",)
    )
    train_log: Optional[str] = _opt(
        None, "File of one summary line per stage; default: <output_folder>/train_log.txt."
    )
    tensorboard: Optional[str] = _opt(
        None,
        "Folder for TensorBoard event files (per-step loss and lr, per-stage metrics); "
        "needs the tensorboard extra. Default: off.",
    )
    log_config: Optional[str] = _opt(None, "A YAML logging configuration (logging.config.dictConfig format).")
    seed: Optional[int] = _opt(None, "Random seed; overrides the hparams `seed`.")
    test_only: bool = _opt(
        False, "Skip training; only evaluate the best checkpoint (or --eval_checkpoint) on the test set."
    )
    # Processes (see docs/distributed.md)
    data_parallel_backend: bool = _opt(
        False, "Use torch.nn.DataParallel over the visible GPUs (one process)."
    )
    distributed_launch: bool = _opt(
        False,
        "Accepted for launchers that pass it (torch.distributed.launch); the "
        "place in the world is read from the environment.",
    )
    distributed_backend: Optional[str] = _opt(
        None,
        "Process-group backend: nccl (CUDA) or gloo (CPU). Default: nccl with CUDA, else gloo.",
        ("nccl", "gloo"),
    )
    distributed_timeout_s: float = _opt(
        300.0, "Seconds a collective may wait before every worker stops with an error.",
        minimum=1,
    )
    find_unused_parameters: bool = _opt(False, "Let DistributedDataParallel tolerate unused parameters.")
    sync_batchnorm: bool = _opt(False, "Convert BatchNorm layers to SyncBatchNorm under DDP.")
    worker_id: Optional[int] = _opt(
        None, "This worker's global rank (explicit launch).", aliases=("--worker-id",)
    )
    num_workers: Optional[int] = _opt(
        None,
        "Number of workers. Without --worker-id, start this many local workers (self-spawning mode).",
        aliases=("--num-workers",),
        minimum=1,
    )
    device_id: Optional[int] = _opt(
        None, "Index of the GPU this worker uses (explicit launch).", aliases=("--device-id",)
    )
    sync_protocol: Optional[str] = _opt(
        None,
        "How workers find each other: env:// (MASTER_ADDR/PORT) or file:///shared/path.",
        aliases=("--sync-protocol",),
    )
    local_rank: Optional[int] = _opt(
        None, "Local rank, as passed by torch.distributed.launch.", aliases=("--local-rank",)
    )

    # Names of the options the command line set; filled by parse_arguments.
    explicit: frozenset = field(default=frozenset(), repr=False, compare=False)

    def merged_with(self, hparams: dict) -> RunOptions:
        """Return options where top-level hparams keys fill every option the command line did not set.

        The options that place a process in the world (``worker_id``, ``num_workers``, ``device_id``,
        ``local_rank``, ``sync_protocol``) come from the launcher only: a recipe's top-level ``num_workers``
        usually means data-loading workers and must never start processes.

        Example:
            >>> RunOptions().merged_with({"precision": "bf16"}).precision
            'bf16'
        """
        values = {}
        for f in option_fields():
            if f.name not in self.explicit and f.name in hparams and f.name not in LAUNCHER_ONLY:
                values[f.name] = _coerce(f, hparams[f.name], source="hparams")
        return dataclasses.replace(self, **values)

    @property
    def accumulation_is_auto(self) -> bool:
        """Whether the accumulation follows from a global batch (``auto``, or a global batch given alone)."""
        if self.grad_accumulation_factor is None:
            return bool(self.global_batch_size or self.global_batch_seconds)
        return self.grad_accumulation_factor == "auto"


def option_fields() -> list:
    return [f for f in dataclasses.fields(RunOptions) if f.name != "explicit"]


def check_option_value(name: str, value: Any, source: str) -> bool:
    """Raise RunOptionsError (naming ``source``, e.g. ``'hp.yaml, line 3'``, and the option) when ``value``
    does not fit the type of run option ``name``; return whether ``name`` is a run option the YAML may set.

    Example:
        >>> check_option_value("max_grad_norm", "abc", "hp.yaml, line 3")
        Traceback (most recent call last):
        ...
        speechkit.errors.RunOptionsError: hp.yaml, line 3: option 'max_grad_norm' expects float, got 'abc'
    """
    for f in option_fields():
        if f.name == name and name not in LAUNCHER_ONLY:
            _coerce(f, value, source)
            return True
    return False


def _base_type(f: dataclasses.Field) -> Any:
    hint = typing.get_type_hints(RunOptions)[f.name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args if args else [hint]


def _coerce(f: dataclasses.Field, value: Any, source: str) -> Any:
    """Convert ``value`` to the option's type; raise RunOptionsError naming the option otherwise."""
    if value is None:
        return None
    types = _base_type(f)
    choices = f.metadata.get("choices")
    try:
        if bool in types:
            result = _to_bool(value)
        elif list in types:  # a YAML list, or "a,b" from the command line
            items = value if isinstance(value, (list, tuple)) else str(value).split(",")
            result = [str(item).strip() for item in items if str(item).strip()]
        elif int in types and str in types:  # int or the word 'auto'
            result = value if value == "auto" else int(value)
        elif int in types:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            result = int(value)
        elif float in types:
            result = float(value)
        else:
            result = str(value)
    except (TypeError, ValueError, OverflowError):
        names = " or ".join(t.__name__ for t in types)
        raise RunOptionsError(f"{source}: option '{f.name}' expects {names}, got {value!r}") from None
    if isinstance(result, float) and not math.isfinite(result):
        raise RunOptionsError(f"{source}: option '{f.name}' must be a finite number, got {value!r}")
    minimum = f.metadata.get("minimum")
    if minimum is not None and isinstance(result, (int, float)) and not isinstance(result, bool) \
            and result < minimum:
        raise RunOptionsError(f"{source}: option '{f.name}' must be at least {minimum}, got {result!r}")
    if choices and result not in choices:
        raise RunOptionsError(
            f"{source}: option '{f.name}' must be one of {', '.join(choices)}, got {result!r}"
        )
    return result


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on", ""):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(value)


def build_parser(prog: Optional[str] = None) -> argparse.ArgumentParser:
    """The argparse parser of every run option (used for parsing and for ``--help``)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        allow_abbrev=False,  # an override such as --comp must never be taken for --compile
        description="Run a speechkit experiment. Anything that is not a run option (--lr=0.1, "
        "--model.dim 256) overrides the YAML key of that name.",
        usage="%(prog)s HPARAMS_FILE [run options] [--key value ...]   or   "
        "%(prog)s [run options] -- HPARAMS_FILE [--key value ...]",
    )
    parser.add_argument("hparams_file", nargs="?", help="The hyperparameter YAML file.")
    for f in option_fields():
        flags = [f"--{f.name}", *f.metadata["aliases"]]
        help_text = f"{f.metadata['help']} (default: {f.default})"
        if bool in _base_type(f):
            # `--flag` alone means true; `--flag false` is parsed for real, never truthy by accident.
            parser.add_argument(
                *flags, dest=f.name, nargs="?", const="true", default=None, metavar="BOOL", help=help_text
            )
        else:
            parser.add_argument(
                *flags, dest=f.name, default=None, metavar=f.name.upper(), choices=None, help=help_text
            )
    return parser


def parse_arguments(argv: Optional[list] = None) -> tuple:
    """Split a command line into the hparams file, the run options and the YAML overrides.

    Args:
        argv: the arguments after the program name (default: ``sys.argv[1:]``).

    When ``argv`` is this process's own command line (``None`` or ``sys.argv[1:]``), the options also set up
    the process's place in the world (docs/distributed.md):

    - ``--num-workers N`` without ``--worker-id`` (the self-spawning launcher): this process starts N workers
      running the same command, waits for them and exits with their combined status; it never returns, so
      nothing of the recipe runs in the launcher itself;
    - otherwise the options are handed to :mod:`speechkit.distributed`, so that a worker started by torchrun,
      srun or the launcher joins its process group at the first call that needs it (``run_on_main``,
      ``create_experiment_directory``, the ``Brain``), with no ``init`` call in the recipe.

    Returns:
        ``(hparams_file, run_opts, overrides)``: the YAML path (``None`` when no file was given), a
        :class:`RunOptions`, and a dict of overrides whose values are parsed as YAML scalars (``--lr=0.1``
        gives ``{"lr": 0.1}``; ``--model.dim 256`` gives ``{"model.dim": 256}``).

    Example:
        >>> parse_arguments(["--num-workers", "2", "--", "hp.yaml", "--lr", "1e-3"])[2]
        {'lr': 0.001}
    """
    own_command_line = argv is None or list(argv) == sys.argv[1:]
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:  # `train.py [run options] -- hp.yaml [overrides]`
        split = argv.index("--")
        argv = argv[split + 1 :][:1] + argv[:split] + argv[split + 2 :]
    parser = build_parser()
    namespace, rest = parser.parse_known_args(argv)
    values, explicit = {}, set()
    for f in option_fields():
        raw = getattr(namespace, f.name)
        if raw is not None:
            values[f.name] = _coerce(f, raw, source="command line")
            explicit.add(f.name)
    run_opts = RunOptions(**values, explicit=frozenset(explicit))
    overrides = _parse_overrides(rest)
    if own_command_line:
        _take_place_in_the_world(run_opts)
    return namespace.hparams_file, run_opts, overrides


def _take_place_in_the_world(run_opts: RunOptions) -> None:
    """Spawn the workers (never returns) or remember the options for the first call that needs the context.

    The workers rerun this process's command line, so only options parsed from it may start them.
    """
    from speechkit.distributed import runtime
    from speechkit.distributed.env import is_spawn_request

    if is_spawn_request(run_opts):
        from speechkit.distributed.launch import spawn_local_workers

        sys.exit(spawn_local_workers(run_opts))
    runtime.use_run_options(run_opts)


def _parse_overrides(tokens: list) -> dict:
    overrides, i = {}, 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--") or token == "--":
            raise RunOptionsError(
                f"command line: unexpected argument {token!r}; overrides look like --key value"
            )
        key, eq, value = token[2:].partition("=")
        if not eq:
            if i + 1 >= len(tokens) or tokens[i + 1].startswith("--"):
                raise RunOptionsError(f"command line: override --{key} has no value")
            value, i = tokens[i + 1], i + 1
        try:
            overrides[key] = _parse_scalar(value)
        except (yaml.YAMLError, RuamelYAMLError) as error:
            raise RunOptionsError(f"command line: override --{key} is not valid YAML: {error}") from None
        i += 1
    return overrides


def _parse_scalar(text: str) -> Any:
    """A YAML value, with '1e-3' read as a number (YAML 1.1 alone would keep it a string). A value with a
    tag (``!new:speechkit.augment.SpeedPerturb {speed_range: [0.9, 1.1]}``, ``!ref <lr>``) keeps it, for
    the hparams file to build."""
    if text == "":
        return ""
    if text.lstrip().startswith("!"):
        return YAML(typ="rt").load(text)
    value = yaml.safe_load(text)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    return value
