"""The resumable position of a sampler, in a form any checkpoint can hold.

A position is mostly a set of consumed items, stored as a bitmap compressed to text (a few kilobytes for
a million items), so it loads with ``torch.load(weights_only=True)`` or from JSON alike.

Example:
    >>> mask = np.array([True, False, True])
    >>> decode_mask(encode_mask(mask), 3).tolist()
    [True, False, True]
"""
from __future__ import annotations

import base64
import zlib

import numpy as np

from speechkit.errors import DataError

STATE_VERSION = 1


def encode_mask(mask: np.ndarray) -> str:
    """A bool mask as compact text (zlib-compressed bits, base64), safe in any checkpoint format."""
    return base64.b64encode(zlib.compress(np.packbits(mask.astype(bool)).tobytes())).decode("ascii")


def decode_mask(text: str, size: int) -> np.ndarray:
    try:
        packed = zlib.decompress(base64.b64decode(text.encode("ascii"), validate=True))
        bits = np.unpackbits(np.frombuffer(packed, dtype=np.uint8))
    except (ValueError, TypeError, AttributeError, zlib.error) as error:
        raise DataError(f"sampler state: 'consumed' is not a valid item mask ({error})") from None
    if bits.size < size:
        raise DataError(f"sampler state: 'consumed' covers {bits.size} items, the dataset has {size}")
    return bits[:size].astype(bool)


def check_state(state: dict, kind: str, num_items: int) -> None:
    if not isinstance(state, dict):
        raise DataError(f"{kind} state must be a dict, got {type(state).__name__}")
    for key in ("sampler", "epoch", "num_items", "consumed"):
        if key not in state:
            raise DataError(f"{kind} state has no key {key!r} (keys: {sorted(state)})")
    if state["sampler"] != kind:
        raise DataError(f"state was saved by a {state['sampler']}, cannot load it into a {kind}")
    if state["num_items"] != num_items:
        raise DataError(f"{kind} state was saved for {state['num_items']} items, this dataset has "
                        f"{num_items}: the dataset changed since the checkpoint")
