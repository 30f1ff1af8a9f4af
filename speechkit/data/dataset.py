"""DynamicItemDataset: a manifest's rows plus dynamic items computed on access.

Every data point is a manifest row ``{field: value}`` with its id under ``"id"``. Dynamic items (see
:mod:`speechkit.data.pipeline`) add keys computed from those fields; ``__getitem__`` returns only the output
keys, and computes only the dynamic items those keys need.

Example:
    >>> from speechkit.data.pipeline import provides, takes
    >>> data = {"utt1": {"wav": "a.flac", "duration": 1.5, "words": "HELLO"},
    ...         "utt2": {"wav": "b.flac", "duration": 0.7, "words": "HI"}}
    >>> dataset = DynamicItemDataset(data)
    >>> @takes("words")
    ... @provides("n_chars")
    ... def count(words):
    ...     return len(words)
    >>> dataset.add_dynamic_item(count)
    >>> dataset.set_output_keys(["id", "n_chars"])
    >>> dataset[1]
    {'id': 'utt2', 'n_chars': 2}
    >>> dataset.lengths("duration")
    [1.5, 0.7]
"""
from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Callable, Optional, Union

import torch.utils.data

from speechkit.data.pipeline import DataPipeline, OutputKeys, Plan
from speechkit.errors import AudioError, DataError


class DynamicItemDataset(torch.utils.data.Dataset):
    """A map-style dataset over manifest rows with lazily computed dynamic items.

    Arguments:
        data: ``{data id: {field: value}}``; the rows are used as given (not copied).
        dynamic_items: functions decorated with ``@takes``/``@provides`` (or :class:`DynamicItem` objects).
        output_keys: the keys ``__getitem__`` returns; a dict renames them ``{output name: key}``. Empty means
            ``id`` plus every static field.
    """

    source: Optional[str] = None  # the manifest it was loaded from, if any (names the set in errors)

    def __init__(self, data: Mapping[str, Mapping[str, Any]], dynamic_items: Iterable[Any] = (),
                 output_keys: OutputKeys = ()):
        if not isinstance(data, Mapping):
            raise DataError("DynamicItemDataset needs a dict {id: {field: value}}, got "
                            f"{type(data).__name__}")
        self.data = data
        self.data_ids = list(data.keys())
        static_keys = {"id"}
        for data_id in self.data_ids:
            row = data[data_id]
            if not isinstance(row, Mapping):
                raise DataError(f"data point {data_id!r} must be a dict of fields, got {type(row).__name__}")
            static_keys.update(row.keys())
        self.pipeline = DataPipeline(static_keys=static_keys, dynamic_items=dynamic_items)
        self.set_output_keys(output_keys)

    # -- constructors -------------------------------------------------------------------------------------

    @classmethod
    def from_json(cls, path: str, replacements: Optional[Mapping[str, str]] = None,
                  dynamic_items: Iterable[Any] = (), output_keys: OutputKeys = (), **manifest_options: Any,
                  ) -> DynamicItemDataset:
        """Load a JSON manifest ``{id: {wav, duration, ...}}``; ``$name`` placeholders take ``replacements``.

        ``manifest_options`` go to :func:`speechkit.data.manifest.load_manifest` (``check_files``,
        ``fields``, ``types``, ...).
        """
        from speechkit.data.manifest import load_json_manifest

        data = load_json_manifest(path, replacements=replacements, **manifest_options)
        return cls(data, dynamic_items, output_keys)._loaded_from(path)

    @classmethod
    def from_csv(cls, path: str, replacements: Optional[Mapping[str, str]] = None,
                 dynamic_items: Iterable[Any] = (), output_keys: OutputKeys = (), **manifest_options: Any,
                 ) -> DynamicItemDataset:
        """Load a CSV manifest with an ``id`` (or ``ID``) column; ``duration`` is read as a float."""
        from speechkit.data.manifest import load_csv_manifest

        data = load_csv_manifest(path, replacements=replacements, **manifest_options)
        return cls(data, dynamic_items, output_keys)._loaded_from(path)

    @classmethod
    def from_manifest(cls, path: str, replacements: Optional[Mapping[str, str]] = None,
                      dynamic_items: Iterable[Any] = (), output_keys: OutputKeys = (),
                      **manifest_options: Any) -> DynamicItemDataset:
        """Load a ``.json``, ``.jsonl``, ``.csv`` or ``.tsv`` manifest, choosing the format by extension."""
        from speechkit.data.manifest import load_manifest

        data = load_manifest(path, replacements=replacements, **manifest_options)
        return cls(data, dynamic_items, output_keys)._loaded_from(path)

    def _loaded_from(self, path) -> DynamicItemDataset:
        self.source = str(path)  # names the set in errors (e.g. a training set that yields no batch)
        return self

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], dynamic_items: Iterable[Any] = (),
                     output_keys: OutputKeys = ()) -> DynamicItemDataset:
        """Build from a list of dicts, each with an ``"id"`` key (kept out of the stored fields)."""
        data: dict = {}
        for position, record in enumerate(records):
            if not isinstance(record, Mapping) or "id" not in record:
                raise DataError(f"record {position} needs an 'id' key, got {record!r:.80}")
            data_id = str(record["id"])
            if data_id in data:
                raise DataError(f"record {position}: duplicate id {data_id!r}")
            data[data_id] = {key: value for key, value in record.items() if key != "id"}
        return cls(data, dynamic_items, output_keys)

    # -- pipeline -----------------------------------------------------------------------------------------

    def add_dynamic_item(self, func: Callable, takes: Optional[Sequence[str]] = None,
                         provides: Optional[Sequence[str]] = None) -> None:
        """Add a dynamic item; ``takes``/``provides`` may come from the decorators instead."""
        self.pipeline.add_dynamic_item(func, takes, provides)

    def set_output_keys(self, keys: OutputKeys) -> None:
        """Choose what ``__getitem__`` returns (a list of keys, or ``{output name: key}``)."""
        if not keys:
            keys = ["id"] + sorted(self.pipeline.static_keys - {"id"})
        self.pipeline.set_output_keys(keys)

    @property
    def output_keys(self) -> list:
        return list(self.pipeline.output_keys)

    @contextlib.contextmanager
    def output_keys_as(self, keys: OutputKeys) -> Iterator[DynamicItemDataset]:
        """Temporarily return other keys (e.g. only a length, for a sampler)."""
        saved = dict(self.pipeline.output_keys)
        self.pipeline.set_output_keys(keys)
        try:
            yield self
        finally:
            self.pipeline.set_output_keys(saved)

    # -- access -------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.data_ids)

    def __getitem__(self, index: int) -> dict:
        data_id = self.data_ids[index]
        return self.compute(data_id)

    def compute(self, data_id: str, output_keys: Union[OutputKeys, Plan, None] = None) -> dict:
        """The output keys of the data point ``data_id`` (errors from dynamic items name the id)."""
        data_point = {**self.data[data_id], "id": data_id}
        try:
            return self.pipeline.compute(data_point, output_keys)
        except AudioError as error:
            if f"id {data_id!r}" in str(error):
                raise
            raise AudioError(f"manifest id {data_id!r}: {error}") from error

    def lengths(self, key: str = "duration") -> list:
        """The static field ``key`` of every data point, in dataset order (what samplers sort and bucket by).

        Raises:
            DataError: naming the first data point whose ``key`` is missing or not a finite number.
        """
        values = []
        for data_id in self.data_ids:
            row = self.data[data_id]
            if key not in row:
                raise DataError(f"data point {data_id!r} has no field {key!r} to measure its length (fields: "
                                f"{sorted(row)})")
            value = row[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise DataError(f"data point {data_id!r}: field {key!r} must be a finite number, "
                                f"got {value!r}")
            values.append(float(value))
        return values

    # -- subsets ------------------------------------------------------------------------------------------

    def filtered_sorted(self, key_min_value: Optional[Mapping[str, Any]] = None,
                        key_max_value: Optional[Mapping[str, Any]] = None,
                        key_test: Optional[Mapping[str, Callable[[Any], bool]]] = None,
                        sort_key: Optional[str] = None, reverse: bool = False,
                        select_n: Optional[int] = None) -> DynamicItemDataset:
        """A new dataset over a filtered and sorted subset of the ids (sharing the rows and pipeline items).

        Keeps data points whose ``key >= key_min_value[key]``, ``key <= key_max_value[key]`` and
        ``key_test[key](value)`` is true; then sorts by ``sort_key`` (``reverse`` for descending, stable for
        ties); then keeps the first ``select_n``. Keys may be dynamic (they are computed for this).

        Example::

            short_first = dataset.filtered_sorted(key_max_value={"duration": 10.0}, sort_key="duration")
        """
        key_min_value = dict(key_min_value or {})
        key_max_value = dict(key_max_value or {})
        key_test = dict(key_test or {})
        needed = set(key_min_value) | set(key_max_value) | set(key_test)
        if sort_key is not None:
            needed.add(sort_key)
        if select_n is not None and select_n < 0:
            raise DataError(f"select_n must be >= 0, got {select_n}")

        kept: list = []
        sort_values: list = []
        static_only = needed <= self.pipeline.static_keys
        plan = None if static_only else self.pipeline.plan(sorted(needed))
        for data_id in self.data_ids:
            if static_only:  # no pipeline needed: read the fields (fast on large manifests)
                row = self.data[data_id]
                values = {key: data_id if key == "id" else self._field(data_id, row, key) for key in needed}
            else:
                values = self.compute(data_id, plan)
            if not _passes(values, key_min_value, key_max_value, key_test):
                continue
            kept.append(data_id)
            if sort_key is not None:
                sort_values.append(values[sort_key])
        if sort_key is not None:
            order = sorted(range(len(kept)), key=lambda i: sort_values[i], reverse=reverse)
            kept = [kept[i] for i in order]
        if select_n is not None:
            kept = kept[:select_n]
        return self._subset(kept)

    @staticmethod
    def _field(data_id: str, row: Mapping[str, Any], key: str) -> Any:
        if key not in row:
            raise DataError(f"data point {data_id!r} has no field {key!r} (fields: {sorted(row)})")
        return row[key]

    def _subset(self, data_ids: Sequence[str]) -> DynamicItemDataset:
        subset = copy.copy(self)
        subset.data_ids = list(data_ids)
        subset.pipeline = copy.copy(self.pipeline)
        subset.pipeline._producer = dict(self.pipeline._producer)
        subset.pipeline.dynamic_items = list(self.pipeline.dynamic_items)
        subset.pipeline.output_keys = dict(self.pipeline.output_keys)
        return subset

    def __repr__(self) -> str:
        return f"DynamicItemDataset({len(self)} items, output_keys={self.output_keys})"


def _passes(values: Mapping[str, Any], key_min_value: Mapping, key_max_value: Mapping,
            key_test: Mapping) -> bool:
    for key, limit in key_min_value.items():
        if values[key] < limit:
            return False
    for key, limit in key_max_value.items():
        if values[key] > limit:
            return False
    return all(test(values[key]) for key, test in key_test.items())


DatasetOrDatasets = Union[DynamicItemDataset, Sequence[DynamicItemDataset]]


def add_dynamic_item(datasets: DatasetOrDatasets, func: Callable, takes: Optional[Sequence[str]] = None,
                     provides: Optional[Sequence[str]] = None) -> None:
    """Add the same dynamic item to several datasets (train, valid, test)."""
    for dataset in _as_list(datasets):
        dataset.add_dynamic_item(func, takes, provides)


def set_output_keys(datasets: DatasetOrDatasets, keys: OutputKeys) -> None:
    """Set the same output keys on several datasets."""
    for dataset in _as_list(datasets):
        dataset.set_output_keys(keys)


def _as_list(datasets: DatasetOrDatasets) -> list:
    return [datasets] if isinstance(datasets, DynamicItemDataset) else list(datasets)
