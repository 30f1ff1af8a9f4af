"""Keep files from untrusted sources as data: a remote hyperparams YAML builds only what the allowlist names.

hyperpyyaml turns tags into calls, in two passes. The first (ruamel) resolves ``!ref`` / ``!copy`` (where
``<key.attr>`` becomes a ``getattr`` call), runs ``!applyref:`` and reads ``!include:`` files; the second
constructs ``!new:``, ``!name:``, ``!module:``, ``!apply:`` and ``!tuple`` (whose text it parses with an
unsafe loader). So a YAML from a Hub repo or a URL is vetted twice:

1. :func:`check_yaml_is_safe` reads the text with the first pass's parser, without constructing anything,
   and refuses (deny by default) the first node that could do more than build an allowlisted name
   (see :mod:`speechkit.pretrained.safety.allowlist`): a callable tag whose target is not on the allowlist
   for that tag, ``!module:``, ``!include:``, a reference that reads an attribute (``<model.__class__>``,
   also from a plain string a reference may reach), a tuple holding a tag, any other tag
   (``!!python/object/apply:``), and alias bombs. The :class:`UnsafeSourceError` names the tag, the target,
   the file and the line.
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

import os
import pathlib
import re
from collections.abc import Iterable
from typing import Optional

import ruamel.yaml
import yaml

from speechkit.errors import HparamsError, UnsafeSourceError
from speechkit.pretrained.safety.allowlist import LOADABLE, Allowlist, default_allowlist
from speechkit.pretrained.sources.limits import DEFAULT_LIMITS, SourceLimits

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
    check_nesting(text, filename)
    try:
        root = ruamel.yaml.YAML().compose(text)
    except ruamel.yaml.YAMLError as error:
        # Line and problem only: the error's snippet would quote the file, which may be anything.
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or type(error).__name__
        raise UnsafeSourceError(f"{filename}{line}: cannot be vetted, it does not parse as YAML "
                                f"({problem})") from None
    except RecursionError:
        raise UnsafeSourceError(f"{filename}: cannot be vetted, it is nested too deeply for the YAML "
                                "parser") from None
    size = _expanded_size(root, {})
    if size > MAX_EXPANDED_NODES:
        raise UnsafeSourceError(f"{filename}: expands to {size} YAML nodes through anchors and aliases (more "
                                f"than {MAX_EXPANDED_NODES}); refused")
    for node in sorted(_walk(root), key=lambda n: n.start_mark.index):  # report the first in the file
        _check_node(node, filename, allowlist)


def read_untrusted_yaml(path, where: str, limits: SourceLimits = DEFAULT_LIMITS) -> str:
    """The text of a YAML from a non-local source, refused before parsing when it is too large, not UTF-8
    or nested too deeply (:class:`UnsafeSourceError` / :class:`HparamsError` naming the file and line)."""
    size = os.path.getsize(path)
    if size > limits.max_yaml_bytes:
        raise UnsafeSourceError(f"{where}: {size} bytes, more than the limit of {limits.max_yaml_bytes} for "
                                "a YAML from a non-local source (raise it with "
                                "limits=SourceLimits(max_yaml_bytes=...)); refused before parsing")
    data = pathlib.Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise HparamsError(f"{where}, line {line}: byte {error.start} (0x{data[error.start]:02x}) is not "
                           "UTF-8; a hyperparams file must be UTF-8 text") from None
    check_nesting(text, where, limits.max_nesting)
    return text


def check_nesting(text: str, where: str, limit: int = DEFAULT_LIMITS.max_nesting) -> None:
    """Refuse, naming the line, a YAML nested deeper than ``limit`` brackets or block levels (the parsers
    recurse once per level and would end in a RecursionError)."""
    depth, quote, indents = 0, None, [0]
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip(" ")
        if stripped and not stripped.startswith("#") and depth == 0:
            indent = len(line) - len(stripped)
            while indent < indents[-1]:
                indents.pop()
            if indent > indents[-1]:
                indents.append(indent)
            dashes = re.match(r"^(?:-\s+)*", stripped).group(0).count("-")  # "- - - x" nests too
            if len(indents) + dashes > limit:
                raise UnsafeSourceError(f"{where}, line {number}: nested more than {limit} levels deep; "
                                        "refused")
        for char in line:
            if quote:
                quote = None if char == quote else quote
            elif char in "'\"" and depth:
                quote = char
            elif char == "#" and depth == 0:
                break
            elif char in "[{":
                depth += 1
                if depth > limit:
                    raise UnsafeSourceError(f"{where}, line {number}: brackets nested more than {limit} "
                                            "deep; refused")
            elif char in "]}" and depth:
                depth -= 1


def reference_places(text: str) -> dict:
    """``!ref``/``!copy`` text -> ``(dotted key, line)`` of the node holding it (for messages)."""
    try:
        root = ruamel.yaml.YAML().compose(text)
    except (ruamel.yaml.YAMLError, RecursionError):
        return {}
    places: dict = {}
    stack = [(root, "")]
    while stack:
        node, key = stack.pop()
        if isinstance(node, ruamel.yaml.MappingNode):
            stack.extend((value, f"{key}.{k.value}" if key else str(k.value)) for k, value in node.value)
        elif isinstance(node, ruamel.yaml.SequenceNode):
            stack.extend((value, f"{key}[{i}]") for i, value in enumerate(node.value))
        elif node is not None and _tag(node) in ("!ref", "!copy"):
            places.setdefault(str(node.value), (key, node.start_mark.line + 1))
    return places


class UntrustedYamlGuard:
    """What :func:`speechkit.experiment.hparams.load_hparams` needs to load a YAML from a non-local source.

    ``check(text)`` vets the final text (after overrides) and ``loader`` is the loader class for
    hyperpyyaml's construction pass, refusing every tag off the allowlist.

    Args:
        where: the file's description for messages (``hyperparams.yaml from https://...``).
        allow: extra exact names the caller trusts.
        overrides: the caller's overrides; the names their tags build are trusted too.
    """

    def __init__(self, where: str, allow: Iterable[str] = (), overrides=None,
                 limits: SourceLimits = DEFAULT_LIMITS):
        self.where = where
        self.limits = limits
        self.allowlist = default_allowlist().extended(list(allow) + _override_targets(overrides))
        self.loader = _guarded_loader(self.allowlist, where)
        self._references: dict = {}

    def check(self, text: str) -> None:
        # The whole vetting again, on the very text hyperpyyaml gets: the file may have been replaced since
        # it was first read (another process refreshing the cache), and overrides change it.
        from speechkit.pretrained.sources.names import check_pretrainer_names

        where = f"{self.where} (after overrides)"
        if len(text.encode("utf-8")) > self.limits.max_yaml_bytes + (1 << 16):  # room for the overrides
            raise UnsafeSourceError(f"{where}: more than the limit of {self.limits.max_yaml_bytes} bytes")
        check_nesting(text, where, self.limits.max_nesting)
        check_yaml_is_safe(text, where, allowlist=self.allowlist)
        check_pretrainer_names(text, where)
        self._references = reference_places(text)

    def building(self):
        """The context hyperpyyaml builds in: ``!ref`` resolution bounded by the limits."""
        from speechkit.pretrained.safety.reference_bounds import bounded_references

        return bounded_references(self.limits, self.where, self._references)


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
