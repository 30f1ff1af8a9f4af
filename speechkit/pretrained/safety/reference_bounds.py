"""Bounds on the work hyperpyyaml's ``!ref`` resolution may do for a YAML from a non-local source.

hyperpyyaml resolves ``!ref <n> ** <n> ** <n>`` and ``!ref <s> * 10**10`` with Python's unbounded integers
and strings, and interpolates references textually, so a few lines can compute or allocate for ever (or grow
a string exponentially through chains of references). Its resolution goes through two functions of
``hyperpyyaml.core``: ``deref`` (every look-up) and ``parse_arithmetic`` (every expression). Inside
:func:`bounded_references` both are bounded by a :class:`~speechkit.pretrained.sources.limits.SourceLimits`:

- each look-up counts against ``max_reference_steps``, and the time spent against ``max_reference_seconds``;
- a looked-up or interpolated string longer than ``max_text_chars`` is refused;
- arithmetic is evaluated as hyperpyyaml does (same operators, same fall-back to the text), except that an
  integer operand or result over ``max_value_bits``, a string result over ``max_text_chars`` and
  ``'...' % x`` string formatting are refused before they are computed.

A refusal is an :class:`~speechkit.errors.UnsafeSourceError` naming the file, the key and the line of the
``!ref`` being resolved. Outside the context (trusted files) hyperpyyaml runs unchanged: the replacements
call the originals when no bound is active (a context variable, so threads do not see each other's bounds).

Example:
    >>> from speechkit.pretrained.sources.limits import SourceLimits
    >>> import hyperpyyaml
    >>> places = {"<n> ** <n> ** <n>": ("big", 2)}
    >>> with bounded_references(SourceLimits(), "hyperparams.yaml", places):
    ...     hyperpyyaml.load_hyperpyyaml("n: 10\\nbig: !ref <n> ** <n> ** <n>\\n")
    Traceback (most recent call last):
    ...
    speechkit.errors.UnsafeSourceError: hyperparams.yaml, line 2: key 'big': !ref '<n> ** <n> ** <n>' is ...
"""
from __future__ import annotations

import ast
import contextlib
import contextvars
import operator
import threading
import time
from typing import Optional

from speechkit.errors import UnsafeSourceError
from speechkit.pretrained.sources.limits import SourceLimits

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("speechkit_reference_budget", default=None)
_INSTALL_LOCK = threading.Lock()
# hyperpyyaml's operators, and the unary ones it lacks (which make it return the text unchanged).
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow, ast.Mod: operator.mod}


class _Budget:
    """What one resolution may still spend; raises naming the ``!ref`` being resolved."""

    def __init__(self, limits: SourceLimits, where: str, references: dict):
        self.limits, self.where, self.references = limits, where, references
        self.steps, self.start, self.current, self.chars = 0, time.monotonic(), None, 0

    def refuse(self, reason: str):
        key, line = self.references.get(self.current, (None, None))
        place = f"{self.where}, line {line}: key '{key}'" if key else self.where
        shown = repr(self.current if len(str(self.current)) <= 80 else str(self.current)[:77] + "...")
        raise UnsafeSourceError(f"{place}: !ref {shown} is refused: {reason}; a YAML from a non-local "
                                "source is resolved within limits (pass limits=SourceLimits(...) to raise "
                                "them, see docs/pretrained.md)")

    def charge(self, value) -> None:
        self.steps += 1
        if self.steps > self.limits.max_reference_steps:
            self.refuse(f"resolving the references took more than {self.limits.max_reference_steps} look-ups")
        if time.monotonic() - self.start > self.limits.max_reference_seconds:
            self.refuse(f"resolving the references took more than {self.limits.max_reference_seconds} s")
        self.check_value(value)
        if isinstance(value, str):  # the pieces one reference interpolates (re.sub joins them at once)
            self.chars += len(value)
            if self.chars > 8 * self.limits.max_text_chars:
                self.refuse(f"it looks up more than {8 * self.limits.max_text_chars} characters of text")

    def start_reference(self, reference) -> None:
        self.current, self.chars = reference, 0

    def check_value(self, value) -> None:
        if isinstance(value, str) and len(value) > self.limits.max_text_chars:
            self.refuse(f"it builds a string of {len(value)} characters (limit {self.limits.max_text_chars})")
        if _is_int(value) and value.bit_length() > self.limits.max_value_bits:
            self.refuse(f"it computes an integer of {value.bit_length()} bits (limit "
                        f"{self.limits.max_value_bits})")

    # --------------------------------------------------------------------------------------- arithmetic
    def parse_arithmetic(self, text):
        """hyperpyyaml's ``parse_arithmetic`` with every operand and result bounded."""
        self.charge(text)
        try:
            tree = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError, TypeError):
            return text
        except (RecursionError, MemoryError):
            self.refuse("the expression is nested too deeply")
        try:
            return self.evaluate(tree)
        except (TypeError, SyntaxError, KeyError):
            return text  # as hyperpyyaml: not arithmetic after all, keep the text
        except RecursionError:
            self.refuse("the expression is nested too deeply")
        except (ArithmeticError, ValueError) as error:
            self.refuse(f"{type(error).__name__}: {error}")

    def evaluate(self, node):
        if isinstance(node, ast.Constant):
            self.check_value(node.value)
            return node.value
        if isinstance(node, ast.BinOp):
            left, right = self.evaluate(node.left), self.evaluate(node.right)
            self.check_operation(type(node.op), left, right)
            result = _OPERATORS[type(node.op)](left, right)
            self.check_value(result)
            return result
        if isinstance(node, ast.UnaryOp):
            return _OPERATORS[type(node.op)](self.evaluate(node.operand))  # KeyError: as hyperpyyaml
        raise TypeError(node)

    def check_operation(self, op: type, left, right) -> None:
        """Refuse an operation whose result would pass the limits, before computing it."""
        if op not in _OPERATORS:
            return
        bits, chars = self.limits.max_value_bits, self.limits.max_text_chars
        if op is ast.Mod and isinstance(left, (str, bytes)):
            self.refuse("string formatting ('...' % x) is not arithmetic")
        if op is ast.Pow and _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
            if left.bit_length() * right > bits:
                self.refuse(f"{_short(left)} ** {_short(right)} has more than {bits} bits")
        if op is ast.Mult:
            if _is_int(left) and _is_int(right) and left.bit_length() + right.bit_length() > bits + 1:
                self.refuse(f"{_short(left)} * {_short(right)} has more than {bits} bits")
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, (str, bytes, tuple, list)) and _is_int(count) and len(seq) * count > chars:
                    self.refuse(f"repeating {len(seq)} characters {_short(count)} times passes "
                                f"{chars} characters")
        if op is ast.Add and isinstance(left, (str, bytes)) and isinstance(right, (str, bytes)):
            if len(left) + len(right) > chars:
                self.refuse(f"the sum has more than {chars} characters")


def _is_int(value) -> bool:
    return isinstance(value, int)  # bools too: True * 'x' repeats as 1 does


def _short(value) -> str:
    text = str(value) if not _is_int(value) or value.bit_length() < 64 else f"<{value.bit_length()}-bit int>"
    return text[:40]


@contextlib.contextmanager
def bounded_references(limits: SourceLimits, where: str, references: Optional[dict] = None):
    """Bound hyperpyyaml's reference resolution inside the ``with`` block.

    Args:
        limits: the bounds.
        where: the file's description, for messages.
        references: ``!ref`` text -> ``(dotted key, line)``, to name the key of a refused reference.
    """
    _install()
    token = _ACTIVE.set(_Budget(limits, where, references or {}))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def _install() -> None:
    """Route hyperpyyaml's ``deref``, ``parse_arithmetic`` and ``recursive_resolve`` through the budget
    (once per process; without an active budget they behave exactly as before)."""
    import hyperpyyaml.core as core

    with _INSTALL_LOCK:
        if getattr(core, "_speechkit_bounded", False):
            return
        deref, parse_arithmetic, recursive_resolve = core.deref, core.parse_arithmetic, core.recursive_resolve

        def bounded_deref(ref, full_tree, copy_mode=False):
            value = deref(ref, full_tree, copy_mode)
            budget = _ACTIVE.get()
            if budget is not None:
                budget.charge(value)
            return value

        def bounded_parse_arithmetic(reference_string):
            budget = _ACTIVE.get()
            if budget is None:
                return parse_arithmetic(reference_string)
            return budget.parse_arithmetic(reference_string)

        def tracked_recursive_resolve(reference, reference_list, full_tree, copy_mode=False):
            budget = _ACTIVE.get()
            if budget is not None and not reference_list:  # a !ref of the file, not a step inside one
                budget.start_reference(reference)
            value = recursive_resolve(reference, reference_list, full_tree, copy_mode)
            if budget is not None:
                budget.check_value(value)
            return value

        core.deref, core.parse_arithmetic = bounded_deref, bounded_parse_arithmetic
        core.recursive_resolve = tracked_recursive_resolve
        core._speechkit_bounded = True
