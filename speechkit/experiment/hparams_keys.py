"""Which hyperparameter keys a recipe reads, checked before training; "did you mean" for a misspelled key.

A ``Brain`` subclass reads its keys lazily (``self.hparams.lm_weight`` in ``compute_objectives``), so a key
missing from the YAML (misspelled there: ``lm_wieght``) would only fail at the first validation, after an
epoch of training. :func:`keys_read_by` reads the subclass's source once and lists every key its methods name
as ``self.hparams.<key>`` (or through a local alias, ``hp = self.hparams``; ``hp.<key>``);
:func:`check_keys_read` refuses, when the Brain is built, the keys the hyperparameters lack, naming the
method, the line and the nearest keys the file has. A key read with ``getattr(hp, "key", default)`` or
guarded by ``hasattr`` is optional and not checked.

Example:
    >>> did_you_mean("lm_wieght", ["lm_weight", "lr", "beam_size"])
    " (did you mean 'lm_weight'?)"
"""

from __future__ import annotations

import ast
import difflib
import inspect
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from speechkit.errors import HparamsError

__all__ = ["Hparams", "KeyRead", "check_keys_read", "did_you_mean", "keys_read_by", "nearest_keys"]


def nearest_keys(name: str, keys: Iterable, limit: int = 3) -> list:
    """The keys of ``keys`` closest to ``name`` (at most ``limit``, best first; none when none is close).

    Only keys about as close as the best one are kept: ``lm_wieght`` gets ``lm_weight``, not ``ctc_weight``.
    Case and ``-``/``_`` do not count (``LM-Weight`` finds ``lm_weight``).
    """
    def folded(text: str) -> str:
        return text.lower().replace("-", "_")

    scored = []
    for key in dict.fromkeys(str(key) for key in keys):
        score = difflib.SequenceMatcher(None, folded(name), folded(key)).ratio()
        if score >= 0.6:
            scored.append((score, key))
    scored.sort(key=lambda pair: -pair[0])
    best = scored[0][0] if scored else 0.0
    return [key for score, key in scored if score >= best - 0.1][:limit]


def did_you_mean(name: str, keys: Iterable) -> str:
    """``" (did you mean 'x'?)"``, ``" (did you mean 'x' or 'y'?)"``, or ``""`` when no key is close."""
    close = nearest_keys(name, keys)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(key) for key in close) + "?)"


class MissingKeyError(HparamsError, KeyError):
    """A key the hyperparameters lack (a ``KeyError`` too, so ``except KeyError`` keeps working)."""

    __str__ = HparamsError.__str__  # KeyError's would quote the whole message


class Hparams(dict):
    """The loaded hyperparameters: a dict whose missing keys raise :class:`MissingKeyError` naming the file
    and the nearest keys it has, instead of a bare ``KeyError``.

    Example:
        >>> Hparams({"lr": 0.5}, path="train.yaml")["lrr"]
        Traceback (most recent call last):
        speechkit.experiment.hparams_keys.MissingKeyError: train.yaml: no key 'lrr' (did you mean 'lr'?)
    """

    def __init__(self, *args, path: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.path = path

    def __missing__(self, key):
        where = f"{self.path}: " if self.path else ""
        raise MissingKeyError(f"{where}no key {key!r}{did_you_mean(str(key), self)}")


@dataclass(frozen=True)
class KeyRead:
    """One place a method reads a key: ``key``, in ``method`` of ``owner``, at ``file``:``line``."""

    key: str
    owner: str
    method: str
    file: str
    line: int


def keys_read_by(cls: type, stop: Optional[type] = None) -> list:
    """Every ``self.hparams.<key>`` read (directly or through an alias) in the methods of ``cls`` and its
    bases up to ``stop`` (excluded); keys also read optionally (``getattr`` with a default, ``hasattr``) are
    left out. A class whose source cannot be read (defined in an interactive session) gives nothing.
    """
    reads: list = []
    for klass in cls.__mro__:
        if klass is stop or klass is object:
            break
        if stop is not None and not issubclass(klass, stop):
            continue
        reads.extend(_reads_in_class(klass))
    return reads


def check_keys_read(cls: type, hparams: dict, stop: Optional[type] = None, source: str = "") -> None:
    """Raise :class:`HparamsError` naming the first key the methods of ``cls`` read but ``hparams`` lacks.

    ``source`` names the hyperparameter file in the message (when known).
    """
    for read in keys_read_by(cls, stop):
        if read.key not in hparams:
            where = f"{source}: " if source else ""
            raise HparamsError(
                f"{where}no key '{read.key}', which {read.owner}.{read.method} reads ({read.file}, line "
                f"{read.line}){did_you_mean(read.key, hparams)}: add it to the YAML"
            )


def _reads_in_class(klass: type) -> list:
    try:
        lines, first_line = inspect.getsourcelines(klass)
        file = inspect.getsourcefile(klass) or "<unknown>"
    except (OSError, TypeError):
        return []
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return []
    optional = _optional_keys(tree)
    reads = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        aliases = _aliases_of_hparams(function)
        for node in ast.walk(function):
            if not (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)):
                continue
            of_hparams = _is_self_hparams(node.value) or (isinstance(node.value, ast.Name)
                                                          and node.value.id in aliases)
            if of_hparams and not node.attr.startswith("__") and node.attr not in optional:
                reads.append(KeyRead(node.attr, klass.__name__, function.name, file,
                                     first_line + node.lineno - 1))
    return sorted(reads, key=lambda read: read.line)


def _is_self_hparams(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "hparams" and isinstance(node.value, ast.Name)
            and node.value.id == "self")


def _aliases_of_hparams(function: ast.AST) -> set:
    """Local names bound to ``self.hparams`` (``hp = self.hparams``, ``hp, out = self.hparams, {}``)."""
    aliases = set()
    for node in ast.walk(function):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = [(target, node.value)]
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs = list(zip(target.elts, node.value.elts))
            aliases.update(name.id for name, value in pairs
                           if isinstance(name, ast.Name) and _is_self_hparams(value))
    return aliases


def _optional_keys(tree: ast.AST) -> set:
    """Keys named in ``getattr(x, "key", ...)`` / ``hasattr(x, "key")`` anywhere in the class."""
    keys = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr",
                                                                                                  "hasattr")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)):
            keys.add(node.args[1].value)
    return keys
