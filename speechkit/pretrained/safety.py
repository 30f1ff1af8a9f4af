"""Keep files from untrusted sources as data: a remote hyperparams YAML builds only what the allowlist names.

hyperpyyaml turns tags into calls, in two passes. The first (ruamel) resolves ``!ref`` / ``!copy`` (where
``<key.attr>`` becomes a ``getattr`` call), runs ``!applyref:`` and reads ``!include:`` files; the second
constructs ``!new:``, ``!name:``, ``!module:``, ``!apply:`` and ``!tuple`` (whose text it parses with an
unsafe loader). So a YAML from a Hub repo or a URL is vetted twice:

1. :func:`check_yaml_is_safe` reads the text with the first pass's parser, without constructing anything,
   and refuses (deny by default) the first node that could do more than build an allowlisted name
   (see :mod:`speechkit.pretrained.allowlist`): a callable tag whose target is not on the allowlist for that
   tag, ``!module:``, ``!include:``, a reference that reads an attribute (``<model.__class__>``, also from a
   plain string a reference may reach), a tuple holding a tag, any other tag (``!!python/object/apply:``),
   and alias bombs. The :class:`UnsafeSourceError` names the tag, the target, the file and the line.
2. :class:`UntrustedYamlGuard` re-checks the exact text handed to hyperpyyaml after overrides and gives
   hyperpyyaml's second pass a safe loader whose constructors refuse anything off the allowlist, so a parser
   difference cannot turn into a call.

Example:
    >>> check_yaml_is_safe("enc: !new:torch.nn.Linear [4, 2]\\n", "hyperparams.yaml")
    >>> check_yaml_is_safe("x: !apply:os.system [ls]\\n", "hyperparams.yaml")
    Traceback (most recent call last):
    ...
    speechkit.errors.UnsafeSourceError: hyperparams.yaml, line 1: tag '!apply:os.system' ...
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Optional

import ruamel.yaml
import yaml

from speechkit.errors import UnsafeSourceError
from speechkit.pretrained.allowlist import LOADABLE, Allowlist, default_allowlist

#: Largest number of nodes a remote YAML may expand to (anchors and aliases can multiply a small file).
MAX_EXPANDED_NODES = 200_000

_CALLABLE_TAGS = ("!new:", "!name:", "!apply:", "!applyref:")
_YAML_TYPES = {f"tag:yaml.org,2002:{name}" for name in
               ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "merge")}
_REFERENCE = re.compile(r"<([^>]*)>")  # as hyperpyyaml finds references
_TUPLE = re.compile(r"^\(.*\)$", re.DOTALL)  # hyperpyyaml's implicit !tuple resolver
_TRUST_HINT = "(pass trust_remote_code=True if you trust this source, or allow=[...] for exact names)"


def check_yaml_is_safe(text: str, filename: str, allow: Iterable[str] = (),
                       allowlist: Optional[Allowlist] = None) -> None:
    """Raise :class:`UnsafeSourceError` naming tag, target, file and line of the first thing a remote YAML
    may not do.

    Args:
        text: the YAML text.
        filename: its name (or source description), for the message.
        allow: extra exact dotted names the caller trusts (added to the built-in allowlist).
        allowlist: the allowlist to use instead of the built-in one (``allow`` is added to it).
    """
    allowlist = allowlist or default_allowlist()
    if allow:
        allowlist = allowlist.extended(allow)
    try:
        root = ruamel.yaml.YAML().compose(text)
    except ruamel.yaml.YAMLError as error:
        raise UnsafeSourceError(f"{filename}: cannot be vetted, it does not parse as YAML "
                                f"({error})") from None
    size = _expanded_size(root, {})
    if size > MAX_EXPANDED_NODES:
        raise UnsafeSourceError(f"{filename}: expands to {size} YAML nodes through anchors and aliases (more "
                                f"than {MAX_EXPANDED_NODES}); refused")
    for node in sorted(_walk(root), key=lambda n: n.start_mark.index):  # report the first in the file
        _check_node(node, filename, allowlist)


class UntrustedYamlGuard:
    """What :func:`speechkit.hparams.load_hparams` needs to load a YAML from a non-local source.

    ``check(text)`` vets the final text (after overrides) and ``loader`` is the loader class for
    hyperpyyaml's construction pass, refusing every tag off the allowlist.

    Args:
        where: the file's description for messages (``hyperparams.yaml from https://...``).
        allow: extra exact names the caller trusts.
        overrides: the caller's overrides; the names their tags build are trusted too.
    """

    def __init__(self, where: str, allow: Iterable[str] = (), overrides=None):
        self.where = where
        self.allowlist = default_allowlist().extended(list(allow) + _override_targets(overrides))
        self.loader = _guarded_loader(self.allowlist, where)

    def check(self, text: str) -> None:
        check_yaml_is_safe(text, f"{self.where} (after overrides)", allowlist=self.allowlist)


def _check_node(node, filename: str, allowlist: Allowlist) -> None:
    tag = _tag(node)
    line = node.start_mark.line + 1

    def refuse(target: Optional[str], reason: str):
        what = "plain value" if tag in _YAML_TYPES else f"tag '{tag}'"
        what += f" (target '{target}')" if target else ""
        raise UnsafeSourceError(f"{filename}, line {line}: {what} is refused: {reason}; a YAML from a "
                                f"non-local source may only build names on the allowlist {_TRUST_HINT}")

    if isinstance(node, ruamel.yaml.ScalarNode) and tag in ("tag:yaml.org,2002:str", "!ref", "!copy"):
        for reference in _REFERENCE.findall(str(node.value)):
            if "." in reference:  # hyperpyyaml turns `<key.attr>` into getattr(key, "attr")
                refuse(f"<{reference}>", "a reference may not read an attribute")
        if tag == "tag:yaml.org,2002:str" and _TUPLE.match(str(node.value)) and "!" in str(node.value):
            refuse(str(node.value), "a tuple may hold only plain values")  # its text is parsed unsafely
    if tag in _YAML_TYPES or tag in ("!ref", "!copy", "!PLACEHOLDER"):
        return
    if tag == "!tuple":
        if "!" in str(node.value):
            refuse(str(node.value), "a tuple may hold only plain values")
        return
    if tag.startswith("!include:"):
        refuse(tag[len("!include:"):], "a YAML from a non-local source may not include other files")
    if tag.startswith("!module:"):
        refuse(tag[len("!module:"):], "a model folder never needs a module object")
    for prefix in _CALLABLE_TAGS:
        if tag.startswith(prefix):
            target = tag[len(prefix):]
            reason = allowlist.refusal(prefix, target)
            if reason:
                refuse(target, reason)
            if allowlist.entries[target] == LOADABLE and _has_arguments(node):
                refuse(target, "a loadable is named without arguments (the pretrainer builds it from a file)")
            return
    refuse(None, "it is not a hyperpyyaml tag")


def _has_arguments(node) -> bool:
    if isinstance(node, ruamel.yaml.ScalarNode):
        return bool(str(node.value).strip())
    return bool(node.value)


def _tag(node) -> str:
    tag = node.tag
    return str(getattr(tag, "value", tag) or "")


def _expanded_size(node, memo: dict) -> int:
    """Nodes the document holds once every alias is copied out (memoized: linear in the file's size)."""
    if node is None:
        return 0
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = 1  # a recursive alias counts once instead of looping
    children = []
    if isinstance(node, ruamel.yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    elif isinstance(node, ruamel.yaml.SequenceNode):
        children = node.value
    memo[id(node)] = 1 + sum(_expanded_size(child, memo) for child in children)
    return memo[id(node)]


def _walk(node):
    """Every distinct node once (aliases point at nodes already seen)."""
    if node is None:
        return
    stack, seen = [node], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, ruamel.yaml.MappingNode):
            for key, value in current.value:
                stack.extend((key, value))
        elif isinstance(current, ruamel.yaml.SequenceNode):
            stack.extend(current.value)


def _override_targets(overrides) -> list:
    """Dotted names the caller's overrides build (YAML text overrides can hold tags)."""
    if not isinstance(overrides, str) or not overrides.strip():
        return []
    try:
        root = ruamel.yaml.YAML().compose(overrides)
    except ruamel.yaml.YAMLError:
        return []  # load_hparams reports it
    targets = []
    for node in _walk(root):
        for prefix in _CALLABLE_TAGS:
            if _tag(node).startswith(prefix):
                targets.append(_tag(node)[len(prefix):])
    return targets


def _guarded_loader(allowlist: Allowlist, where: str) -> type:
    """A safe loader class for hyperpyyaml's construction pass that checks each constructor's target.

    hyperpyyaml registers its constructors on the class it is given; this class wraps each one as it is
    registered, and replaces the ``!tuple`` constructor (which parses the tuple's text with an unsafe loader).
    """

    class GuardedLoader(ruamel.yaml.SafeLoader):
        @classmethod
        def add_multi_constructor(cls, tag_prefix, multi_constructor):
            def guarded(loader, suffix, node):
                reason = allowlist.refusal(tag_prefix, suffix)
                if tag_prefix == "!module:" or reason:
                    raise UnsafeSourceError(f"{where}: tag '{tag_prefix}{suffix}' is refused while building "
                                            f"(line {node.start_mark.line + 1} of the resolved text): "
                                            f"{reason or 'a model folder never needs a module object'}")
                return multi_constructor(loader, suffix, node)

            super().add_multi_constructor(tag_prefix, guarded)

        @classmethod
        def add_constructor(cls, tag, constructor):
            super().add_constructor(tag, _safe_tuple if tag == "!tuple" else constructor)

    return GuardedLoader


def _safe_tuple(loader, node) -> tuple:
    text = loader.construct_scalar(node)
    return tuple(yaml.safe_load("[" + text[1:-1] + "]"))
