"""Load a hyperparameter YAML file (hyperpyyaml) with overrides, and report mistakes by file, key and line.

hyperpyyaml builds the objects (``!new:``, ``!name:``, ``!apply:``, ``!ref``, ``!copy``, ``!include:``).
Before handing the file to it, this module reads the file once more with line numbers to check what
hyperpyyaml would report vaguely or not at all: malformed YAML, an override for a key the file does not have,
a ``!ref`` to a missing key, a class or function that cannot be imported. ``!include:`` paths are made
absolute relative to the file that includes them, whatever the working directory.

A whole file can build on another: a file whose top-level mapping is tagged ``!include:base.yaml`` is
``base.yaml`` with the file's keys as overrides (checked like command-line overrides: each must name a key of
the base), so a recipe that shares a template's settings writes only what differs::

    !include:../../../templates/speech_recognition/ASR/hparams/train.yaml
    number_of_epochs: 10

Example:
    >>> hparams = load_hparams("hparams/train.yaml", {"lr": 0.1, "dim": 8})
    >>> hparams["lr"], hparams["model"]
    (0.1, Linear(in_features=8, out_features=2, bias=True))
"""

from __future__ import annotations

import contextlib
import io
import os
import pydoc
import re
import tempfile
from typing import Any, Optional, Union

import ruamel.yaml
from hyperpyyaml import load_hyperpyyaml
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from speechkit.errors import HparamsError, SpeechkitError
from speechkit.experiment.hparams_keys import Hparams, did_you_mean
from speechkit.experiment.run_options import check_option_value, parse_arguments  # noqa: F401  (parse_arguments: re-exported)

__all__ = ["load_hparams", "parse_arguments", "resolve_hparams_text"]

_REFERENCE = re.compile(r"<([^<>]*)>")
_OBJECT_TAGS = ("!new:", "!name:", "!apply:", "!applyref:", "!module:")


def load_hparams(
    path: Union[str, os.PathLike], overrides: Union[dict, str, None] = None, run_opts: Any = None,
    guard: Any = None,
) -> dict:
    """Load ``path`` into a dict of objects, after applying ``overrides``.

    Args:
        path: the YAML file.
        overrides: a dict (``{"lr": 0.1, "model.dim": 256}``; dotted keys reach nested keys) or YAML text
            (``"lr: 0.1"``). Every overridden key must exist in the file.
        run_opts: optional :class:`~speechkit.experiment.run_options.RunOptions`; a ``--seed`` given on the
            command line replaces the file's top-level ``seed`` key (so ``!ref <seed>`` sees it).
        guard: for a file from an untrusted source, an object with ``check(text)``, called on the text after
            overrides, and ``loader``, the loader class for hyperpyyaml's construction pass (see
            :class:`speechkit.pretrained.safety.guard.UntrustedYamlGuard`).

    Returns:
        A dict of the top-level keys (keys starting with ``__`` are dropped, as in hyperpyyaml).

    Raises:
        HparamsError: naming the file, the key and the line of the mistake.
    """
    path = os.fspath(path)
    objects: list = []
    # hyperpyyaml reads an included file itself and writes it back before building: it gets a copy
    # without comments (see _drop_comments), which lives until the objects are built.
    with tempfile.TemporaryDirectory(prefix="speechkit-includes-") as include_folder:
        text = resolve_hparams_text(path, overrides, run_opts, objects, include_folder=include_folder)
        if guard is not None:
            guard.check(text)
        return _build(path, text, objects, guard)


def _build(path: str, text: str, objects: list, guard: Any) -> dict:
    """Run hyperpyyaml on the checked ``text``; name the key of a failing constructor."""
    try:
        loader = _naming_failures(guard.loader if guard is not None else ruamel.yaml.Loader)
        with guard.building() if guard is not None else contextlib.nullcontext():
            hparams = load_hyperpyyaml(io.StringIO(text), loader=loader)
    except SpeechkitError:
        raise
    except _BuildError as error:  # a constructor or function raised: name the keys that use it
        users = [(key, where) for target, key, where in objects if target == error.target]
        cause = f"{error.tag} raised {type(error.cause).__name__}: {error.cause}"
        if len(users) == 1:
            message = f"{users[0][1]}: key '{users[0][0]}': {cause}"
        else:
            used_by = "; ".join(f"key '{key}' ({where})" for key, where in users)
            message = f"{path}: {cause}" + (f" (used by {used_by})" if used_by else "")
        raise HparamsError(message) from error.cause
    except Exception as error:  # hyperpyyaml raises many kinds; name the object that failed when we can
        message = str(error)
        culprits = [(target, key, where) for target, key, where in objects if target in message]
        place = f"{culprits[-1][2]}: key '{culprits[-1][1]}'" if culprits else path
        raise HparamsError(
            f"{place}: cannot build the hyperparameters: {type(error).__name__}: {message}"
        ) from error
    return Hparams(hparams, path=path)


class _BuildError(Exception):
    """A tag's constructor or function raised (carries the tag, for the message)."""

    def __init__(self, tag: str, cause: Exception):
        super().__init__(f"{tag}: {cause}")
        self.tag, self.target, self.cause = tag, tag.split(":", 1)[1], cause


def _naming_failures(base: type) -> type:
    """A subclass of the loader ``base`` whose tag constructors report which tag raised."""

    class NamingLoader(base):
        @classmethod
        def add_multi_constructor(cls, tag_prefix, multi_constructor):
            def named(loader, suffix, node):
                try:
                    return multi_constructor(loader, suffix, node)
                except (SpeechkitError, _BuildError):
                    raise
                except Exception as error:
                    raise _BuildError(f"{tag_prefix}{suffix}", error) from error

            super().add_multi_constructor(tag_prefix, named)

    return NamingLoader


def resolve_hparams_text(
    path: str, overrides: Union[dict, str, None] = None, run_opts: Any = None, objects: Optional[list] = None,
    include_folder: Optional[str] = None,
) -> str:
    """Check ``path``, apply ``overrides``; return YAML text ready for hyperpyyaml (includes made absolute).

    This is the text :func:`~speechkit.experiment.create_experiment_directory` records as the run's hparams.
    Comments are left out (they could change what a second reading builds: see :func:`_drop_comments`).
    With ``include_folder``, each ``!include:`` names a copy of the included file written there, with its
    overrides applied and without comments, instead of the file itself.
    """
    tree = _read_file(path)
    override_tree = _override_tree(overrides, path)
    seed = getattr(run_opts, "seed", None)
    if seed is not None and "seed" in getattr(run_opts, "explicit", ()) and "seed" in tree:
        override_tree = _merge(override_tree, {"seed": seed})
    _apply_overrides(tree, override_tree, path, prefix="")
    for key, value in tree.items():  # run options the YAML sets (read by RunOptions.merged_with)
        if not _tag(value):
            line = _line_of(tree, key)
            check_option_value(str(key), value, f"{path}, line {line}" if line else path)
    _check_tree(
        tree,
        tree,
        path,
        os.path.dirname(os.path.abspath(path)),
        "",
        None,
        objects if objects is not None else [],
        include_folder,
    )
    _drop_comments(tree)
    stream = io.StringIO()
    _round_trip().dump(tree, stream)
    return stream.getvalue()


def _drop_comments(node: Any) -> None:
    """Remove every comment from a round-trip tree, in place.

    ruamel.yaml keeps a comment that follows a tag (``- !new:a.B   # why``) as the comment before the
    tagged collection's first entry and writes it back where a second reading attaches it elsewhere, which
    turns ``!new:a.B`` plus its arguments into a plain mapping. hyperpyyaml reads the text once more, so the
    text handed to it carries no comments (the file as written is kept beside it: see
    :func:`speechkit.experiment.create_experiment_directory`).
    """
    comments = getattr(node, "ca", None)
    if comments is not None:
        comments.comment = None
        comments.items.clear()
        comments.end = []
        if comments.pre is not None:
            comments.pre = []
    if isinstance(node, dict):
        for value in node.values():
            _drop_comments(value)
    elif isinstance(node, list):
        for value in node:
            _drop_comments(value)


def _round_trip() -> ruamel.yaml.YAML:
    yaml = ruamel.yaml.YAML()  # round trip: keeps tags and line numbers
    return yaml


def _read_file(path: str, extending: tuple = ()) -> dict:
    """The tree of the hparams file ``path``: a top-level mapping, with the file it extends (a top-level
    ``!include:``) read first and this file's keys applied to it as overrides."""
    tree = _read_tree(path)
    if not isinstance(tree, dict):
        raise HparamsError(f"{path}: the top level must be a mapping of keys, got {type(tree).__name__}")
    tag = _tag(tree)
    if not tag.startswith("!include:"):
        return tree
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.normpath(os.path.join(folder, tag[len("!include:") :]))
    if not os.path.isfile(base):
        raise HparamsError(f"{path}: the file it extends (top-level !include) is not found: {base}")
    if base in extending:
        raise HparamsError(f"{path}: the files extending each other form a circle: "
                           + " -> ".join([*extending, os.path.abspath(path), base]))
    base_tree = _read_file(base, (*extending, os.path.abspath(path)))
    _absolute_includes(base_tree, os.path.dirname(base))  # the base's own includes are relative to it
    overrides = dict(tree)
    _absolute_includes(overrides, folder)
    _apply_overrides(base_tree, overrides, f"{path} (extending {base})", prefix="")
    return base_tree


def standalone_hparams_text(path: Union[str, os.PathLike]) -> str:
    """The text of the hparams file ``path`` as a file of its own: the file itself, or, when it extends
    another (a top-level ``!include:``), the file it extends with its keys applied (comments left out).

    For files that leave the recipe's folder, such as the ``hyperparams.yaml`` of a model folder
    (``speechkit export``), which can no longer reach the file they extend.

    Example:
        >>> standalone_hparams_text("hparams/train.yaml").splitlines()[0]
        'lr: 0.01'
    """
    if not _tag(_read_tree(os.fspath(path))).startswith("!include:"):
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    return resolve_hparams_text(os.fspath(path))


def _absolute_includes(node: Any, folder: str) -> None:
    """Make every relative ``!include:`` path under ``node`` absolute, relative to ``folder``, in place."""
    included = _tag(node)[len("!include:") :] if _tag(node).startswith("!include:") else ""
    if included and not os.path.isabs(included):
        node.yaml_set_ctag(ruamel.yaml.comments.Tag(suffix="!include:" + os.path.join(folder, included)))
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        _absolute_includes(child, folder)


def _read_tree(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return _round_trip().load(handle)
    except FileNotFoundError:
        raise HparamsError(f"{path}: hyperparameter file not found") from None
    except MarkedYAMLError as error:
        raise HparamsError(f"{path}, {_describe_yaml_error(error)}") from None
    except YAMLError as error:
        raise HparamsError(f"{path}: malformed YAML: {error}") from None
    except UnicodeDecodeError as error:
        raise HparamsError(f"{path}: byte {error.start} is not UTF-8; a hyperparams file must be UTF-8 "
                           "text") from None
    except RecursionError:
        raise HparamsError(f"{path}: nested too deeply for the YAML parser") from None


def _describe_yaml_error(error: MarkedYAMLError) -> str:
    mark = error.problem_mark or error.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "unknown line"
    problem = " ".join(str(part) for part in (error.context, error.problem) if part)
    return f"{where}: malformed YAML: {problem}"


def _override_tree(overrides: Union[dict, str, None], path: str) -> dict:
    """Turn a dict or YAML text with dotted keys into a nested dict."""
    if overrides is None or overrides == "" or overrides == {}:
        return {}
    if isinstance(overrides, str):
        try:
            overrides = _round_trip().load(overrides)
        except YAMLError as error:
            raise HparamsError(f"{path}: the overrides are not valid YAML: {error}") from None
        if overrides is None:
            return {}
    if not isinstance(overrides, dict):
        raise HparamsError(f"{path}: overrides must be a mapping, got {type(overrides).__name__}")
    nested: dict = {}
    for key, value in overrides.items():
        nested = _merge(nested, _nest(str(key), value))
    return nested


def _nest(key: str, value: Any) -> dict:
    parts = key.split(".")
    for part in reversed(parts[1:]):
        value = {part: value}
    return {parts[0]: value}


def _merge(base: dict, extra: dict) -> dict:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and not hasattr(value, "tag"):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _line_of(mapping: Any, key: Any) -> Optional[int]:
    try:
        return mapping.lc.key(key)[0] + 1
    except (AttributeError, KeyError, TypeError):
        return None


def _apply_overrides(tree: dict, overrides: dict, path: str, prefix: str) -> None:
    for key, value in overrides.items():
        dotted = f"{prefix}{key}"
        if key not in tree:
            if _tag(tree).startswith("!include:"):
                tree[key] = value  # passed on to the included file as its override
                continue
            hint = did_you_mean(str(key), tree)
            if not hint:
                hint = f" (the file has {len(tree)} keys{' here' if prefix else ''}; see {path})"
            raise HparamsError(f"{path}: override '{dotted}' names no key of the file{hint}")
        current = tree[key]
        if isinstance(value, dict) and not _tag(value) and _tag(current).startswith("!include:"):
            if not isinstance(current, dict):  # `x: !include:f.yaml` alone: give it an argument mapping
                tree[key] = current = _tagged_mapping(_tag(current))
            _apply_overrides(current, value, path, prefix=f"{dotted}.")
        elif isinstance(value, dict) and not _tag(value) and isinstance(current, dict):
            _apply_overrides(current, value, path, prefix=f"{dotted}.")
        else:
            _check_override_type(current, value, path, dotted, _line_of(tree, key), top_level=not prefix)
            tree[key] = value


def _check_override_type(current: Any, value: Any, path: str, dotted: str, line: Optional[int],
                         top_level: bool) -> None:
    """An override must fit the type of a number or boolean it replaces (``--number_of_epochs abc``)."""
    where = f"{path}, line {line}" if line else path
    if top_level and check_option_value(dotted, value, f"{where}: override"):
        return
    if _tag(current) or _tag(value) or current is None:
        return
    if isinstance(current, bool):
        fits, kind = isinstance(value, bool) or value in (0, 1), "bool"
    elif isinstance(current, (int, float)):
        fits = isinstance(value, (int, float)) and not isinstance(value, bool)
        kind = "int" if isinstance(current, int) else "float"
    else:
        return
    if value is None and (fits or _documents_null(path, line)):
        return
    if not fits:
        unset = ""
        if value is None:
            name = dotted.rsplit(".", 1)[-1]
            unset = (f"; null is taken for a {kind} key whose comment in the YAML (on its line or the lines "
                     f"just above) says what null means, e.g. '{name}: {current}  # null: no limit'")
        raise HparamsError(f"{where}: override '{dotted}' = {value!r} does not fit the key's "
                           f"{kind} value {current!r}{unset}")


_NULL_WORD = re.compile(r"\bnull\b")


def _documents_null(path: str, line: Optional[int]) -> bool:
    """Whether the comment on line ``line`` of ``path``, or the comment lines just above it, mention ``null``.

    That is how a YAML file says a number key may be unset (``trim_margin: 0.1  # null reads the audio
    whole``), so ``--trim_margin null`` is taken for it and refused for the others.
    """
    if not line:
        return False
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return False
    if line > len(lines):
        return False
    own = lines[line - 1]
    comments = [own[own.index(" #"):]] if " #" in own else []
    above = line - 2
    while above >= 0 and lines[above].lstrip().startswith("#"):
        comments.append(lines[above])
        above -= 1
    return any(_NULL_WORD.search(comment) for comment in comments)


def _tagged_mapping(tag: str) -> ruamel.yaml.comments.CommentedMap:
    mapping = ruamel.yaml.comments.CommentedMap()
    mapping.yaml_set_ctag(ruamel.yaml.comments.Tag(suffix=tag))
    return mapping


def _tag(node: Any) -> str:
    tag = getattr(node, "tag", None)
    value = getattr(tag, "value", tag)
    return value if isinstance(value, str) else ""


def _check_tree(
    node: Any, root: dict, path: str, base_dir: str, key: str, line: Optional[int], objects: list,
    include_folder: Optional[str] = None,
) -> None:
    """Walk the tree: check references and imports; make include paths absolute."""
    tag = _tag(node)
    where = f"{path}, line {line}" if line else path
    if tag in ("!ref", "!copy"):
        _check_reference(str(getattr(node, "value", node)), root, where, key, tag)
    elif tag.startswith(_OBJECT_TAGS):
        target = tag.split(":", 1)[1]
        objects.append((target, key, where))
        try:
            found = pydoc.locate(target)
        except pydoc.ErrorDuringImport as error:  # the module exists but raised while importing
            raise HparamsError(
                f"{where}: key '{key}': cannot import '{target}' ({tag.split(':')[0]}): importing "
                f"{error.filename} raised {error.exc.__name__}: {error.value}{_raised_at(error.tb)}"
            ) from None
        if found is None:
            raise HparamsError(
                f"{where}: key '{key}': cannot import '{target}' ({tag.split(':')[0]}); check the "
                "module path and that its package is installed"
            )
    elif tag.startswith("!include:"):
        included = tag[len("!include:") :]
        absolute = included if os.path.isabs(included) else os.path.join(base_dir, included)
        if not os.path.isfile(absolute):
            raise HparamsError(f"{where}: key '{key}': included file not found: {absolute}")
        inner = _read_file(absolute)
        if isinstance(inner, dict):
            inner_overrides = {k: v for k, v in node.items()} if isinstance(node, dict) else {}
            _apply_overrides(inner, inner_overrides, absolute, prefix=f"{key}.")
            _check_tree(inner, inner, absolute, os.path.dirname(absolute), "", None, objects, include_folder)
            if include_folder is not None:
                absolute = _write_include_copy(inner, absolute, include_folder)
        node.yaml_set_ctag(ruamel.yaml.comments.Tag(suffix=f"!include:{absolute}"))
    if isinstance(node, dict):
        for sub_key, sub_node in node.items():
            dotted = f"{key}.{sub_key}" if key else str(sub_key)
            _check_tree(sub_node, root, path, base_dir, dotted, _line_of(node, sub_key) or line, objects,
                        include_folder)
    elif isinstance(node, list):
        for index, sub_node in enumerate(node):
            sub_line = line
            try:
                sub_line = node.lc.item(index)[0] + 1
            except (AttributeError, KeyError, TypeError):
                pass
            _check_tree(sub_node, root, path, base_dir, f"{key}[{index}]", sub_line, objects, include_folder)


def _write_include_copy(tree: dict, original: str, folder: str) -> str:
    """Write ``tree`` (an included file, checked) without comments into ``folder``; return the copy's path."""
    _drop_comments(tree)
    copy = os.path.join(folder, f"{len(os.listdir(folder))}-{os.path.basename(original)}")
    with open(copy, "w", encoding="utf-8") as handle:
        _round_trip().dump(tree, handle)
    return copy


def _raised_at(traceback: Any) -> str:
    """' (at FILE, line N)' of the innermost frame of an import error, so the broken module can be opened."""
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    if traceback is None:
        return ""
    return f" (at {traceback.tb_frame.f_code.co_filename}, line {traceback.tb_lineno})"


def _check_reference(text: str, root: dict, where: str, key: str, tag: str) -> None:
    for reference in _REFERENCE.findall(text):
        name = reference.split(".", 1)[0]  # `<model.attr>` reads an attribute of key `model`
        branch: Any = root
        for part in name.split("["):
            part = part.strip("]").strip()
            if _tag(branch).startswith("!include:") and not (isinstance(branch, dict) and part in branch):
                branch = _read_file(_tag(branch)[len("!include:") :])  # made absolute by _check_tree
            if not isinstance(branch, dict) or part not in branch:
                raise HparamsError(f"{where}: key '{key}': {tag} <{reference}> names no key '{name}'")
            branch = branch[part]
