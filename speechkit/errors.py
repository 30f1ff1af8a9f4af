"""The exceptions a user can see.

Every error names what the user must look at: the file, the key, the utterance id or the line. Catch
``SpeechkitError`` to handle them all.
"""
from __future__ import annotations


class SpeechkitError(Exception):
    """Base class of every error speechkit raises on purpose."""


class HparamsError(SpeechkitError):
    """A hyperparameter file cannot be loaded: bad YAML, a missing key, an unknown override, a bad class.

    Example:
        >>> raise HparamsError("train.yaml, line 12: !ref <lr> names no key 'lr'")
        Traceback (most recent call last):
        speechkit.errors.HparamsError: train.yaml, line 12: !ref <lr> names no key 'lr'
    """


class RunOptionsError(SpeechkitError):
    """A command-line run option has a bad value."""


class AudioError(SpeechkitError):
    """An audio file is missing, cannot be decoded, or has the wrong sample rate."""


class ManifestError(SpeechkitError):
    """A manifest row is malformed: missing field, duplicate id, wrong type, missing file."""


class DataError(SpeechkitError):
    """A dataset, pipeline or sampler was configured or used wrongly."""


class CheckpointError(SpeechkitError):
    """A checkpoint cannot be written, found or loaded."""


class ExperimentError(SpeechkitError):
    """An experiment folder cannot be used: another run is writing into it."""


class NonFiniteLossError(SpeechkitError):
    """The loss stayed non-finite for more batches than the patience allows."""


class DistributedError(SpeechkitError):
    """A worker failed, or the processes could not agree on their place in the world."""


class FetchError(SpeechkitError):
    """A pretrained file cannot be fetched (missing, offline, interrupted, wrong checksum)."""


class FetchNotFoundError(FetchError):
    """The source has no such file: a local folder without it, an HTTP 404 or 410 answer, a Hub repo without
    that entry, or, offline, a file the cache recorded as absent when it was last asked for. Any other failure
    (a size limit, a timeout, a server error, an unsafe name) is a plain :class:`FetchError`, so a caller may
    take "not there" as an answer about the folder's layout without mistaking a failure for one."""


class UnsafeSourceError(SpeechkitError):
    """A file from a non-local source asked to build an object outside the allowlist."""


class JobError(SpeechkitError):
    """A batch job over a manifest cannot run, resume or merge: a folder started with other settings, a shard
    run twice at once, or an item missing or done twice at merge."""


class ExportError(SpeechkitError):
    """A model cannot be exported as a graph (naming the module and the operation), or its exported graph
    differs from PyTorch for some lengths (naming them and the traced lines at fault)."""


class PreemptedError(SpeechkitError):
    """Training stopped on a preemption signal after saving a checkpoint (see ``EXIT_PREEMPTED``)."""


#: Exit code of a run that saved a checkpoint on SIGTERM/SIGUSR1 and stopped; run the same command to resume.
EXIT_PREEMPTED = 75  # EX_TEMPFAIL: a temporary failure, retrying is expected to work

#: Exit code of a run that saved a checkpoint on Ctrl-C (SIGINT) and stopped: 128 + SIGINT, as shells report
#: an interrupted command; run the same command to resume.
EXIT_INTERRUPTED = 130
