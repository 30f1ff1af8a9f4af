"""The keys every pretrained interface reads, checked with errors naming the key and its line in the YAML.

A model folder's ``hyperparams.yaml`` may give a key of the wrong kind (``sample_rate: abc``, a class with
``!name:`` where an object was meant): :func:`check_interface_keys` says so, naming file, key and line,
instead of a ``ValueError`` or ``TypeError`` from deep inside the interface.

Example:
    >>> check_interface_keys({"modules": {}, "sample_rate": "abc"}, "hyperparams.yaml", "sample_rate: abc\\n")
    Traceback (most recent call last):
    ...
    speechkit.errors.HparamsError: hyperparams.yaml, line 1: key 'sample_rate' must be a positive whole ...
"""
from __future__ import annotations

import inspect
from typing import Optional

import torch

from speechkit.errors import HparamsError


def check_interface_keys(hparams: dict, where: str, text: Optional[str] = None) -> None:
    """Raise :class:`HparamsError` naming the key (and, given the YAML ``text``, the line) when a key every
    interface reads has the wrong type: ``modules`` (a mapping of ``nn.Module``), ``sample_rate`` (a positive
    integer), ``encoder_pipeline`` (names of modules), ``tokenizer`` (an object, not a class or function),
    ``decoder`` (not a class)."""
    modules = hparams.get("modules")
    if not isinstance(modules, dict):
        raise HparamsError(f"{key_place(where, text, 'modules')}: key 'modules' must be a mapping of name -> "
                           f"torch.nn.Module, got {describe_value(modules)}")
    for name, module in modules.items():
        if not isinstance(module, torch.nn.Module):
            raise HparamsError(f"{key_place(where, text, 'modules', name)}: key 'modules.{name}' must be a "
                               f"torch.nn.Module, got {describe_value(module)}")
    rate = hparams.get("sample_rate")
    if "sample_rate" in hparams and (isinstance(rate, bool) or not isinstance(rate, (int, float))
                                     or not 0 < rate <= 1_000_000 or rate != int(rate)):
        raise HparamsError(f"{key_place(where, text, 'sample_rate')}: key 'sample_rate' must be a positive "
                           f"whole number of Hz, got {describe_value(rate)}")
    pipeline = hparams.get("encoder_pipeline")
    if "encoder_pipeline" in hparams and (not isinstance(pipeline, (list, tuple))
                                          or not all(isinstance(n, str) for n in pipeline)):
        raise HparamsError(f"{key_place(where, text, 'encoder_pipeline')}: key 'encoder_pipeline' must be a "
                           f"list of module names, got {describe_value(pipeline)}")
    tokenizer = hparams.get("tokenizer")
    if tokenizer is not None and (isinstance(tokenizer, type) or inspect.isroutine(tokenizer)):
        raise HparamsError(f"{key_place(where, text, 'tokenizer')}: key 'tokenizer' must be an object with "
                           f"decode_ids(ids), got {describe_value(tokenizer)}")
    decoder = hparams.get("decoder")
    if isinstance(decoder, type):  # `!name:` where `!new:` was meant: calling it would build, not decode
        raise HparamsError(f"{key_place(where, text, 'decoder')}: key 'decoder' must be a search object, got "
                           f"{describe_value(decoder)}")


def describe_value(value) -> str:
    """A short description of a value for messages (never its full text)."""
    if isinstance(value, type):
        return f"the class {value.__module__}.{value.__qualname__}"
    if inspect.isroutine(value):
        return f"the function {getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', value)}"
    if isinstance(value, (int, float, bool)) or value is None:
        return f"{type(value).__name__} {value!r}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    return f"a {type(value).__name__}"


def key_place(where: str, text: Optional[str], *keys: str) -> str:
    """``where, line N`` for the (nested) key in the YAML ``text`` when it can be found, else ``where``."""
    if not text:
        return where
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return where
    line = None
    for key in keys:
        pairs = node.value if isinstance(node, yaml.MappingNode) else []
        match = [(k, v) for k, v in pairs if isinstance(k, yaml.ScalarNode) and k.value == key]
        if not match:
            break
        line, node = match[0][0].start_mark.line + 1, match[0][1]
    return f"{where}, line {line}" if line else where
