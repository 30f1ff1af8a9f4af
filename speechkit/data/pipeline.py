"""Dynamic items: functions that turn the static fields of a manifest row into what a model needs.

A dynamic item declares the keys it *takes* (static fields or other dynamic items) and the keys it *provides*.
A :class:`DataPipeline` resolves the dependencies once, and for each data point computes only the items the
requested output keys need, each at most once.

A function that provides several keys may be a generator: it yields one value per provided key, in order,
and is advanced only as far as the requested keys require (so a cheap first key never pays for an expensive
second one).

Example:
    >>> @takes("words")
    ... @provides("words_upper", "n_chars")
    ... def upper(words):
    ...     yield words.upper()
    ...     yield len(words)
    >>> pipeline = DataPipeline(static_keys=["id", "words"], dynamic_items=[upper], output_keys=["n_chars"])
    >>> pipeline.compute({"id": "a", "words": "hi there"})
    {'n_chars': 8}
"""
from __future__ import annotations

import inspect
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, NamedTuple, Optional, Union

from speechkit.errors import DataError

OutputKeys = Union[Sequence[str], Mapping[str, str]]


class DynamicItem:
    """A function with declared input keys (``takes``) and output keys (``provides``).

    Calling the item calls the function; a generator function provides its keys one ``yield`` at a time.
    """

    def __init__(self, func: Callable, takes: Sequence[str] = (), provides: Sequence[str] = ()):
        self.func = func
        self.takes = _as_key_tuple(takes, "takes")
        self.provides = _as_key_tuple(provides, "provides")
        self.is_generator = inspect.isgeneratorfunction(func)
        self.__doc__ = getattr(func, "__doc__", None)
        self.__name__ = getattr(func, "__name__", type(func).__name__)

    def __call__(self, *args: Any) -> Any:
        return self.func(*args)

    def __repr__(self) -> str:
        return f"DynamicItem({self.__name__}, takes={list(self.takes)}, provides={list(self.provides)})"


def _as_key_tuple(keys: Union[str, Iterable[str], None], what: str) -> tuple:
    if keys is None:
        return ()
    if isinstance(keys, str):
        keys = (keys,)
    keys = tuple(keys)
    for key in keys:
        if not isinstance(key, str) or not key:
            raise DataError(f"{what} keys must be non-empty strings, got {key!r}")
    if len(set(keys)) != len(keys):
        raise DataError(f"{what} lists a key twice: {list(keys)}")
    return keys


def takes(*keys: str) -> Callable[[Any], DynamicItem]:
    """Decorator: the keys the function takes, in the order of its arguments.

    Works above or below :func:`provides`. Example::

        @takes("wav")
        @provides("sig")
        def audio_pipeline(wav):
            return speechkit.data.audio.read(wav)
    """

    def decorate(obj: Any) -> DynamicItem:
        if isinstance(obj, DynamicItem):
            if obj.takes:
                raise DataError(f"{obj.__name__}: takes() applied twice")
            obj.takes = _as_key_tuple(keys, "takes")
            return obj
        return DynamicItem(obj, takes=keys)

    return decorate


def provides(*keys: str) -> Callable[[Any], DynamicItem]:
    """Decorator: the keys the function provides (one return value, or one ``yield`` per key)."""

    def decorate(obj: Any) -> DynamicItem:
        if isinstance(obj, DynamicItem):
            if obj.provides:
                raise DataError(f"{obj.__name__}: provides() applied twice")
            obj.provides = _as_key_tuple(keys, "provides")
            return obj
        return DynamicItem(obj, provides=keys)

    return decorate


def as_dynamic_item(func: Any, takes: Optional[Sequence[str]] = None,
                    provides: Optional[Sequence[str]] = None) -> DynamicItem:
    """Build a :class:`DynamicItem` from a function or a decorated item, checking both key lists are set.

    Explicit ``takes``/``provides`` override those given by the decorators.
    """
    if isinstance(func, DynamicItem):
        item = DynamicItem(func.func, func.takes if takes is None else takes,
                           func.provides if provides is None else provides)
    elif callable(func):
        item = DynamicItem(func, takes or (), provides or ())
    else:
        raise DataError(f"a dynamic item must be callable, got {type(func).__name__}")
    if not item.provides:
        raise DataError(f"dynamic item {item.__name__} provides no key; use @provides(...) or provides=")
    return item


def normalize_output_keys(keys: OutputKeys) -> dict:
    """Output keys as ``{output name: pipeline key}`` (a list maps each key to itself)."""
    if isinstance(keys, str):
        keys = [keys]
    if isinstance(keys, Mapping):
        return {str(name): str(key) for name, key in keys.items()}
    return {str(key): str(key) for key in keys}


class Plan(NamedTuple):
    """What computing a set of output keys takes: resolved once, reused for every data point."""

    wanted: dict  # output name -> pipeline key
    order: list  # dynamic items to run, dependencies first
    needed: frozenset  # every key some output or item needs


class DataPipeline:
    """Resolves and computes dynamic items for one data point at a time.

    Arguments:
        static_keys: the keys present in every data point (manifest fields and ``id``).
        dynamic_items: :class:`DynamicItem` objects (or decorated functions).
        output_keys: the keys :meth:`compute` returns (a list, or a dict renaming them).
    """

    def __init__(self, static_keys: Iterable[str] = (), dynamic_items: Iterable[Any] = (),
                 output_keys: OutputKeys = ()):
        self.static_keys = set(static_keys)
        self._producer: dict = {}  # key -> (item, index of the key in item.provides)
        self.dynamic_items: list = []
        for item in dynamic_items:
            self.add_dynamic_item(item)
        self.output_keys: dict = {}
        self.set_output_keys(output_keys)

    @property
    def dynamic_keys(self) -> list:
        return list(self._producer)

    @property
    def all_keys(self) -> list:
        return sorted(self.static_keys) + [k for k in self._producer if k not in self.static_keys]

    def add_dynamic_item(self, func: Any, takes: Optional[Sequence[str]] = None,
                         provides: Optional[Sequence[str]] = None) -> DynamicItem:
        item = as_dynamic_item(func, takes, provides)
        for key in item.provides:
            if key in self.static_keys:
                raise DataError(f"dynamic item {item.__name__} provides {key!r}, which is already a static "
                                "field of the data")
            if key in self._producer:
                raise DataError(f"dynamic item {item.__name__} provides {key!r}, already provided by "
                                f"{self._producer[key][0].__name__}")
        for index, key in enumerate(item.provides):
            self._producer[key] = (item, index)
        self.dynamic_items.append(item)
        return item

    def set_output_keys(self, keys: OutputKeys) -> None:
        """Choose the keys :meth:`compute` returns; unknown keys raise :class:`DataError` right away."""
        output_keys = normalize_output_keys(keys)
        self._plan = self.plan(output_keys)
        self.output_keys = output_keys

    def plan(self, keys: OutputKeys) -> Plan:
        """Resolve the dynamic items ``keys`` need (for :meth:`compute` over many data points)."""
        wanted = normalize_output_keys(keys)
        for key in wanted.values():
            self._check_known(key, needed_by="output keys")
        order = self._resolve(wanted.values())
        needed = set(wanted.values())
        for item in order:
            needed.update(item.takes)
        return Plan(wanted, order, frozenset(needed))

    def _check_known(self, key: str, needed_by: str) -> None:
        if key not in self.static_keys and key not in self._producer:
            known = ", ".join(self.all_keys) or "none"
            raise DataError(f"{needed_by} asks for key {key!r}, which is neither a data field nor provided "
                            f"by a dynamic item (known keys: {known})")

    def _resolve(self, keys: Iterable[str]) -> list:
        """The dynamic items needed for ``keys``, dependencies first (depth-first, cycle-checked)."""
        order: list = []
        done: set = set()
        visiting: list = []

        def visit(item: DynamicItem) -> None:
            if id(item) in done:
                return
            if any(item is other for other in visiting):
                cycle = " -> ".join(i.__name__ for i in visiting + [item])
                raise DataError(f"dynamic items depend on each other in a cycle: {cycle}")
            visiting.append(item)
            for key in item.takes:
                self._check_known(key, needed_by=f"dynamic item {item.__name__}")
                if key not in self.static_keys:
                    visit(self._producer[key][0])
            visiting.pop()
            done.add(id(item))
            order.append(item)

        for key in keys:
            if key not in self.static_keys:
                visit(self._producer[key][0])
        return order

    def compute(self, data_point: Mapping[str, Any], output_keys: Union[OutputKeys, Plan, None] = None,
                ) -> dict:
        """The output keys' values for one data point; every needed dynamic item runs at most once.

        ``output_keys`` defaults to those set with :meth:`set_output_keys`; a :class:`Plan` from :meth:`plan`
        avoids resolving the same keys again for every data point. A generator item is advanced only until
        the last of its keys that is needed.
        """
        if output_keys is None:
            plan = self._plan
        elif isinstance(output_keys, Plan):
            plan = output_keys
        else:
            plan = self.plan(output_keys)
        values: dict = {}
        for item in plan.order:
            self._run(item, data_point, values, plan.needed)
        return {name: (_field(data_point, key) if key in self.static_keys else values[key])
                for name, key in plan.wanted.items()}

    def _run(self, item: DynamicItem, data_point: Mapping[str, Any], values: dict, needed: frozenset) -> None:
        args = [_field(data_point, key) if key in self.static_keys else values[key] for key in item.takes]
        if item.is_generator:
            self._advance(item, item(*args), values, needed)
            return
        result = item(*args)
        if isinstance(result, types.GeneratorType) and len(item.provides) > 1:
            # e.g. a callable object whose __call__ yields: not detectable before the call
            self._advance(item, result, values, needed)
            return
        if len(item.provides) == 1:
            values[item.provides[0]] = result
            return
        if not isinstance(result, (tuple, list)) or len(result) != len(item.provides):
            raise DataError(f"dynamic item {item.__name__} provides {len(item.provides)} keys "
                            f"{list(item.provides)} but returned {type(result).__name__}; return a tuple "
                            "of that length or yield each value")
        values.update(zip(item.provides, result))

    @staticmethod
    def _advance(item: DynamicItem, generator: Any, values: dict, needed: frozenset) -> None:
        last_needed = max(i for i, key in enumerate(item.provides) if key in needed)
        index = 0
        try:
            for index in range(last_needed + 1):
                values[item.provides[index]] = next(generator)
        except StopIteration:
            raise DataError(f"generator item {item.__name__} stopped after {index} values but provides "
                            f"{list(item.provides)}") from None
        finally:
            generator.close()


def _field(data_point: Mapping[str, Any], key: str) -> Any:
    try:
        return data_point[key]
    except KeyError:
        raise DataError(f"data point {data_point.get('id')!r} has no field {key!r} (fields: "
                        f"{sorted(data_point)})") from None
