"""PaddedBatch: the collate function that turns a list of data points into one batch.

An item is a dict of named fields (as :class:`~speechkit.data.dataset.DynamicItemDataset` gives), or a
tuple or list of fields (as ``torch.utils.data.TensorDataset`` gives), which the batch then holds by
position: ``batch[0]``, ``batch[1]``, or ``x, y = batch``. Every tensor field (or numpy array) is padded
along its first dimension (time) into
``PaddedData(data, lengths)``: ``data`` has shape ``(batch, max_time, *rest)`` and ``lengths`` is an int64
tensor of shape ``(batch,)`` holding each item's absolute number of valid steps. Zero-dimensional tensors are
stacked into a ``(batch,)`` tensor. Any other field (ids, strings, numbers) stays a list.

Example:
    >>> import torch
    >>> batch = PaddedBatch([{"id": "a", "sig": torch.ones(3)}, {"id": "b", "sig": torch.ones(5)}])
    >>> batch.sig.data.shape, batch.sig.lengths.tolist(), batch.id, len(batch)
    (torch.Size([2, 5]), [3, 5], ['a', 'b'], 2)
    >>> wavs, wav_lens = batch.sig  # PaddedData unpacks like a tuple
    >>> features, labels = PaddedBatch([(torch.ones(4), torch.tensor(1)), (torch.ones(4), torch.tensor(0))])
    >>> features.data.shape, labels.tolist()
    (torch.Size([2, 4]), [1, 0])
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Optional

import numpy as np
import torch

from speechkit.errors import DataError


class PaddedData(NamedTuple):
    """A padded field: ``data`` (batch, max_time, ...) and ``lengths`` (batch,) int64 absolute lengths."""

    data: torch.Tensor
    lengths: torch.Tensor

    def to(self, *args: Any, **kwargs: Any) -> PaddedData:
        """``data.to(...)``; ``lengths`` follow to the same device but stay int64."""
        data = self.data.to(*args, **kwargs)
        lengths = self.lengths.to(device=data.device, non_blocking=bool(kwargs.get("non_blocking", False)))
        return PaddedData(data, lengths)

    def pin_memory(self) -> PaddedData:
        return PaddedData(self.data.pin_memory(), self.lengths.pin_memory())

    def mask(self) -> torch.Tensor:
        """Boolean mask (batch, max_time), True on valid steps."""
        steps = torch.arange(self.data.shape[1], device=self.lengths.device)
        return steps.unsqueeze(0) < self.lengths.unsqueeze(1)


def pad_sequences(tensors: Sequence[torch.Tensor], pad_value: float = 0, key: str = "field",
                  pad_to_multiple: int = 1) -> PaddedData:
    """Pad tensors of shapes ``(time_i, *rest)`` to ``(batch, max_time, *rest)``; ``rest`` must agree.

    ``pad_to_multiple`` rounds ``max_time`` up to a multiple of it, so batches come in few distinct shapes (a
    compiled step or a CUDA graph is reused instead of made anew for every length). The lengths stay exact.

    Example:
        >>> pad_sequences([torch.ones(2, 4), torch.ones(3, 4)]).data.shape
        torch.Size([2, 3, 4])
        >>> pad_sequences([torch.ones(2, 4), torch.ones(3, 4)], pad_to_multiple=8).data.shape
        torch.Size([2, 8, 4])
    """
    if not tensors:
        raise DataError(f"cannot pad {key!r}: no items")
    first = tensors[0]
    rest = tuple(first.shape[1:])
    for position, tensor in enumerate(tensors):
        if tensor.dim() == 0 or tuple(tensor.shape[1:]) != rest:
            raise DataError(f"cannot pad {key!r}: item {position} has shape {tuple(tensor.shape)} but item 0 "
                            f"has {tuple(first.shape)} (only the first dimension may differ)")
        if tensor.dtype != first.dtype:
            raise DataError(f"cannot pad {key!r}: item {position} has dtype {tensor.dtype}, "
                            f"item 0 {first.dtype}")
    lengths = torch.tensor([tensor.shape[0] for tensor in tensors], dtype=torch.int64)
    max_length = -(-int(lengths.max()) // pad_to_multiple) * pad_to_multiple
    data = first.new_full((len(tensors), max_length, *rest), pad_value)
    for position, tensor in enumerate(tensors):
        data[position, : tensor.shape[0]] = tensor
    return PaddedData(data, lengths)


class PaddedBatch:
    """A collated batch with attribute access: ``batch.sig.data``, ``batch.sig.lengths``, ``batch.id``.

    Arguments:
        examples: the data points: dicts with the same keys, or tuples (or lists) of the same length, whose
            fields the batch then holds under the keys 0, 1, ... (``batch[0]``; iterating the batch gives the
            fields in order, so ``x, y = batch`` works).
        padded_keys: the keys to pad; default: every key whose first value is a tensor or numpy array of
            at least one dimension.
        pad_values: pad value per key (default 0), e.g. ``{"tokens": -100}``.
        pad_to_multiple: pad the time dimension of every padded key to a multiple of this (see
            :func:`pad_sequences`); the loader option of the same name sets it.

    ``len(batch)`` is the number of items. ``.to(device)`` and ``.pin_memory()`` move every tensor and return
    the batch, so the class works as ``collate_fn`` of a ``torch.utils.data.DataLoader`` with
    ``pin_memory=True``.
    """

    def __init__(self, examples: Sequence[Mapping[str, Any]], padded_keys: Optional[Sequence[str]] = None,
                 pad_values: Optional[Mapping[str, float]] = None, pad_to_multiple: int = 1):
        if not examples:
            raise DataError("PaddedBatch needs at least one example")
        positional = isinstance(examples[0], (tuple, list))
        examples = _as_mappings(examples) if positional else examples
        for position, example in enumerate(examples):
            if not isinstance(example, Mapping):
                raise DataError(f"PaddedBatch: item {position} is {_describe(example)}; an item must be a "
                                "dict of named fields (as DynamicItemDataset gives) or a tuple or list of "
                                "fields (as TensorDataset gives); for other items pass a collate_fn to the "
                                "loader, e.g. torch.utils.data.default_collate")
        keys = list(examples[0].keys())
        for position, example in enumerate(examples):
            if set(example.keys()) != set(keys):
                raise DataError(f"PaddedBatch: example {position} has keys {sorted(example)} but example 0 "
                                f"has {sorted(keys)}")
        pad_values = dict(pad_values or {})
        fields: dict = {}
        for key in keys:
            values = [example[key] for example in examples]
            pad = _is_array(values[0]) if padded_keys is None else key in padded_keys
            if pad:
                tensors = [_as_tensor(value, key, position) for position, value in enumerate(values)]
                if all(tensor.dim() == 0 for tensor in tensors):
                    fields[key] = torch.stack(tensors)
                else:
                    fields[key] = pad_sequences(tensors, pad_values.get(key, 0), key, pad_to_multiple)
            else:
                fields[key] = values
        self.__dict__["_fields"] = fields
        self.__dict__["_size"] = len(examples)
        self.__dict__["_positional"] = positional

    # Attribute access reads the fields; __dict__ is used directly so that pickling (DataLoader workers)
    # never recurses through __getattr__ before _fields exists.
    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__.get("_fields")
        if fields is not None and name in fields:
            return fields[name]
        raise AttributeError(f"batch has no field {name!r} (fields: {sorted(fields or {})})")

    def __setattr__(self, name: str, value: Any) -> None:
        self._fields[name] = value

    def __getstate__(self) -> dict:
        return dict(self.__dict__)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def __getitem__(self, key: str) -> Any:
        try:
            return self._fields[key]
        except KeyError:
            raise KeyError(f"batch has no field {key!r} (fields: {sorted(self._fields)})") from None

    def __contains__(self, key: str) -> bool:
        return key in self._fields

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator:
        """The fields' values in order for a batch of tuples (``x, y = batch``), the keys for named fields."""
        fields = self._fields
        return iter(fields.values()) if self.__dict__.get("_positional") else iter(fields)

    def keys(self) -> list:
        return list(self._fields)

    def items(self) -> Iterator:
        return iter(self._fields.items())

    def to(self, *args: Any, **kwargs: Any) -> PaddedBatch:
        """Move every tensor (``data`` and ``lengths``) in place, like ``Tensor.to``; returns the batch."""
        for key, value in self._fields.items():
            if isinstance(value, (torch.Tensor, PaddedData)):
                self._fields[key] = value.to(*args, **kwargs)
        return self

    def pin_memory(self) -> PaddedBatch:
        """Pin every tensor in page-locked memory (called by DataLoader workers when ``pin_memory=True``)."""
        for key, value in self._fields.items():
            if isinstance(value, (torch.Tensor, PaddedData)):
                self._fields[key] = value.pin_memory()
        return self

    def __repr__(self) -> str:
        parts = []
        for key, value in self._fields.items():
            if isinstance(value, PaddedData):
                parts.append(f"{key}=PaddedData{tuple(value.data.shape)}")
            elif isinstance(value, torch.Tensor):
                parts.append(f"{key}=Tensor{tuple(value.shape)}")
            else:
                parts.append(f"{key}=list[{len(value)}]")
        return f"PaddedBatch({self._size} items: {', '.join(parts)})"


def _as_mappings(examples: Sequence[Any]) -> list:
    """Tuples (or lists) of fields as dicts keyed by position, refusing items of another kind or length."""
    size = len(examples[0])
    mappings = []
    for position, example in enumerate(examples):
        if not isinstance(example, (tuple, list)) or len(example) != size:
            raise DataError(f"PaddedBatch: item {position} is {_describe(example)} but item 0 is a "
                            f"{type(examples[0]).__name__} of {size} fields; every item needs the same "
                            "fields")
        mappings.append(dict(enumerate(example)))
    return mappings


def _describe(example: Any) -> str:
    if isinstance(example, (tuple, list)):
        return f"a {type(example).__name__} of {len(example)} fields"
    return f"a {type(example).__name__}"


def _is_array(value: Any) -> bool:
    return isinstance(value, (torch.Tensor, np.ndarray))


def _as_tensor(value: Any, key: str, position: int) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as error:
        raise DataError(f"PaddedBatch: item {position} of {key!r} cannot become a tensor: {error}") from None
