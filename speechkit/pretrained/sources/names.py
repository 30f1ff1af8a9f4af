"""Names from a model folder that become parts of paths on this machine: checked before anything is written.

A model folder names files (``paths`` values, the filenames of a listing), loadables (whose name can become a
file name in the save folder) and a ``collect_in`` folder. Each must stay inside the folder it is written to:

- :func:`check_file_name`: one plain file name (no ``/``, ``\\``, NUL, ``.`` or ``..``);
- :func:`check_relative_name`: a relative path of plain names (a file in a subfolder of a Hub repo);
- :func:`inside`: the path a relative name gives under a folder, checked once more after resolving links;
- :func:`check_pretrainer_names`: every such name in a YAML's ``pretrainer``, before anything is built,
  with an :class:`~speechkit.errors.UnsafeSourceError` naming the key and the line.

Example:
    >>> check_file_name("encoder.ckpt", "loadable name")
    'encoder.ckpt'
    >>> check_file_name("../../.bashrc", "loadable name")
    Traceback (most recent call last):
    ...
    speechkit.errors.FetchError: loadable name '../../.bashrc' is not a plain file name ...
"""
from __future__ import annotations

import os
import pathlib
from typing import Union

from speechkit.errors import FetchError, UnsafeSourceError

_REASON = "(no '/', '\\\\', NUL, '.' or '..'): it would place a file outside the save folder"


def check_file_name(name, what: str) -> str:
    """``name`` itself when it is one plain file name, else :class:`FetchError` naming ``what``."""
    text = name if isinstance(name, str) else None
    if not text or text in (".", "..") or any(c in text for c in "/\\\0"):
        raise FetchError(f"{what} {name!r} is not a plain file name {_REASON}")
    return text


def check_relative_name(name, what: str) -> str:
    """``name`` when it is a relative path whose every part is a plain file name (``sub/file.ckpt``)."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name:
        raise FetchError(f"{what} {name!r} is not a relative path of plain file names {_REASON}")
    for part in name.split("/"):
        if not part or part in (".", "..") or "\0" in part:
            raise FetchError(f"{what} {name!r} is not a relative path of plain file names {_REASON}")
    return name


def inside(folder: Union[str, os.PathLike], name: str, what: str) -> pathlib.Path:
    """``folder / name`` after checking ``name`` and that its parent, links resolved, lies under ``folder``.

    The parent folders are created (inside ``folder`` only), so a link planted in the folder cannot lead a
    write elsewhere.
    """
    check_relative_name(name, what)
    root = pathlib.Path(folder)
    destination = root / name
    destination.parent.mkdir(parents=True, exist_ok=True)
    real_root, real_parent = os.path.realpath(root), os.path.realpath(destination.parent)
    if os.path.commonpath([real_root, real_parent]) != real_root:
        raise FetchError(f"{what} {name!r}: {destination.parent} leads to {real_parent}, outside the save "
                         f"folder {real_root}; refused")
    return destination


def check_pretrainer_names(yaml_text: str, where: str) -> None:
    """Refuse, naming key and line, a name in the YAML's ``pretrainer`` that could leave the save folder.

    Checked: every loadable name (a plain file name, since it can become ``{name}.{file}``), the file part of
    every ``paths`` value (plain names; ``..`` nowhere) and a plain-text ``collect_in`` (relative, no ``..``).
    """
    import yaml

    try:
        root = yaml.compose(yaml_text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return  # the YAML checks report it with its line
    pretrainer = yaml_child(root, "pretrainer")
    if pretrainer is None:
        return

    def refuse(node, key: str, error: Exception):
        raise UnsafeSourceError(f"{where}, line {node.start_mark.line + 1}: pretrainer {key}: {error}; "
                                "refused") from None

    for key, _ in yaml_items(yaml_child(pretrainer, "loadables")):
        try:
            check_file_name(key.value, "loadable name")
        except FetchError as error:
            refuse(key, f"loadables key {key.value!r}", error)
    for key, value in yaml_items(yaml_child(pretrainer, "paths")):
        for text in _strings(value):
            parts = [p for p in text.replace("\\", "/").split("/") if p not in ("", "http:", "https:")]
            if ".." in parts or "." in parts or "\0" in text:
                refuse(value, f"paths[{key.value}]", FetchError(f"path {text!r} holds '.' or '..'"))
            if not parts:
                refuse(value, f"paths[{key.value}]", FetchError(f"path {text!r} names no file"))
    collect_in = yaml_child(pretrainer, "collect_in")
    if isinstance(collect_in, yaml.ScalarNode) and not collect_in.tag.startswith("!"):
        text = collect_in.value
        if text.startswith(("/", "~")) or ".." in text.replace("\\", "/").split("/"):
            refuse(collect_in, "collect_in", FetchError(f"folder {text!r} is not inside the save folder"))


def _strings(node) -> list:
    import yaml

    if isinstance(node, yaml.ScalarNode):
        return [node.value]
    if isinstance(node, yaml.SequenceNode):
        return [text for child in node.value for text in _strings(child)]
    if isinstance(node, yaml.MappingNode):
        return [text for _, child in node.value for text in _strings(child)]
    return []


def yaml_child(node, name):
    """The value node of key ``name`` in a composed YAML mapping node, or None."""
    for key, value in yaml_items(node):
        if key.value == name:
            return value
    return None


def yaml_items(node):
    """The ``(key node, value node)`` pairs of a composed YAML mapping node (none for anything else)."""
    import yaml

    return node.value if isinstance(node, yaml.MappingNode) else []
