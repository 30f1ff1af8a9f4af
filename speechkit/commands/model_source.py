"""The flags of every command that loads a model: where the model comes from, how it is fetched, what a
remote YAML may build, and where and how it runs. One definition, so that ``transcribe``, ``separate``,
``embed``, ``verify``, ``diarize``, ``infer``, ``serve`` and ``evaluate`` take the same flags with the same
help and defaults (``fetch`` takes the fetching ones), and one function, :func:`from_hparams_options`, turns
them into the keyword arguments of :meth:`speechkit.pretrained.Pretrained.from_hparams`.

========================================= ===================================================================
flag                                      ``Pretrained.from_hparams`` argument
========================================= ===================================================================
the model (``MODEL``, ``--model MODEL``)  ``source`` (:func:`model_source`: a ``FetchSource`` with ``--kind``)
``--kind``                                the kind of ``source``
``--savedir``                             ``savedir``
``--revision``                            ``revision``
``--offline``                             ``allow_network=False``
``--refresh``                             ``force_download``
``--cache-dir``                           ``cache_dir``
``--max-*-bytes``, ``--*-timeout``        ``limits`` (:func:`limits_from`)
``--trust-remote-code``                   ``trust_remote_code``
``--allow``                               ``allow``
``--backend``                             ``backend``
``--device``                              ``run_opts={"device": ...}`` (default per command)
========================================= ===================================================================

Example::

    def add_arguments(parser):
        add_model_source_arguments(parser)
        parser.add_argument("audio", nargs="+")

    def run(args):
        model = Pretrained.from_hparams(model_source(args), run_opts={"device": args.device},
                                        **from_hparams_options(args))
"""
from __future__ import annotations

import argparse
import dataclasses
from typing import Optional

#: The help of the model argument.
MODEL_HELP = "Model folder: local path, Hub repo id or http(s) URL."
#: ``--kind`` choices: the values of :class:`speechkit.pretrained.sources.fetching.FetchFrom`, written out so
#: that a command's ``--help`` does not import the fetching code (a unit test keeps the two equal).
SOURCE_KINDS = ("local", "huggingface", "url")
#: ``--backend`` choices.
BACKENDS = ("torch", "onnx", "torchscript")
#: ``--device`` default of the commands that run on one process.
DEVICE_DEFAULT = "cpu"
#: ``--device`` help where the default is None: a process launched by torchrun or srun takes its rank's GPU.
DEVICE_OF_LOCAL_RANK = "the GPU of the local rank with CUDA, else cpu"


def add_model_source_arguments(parser: argparse.ArgumentParser, *, model: Optional[str] = "positional",
                               savedir: Optional[str] = "optional", loads: bool = True,
                               device_default: Optional[str] = DEVICE_DEFAULT) -> None:
    """Add the model argument and the model-source flags to ``parser``.

    Args:
        model: ``"positional"`` (``speechkit transcribe MODEL ...``), ``"optional"`` (a positional that may be
            left out, as ``infer --status OUT`` does), ``"option"`` (``--model MODEL``) or None (the command
            adds its own: ``serve`` takes several); always read back with :func:`model_source` (``dest`` is
            ``source``).
        savedir: ``"optional"``, ``"required"`` (``fetch``) or None (``serve``: one folder per model cannot
            be given for several).
        loads: False for a command that fetches without building anything (``fetch``): no
            ``--trust-remote-code``, ``--allow``, ``--device`` nor ``--backend``.
        device_default: ``--device``'s default; None lets a launched process take its local rank's GPU
            (``evaluate``, ``infer``).
    """
    if model == "positional":
        parser.add_argument("source", help=MODEL_HELP)
    elif model == "optional":
        parser.add_argument("source", nargs="?", help=MODEL_HELP)
    elif model == "option":
        parser.add_argument("--model", dest="source", metavar="MODEL", required=True, help=MODEL_HELP)
    elif model is not None:
        raise ValueError(f"model must be 'positional', 'optional', 'option' or None, got {model!r}")
    group = parser.add_argument_group("model source")
    if savedir is not None:
        group.add_argument("--savedir", required=savedir == "required", default=None,
                           help="Folder where the model's files appear (default: in place for a local "
                                "folder, else the cache).")
    group.add_argument("--kind", choices=SOURCE_KINDS, default=None,
                       help="Force the source kind (when a local folder has a repo id's name).")
    group.add_argument("--revision", default=None, help="Hub branch, tag or commit.")
    group.add_argument("--offline", action="store_true",
                       help="Serve the model's files from the cache only (as HF_HUB_OFFLINE=1).")
    group.add_argument("--refresh", action="store_true",
                       help="Download the model's files anew instead of revalidating the cached copies.")
    group.add_argument("--cache-dir", default=None, help="Download cache (default: $SPEECHKIT_CACHE, "
                       "~/.cache/speechkit; Hub files: the Hugging Face cache).")
    add_limit_arguments(group)
    if not loads:
        return
    group.add_argument("--trust-remote-code", action="store_true",
                       help="Let a remote hyperparams.yaml build any object (not only the allowlist's).")
    group.add_argument("--allow", action="append", default=[], metavar="NAME",
                       help="An exact dotted name a remote hyperparams.yaml may build besides the allowlist "
                            "(repeatable), e.g. --allow mypackage.models.MyEncoder.")
    shown = DEVICE_OF_LOCAL_RANK if device_default is None else device_default
    group.add_argument("--device", default=device_default, help=f"cpu, cuda, cuda:N (default: {shown}).")
    group.add_argument("--backend", choices=BACKENDS, default="torch",
                       help="Run the PyTorch modules (torch) or the graphs speechkit export --format "
                            "onnx|torchscript wrote into the folder (docs/deploy.md).")


def add_limit_arguments(parser) -> None:
    """The options of :class:`~speechkit.pretrained.sources.limits.SourceLimits` a command line may change."""
    defaults = _default_limits()
    parser.add_argument("--max-yaml-bytes", type=int, default=defaults.max_yaml_bytes,
                        help="Largest hyperparams.yaml accepted from a remote source (default: %(default)s).")
    parser.add_argument("--max-file-bytes", type=int, default=defaults.max_file_bytes,
                        help="Largest file of unannounced size accepted from a remote source "
                             "(default: %(default)s).")
    parser.add_argument("--stall-timeout", type=float, default=defaults.stall_timeout_s,
                        help="Seconds a download may wait for the server's next bytes "
                             "(default: %(default)s).")
    parser.add_argument("--download-timeout", type=float, default=defaults.download_timeout_s,
                        help="Seconds a whole download may take before it stops (it resumes next time; "
                             "default: %(default)s).")


def model_source(args: argparse.Namespace, source=None):
    """The source the flags name: ``source`` (default: the model argument), as a ``FetchSource`` of the
    ``--kind`` given, else as written (its kind guessed when fetched)."""
    source = args.source if source is None else source
    if args.kind is None:
        return source
    from speechkit.pretrained.sources.fetching import FetchSource

    return FetchSource(args.kind, source)


def limits_from(args: argparse.Namespace):
    """The :class:`~speechkit.pretrained.sources.limits.SourceLimits` the limit flags ask for."""
    return dataclasses.replace(_default_limits(), max_yaml_bytes=args.max_yaml_bytes,
                               max_file_bytes=args.max_file_bytes, stall_timeout_s=args.stall_timeout,
                               download_timeout_s=args.download_timeout)


def from_hparams_options(args: argparse.Namespace) -> dict:
    """The keyword arguments of :meth:`~speechkit.pretrained.Pretrained.from_hparams` the flags ask for: all
    but ``source`` (:func:`model_source`) and ``run_opts`` (the device, which a launched process may resolve
    to its rank's GPU). A command without ``--savedir`` (``serve``) gets no ``savedir``. All but ``backend``
    are the settings :meth:`~speechkit.pretrained.sources.model_source.ModelSource.resolve` takes.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_model_source_arguments(parser)
        >>> options = from_hparams_options(parser.parse_args(["models/asr", "--offline", "--allow", "x.Y"]))
        >>> options["allow_network"], options["allow"], options["backend"]
        (False, ['x.Y'], 'torch')
    """
    options = dict(revision=args.revision, allow_network=not args.offline, force_download=args.refresh,
                   cache_dir=args.cache_dir, limits=limits_from(args))
    if hasattr(args, "savedir"):
        options["savedir"] = args.savedir
    if hasattr(args, "trust_remote_code"):
        options.update(trust_remote_code=args.trust_remote_code, allow=list(args.allow), backend=args.backend)
    return options


def _default_limits():
    from speechkit.pretrained.sources.limits import DEFAULT_LIMITS

    return DEFAULT_LIMITS
