"""Keep files from untrusted sources as data: vet a hyperparams YAML before hyperpyyaml builds anything.

hyperpyyaml turns tags into calls (``!new:`` builds an object, ``!name:`` and ``!module:`` resolve a name,
``!apply:`` / ``!applyref:`` call a function, ``!include:`` reads another file). A YAML from a Hub repo or a
URL therefore could run anything. :func:`check_yaml_is_safe` parses the YAML without constructing it and
rejects:

- any tag outside hyperpyyaml's vocabulary and plain YAML types (e.g. ``!!python/object/apply:os.system``);
- ``!include:`` (the included file cannot be vetted before hyperpyyaml reads it);
- a callable tag whose target is not under an allowlisted package (``speechkit``, ``torch``), is private
  (``_name``), lies under a denied module that loads code or writes files (``torch.hub``, ``torch.load``,
  ``speechkit.cli``, ...), or resolves to an object defined outside the allowlist
  (``torch.utils.data.dataloader.os.system``).

Example:
    >>> check_yaml_is_safe("enc: !new:torch.nn.Linear [4, 2]\\n", "hyperparams.yaml")
    >>> check_yaml_is_safe("x: !apply:os.system [ls]\\n", "hyperparams.yaml")
    Traceback (most recent call last):
    ...
    speechkit.errors.UnsafeSourceError: hyperparams.yaml, line 1: tag '!apply:os.system' ...
"""
from __future__ import annotations

import importlib
import types

import yaml

from speechkit.errors import UnsafeSourceError

ALLOWED_PACKAGES = ("speechkit", "torch")

#: Names under the allowed packages that load code, spawn processes or write files; never built from a
#: remote YAML. Matched as dotted-name prefixes against the tag's target and the object's defining module.
DENIED_PREFIXES = (
    "torch.hub", "torch.load", "torch.save", "torch.serialization", "torch.jit", "torch.package",
    "torch.utils.cpp_extension", "torch.ops", "torch.classes", "torch.library", "torch.export",
    "torch.distributed", "torch.multiprocessing", "torch.onnx", "torch.utils.tensorboard", "torch.compile",
    "torch.profiler", "torch.utils.data.datapipes",
    "speechkit.cli", "speechkit.distributed", "speechkit.experiment", "speechkit.checkpoints",
    "speechkit.corpus", "speechkit.templating", "speechkit.brain", "speechkit.data.audio.write",
    "speechkit.pretrained",
)
#: Exceptions to the denied prefixes: what a model folder's YAML legitimately builds.
ALLOWED_EXCEPTIONS = (
    "speechkit.pretrained.Pretrainer", "speechkit.pretrained.pretrainer.Pretrainer",
    "speechkit.pretrained.FetchSource", "speechkit.pretrained.fetching.FetchSource",
)

#: Attribute names that read, write or run files whatever package they live in (``torch.from_file`` maps a
#: file for writing, ``write_json_manifest`` writes one).
DENIED_NAME_PREFIXES = ("write", "save", "dump", "from_file", "tofile", "load", "open", "exec", "system",
                        "spawn", "remove", "unlink", "rmtree")
#: Largest number of nodes a remote YAML may expand to (anchors and aliases can multiply a small file).
MAX_EXPANDED_NODES = 200_000

_CALLABLE_TAGS = ("!new:", "!name:", "!module:", "!apply:", "!applyref:")
_DATA_TAGS = {"!ref", "!copy", "!tuple", "!PLACEHOLDER"}
_YAML_TYPES = {f"tag:yaml.org,2002:{name}" for name in
               ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "merge")}


def check_yaml_is_safe(text: str, filename: str) -> None:
    """Raise :class:`UnsafeSourceError` naming tag, file and line of the first thing a remote YAML may not do.

    Args:
        text: the YAML text.
        filename: its name (or source description), for the message.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        raise UnsafeSourceError(f"{filename}: cannot be vetted, it does not parse as YAML "
                                f"({error})") from None
    size = _expanded_size(root, {})
    if size > MAX_EXPANDED_NODES:
        raise UnsafeSourceError(f"{filename}: expands to {size} YAML nodes through anchors and aliases (more "
                                f"than {MAX_EXPANDED_NODES}); refused")
    for node in sorted(_walk(root), key=lambda n: n.start_mark.index):  # report the first in the file
        _check_tag(node, filename)


def _expanded_size(node, memo: dict) -> int:
    """Nodes the document holds once every alias is copied out (memoized: linear in the file's size)."""
    if node is None:
        return 0
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = 1  # a recursive alias counts once instead of looping
    children = []
    if isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    elif isinstance(node, yaml.SequenceNode):
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
        if isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                stack.extend((key, value))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)


def _check_tag(node, filename: str) -> None:
    tag = node.tag
    if tag in _YAML_TYPES or tag in _DATA_TAGS:
        return
    where = f"{filename}, line {node.start_mark.line + 1}: tag '{tag}'"
    if tag.startswith("!include:"):
        raise UnsafeSourceError(f"{where} is refused: a YAML from a non-local source may not include other "
                                "files (pass trust_remote_code=True if you trust this source)")
    for prefix in _CALLABLE_TAGS:
        if tag.startswith(prefix):
            reason = target_rejection(tag[len(prefix):])
            if reason:
                raise UnsafeSourceError(f"{where} is refused: {reason}; a YAML from a non-local source may "
                                        f"only build objects from {', '.join(ALLOWED_PACKAGES)} (pass "
                                        "trust_remote_code=True if you trust this source)")
            return
    raise UnsafeSourceError(f"{where} is not a hyperpyyaml tag and is refused in a YAML from a non-local "
                            "source")


def _denied(dotted: str) -> bool:
    if dotted in ALLOWED_EXCEPTIONS:
        return False
    return any(dotted == p or dotted.startswith(p + ".") for p in DENIED_PREFIXES)


def _allowed_name(dotted: str) -> bool:
    return dotted.split(".")[0] in ALLOWED_PACKAGES


def target_rejection(dotted: str):
    """Why the dotted name may not be built from an untrusted YAML, or None when it may."""
    parts = dotted.split(".")
    if not _allowed_name(dotted):
        return f"'{dotted}' is outside the allowlist"
    if any(not part or part.startswith("_") for part in parts):
        return f"'{dotted}' names a private attribute"
    if _denied(dotted) or parts[-1].lower().startswith(DENIED_NAME_PREFIXES):
        return f"'{dotted}' can load code or write files"
    obj = _resolve(parts)
    if obj is None:
        return f"'{dotted}' cannot be found"
    if isinstance(obj, types.ModuleType):
        defined_in = obj.__name__
        full = defined_in
    else:
        defined_in = getattr(obj, "__module__", None) or parts[0]
        full = f"{defined_in}.{getattr(obj, '__qualname__', parts[-1])}"
    if not _allowed_name(defined_in):
        return f"'{dotted}' is defined in '{defined_in}', outside the allowlist"
    if _denied(full) and not _denied_exception_matches(dotted, full):
        return f"'{dotted}' ({full}) can load code or write files"
    return None


def _denied_exception_matches(dotted: str, full: str) -> bool:
    return dotted in ALLOWED_EXCEPTIONS or full in ALLOWED_EXCEPTIONS


def _resolve(parts: list):
    """Import the longest module prefix, then walk attributes, refusing any step into a foreign module."""
    obj = None
    index = len(parts)
    while index > 0:
        try:
            obj = importlib.import_module(".".join(parts[:index]))
            break
        except ImportError:
            index -= 1
    if obj is None:
        return None
    for part in parts[index:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj
