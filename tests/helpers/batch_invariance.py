"""One shared check of docs/design.md, contract 2: an item's output does not depend on its batch.

``assert_batch_invariant(fn, items)`` runs ``fn`` on each item alone (a batch of one, no padding), then on
batches that mix it with the other items (padded to the longest one, in several orders), and asserts that
the item's valid output is the same. Padding is filled with noise (or a value you choose), so a layer that
lets padding into a statistic, an attention weight or a convolution fails the check.

Calling convention
    ``items`` is a list of examples. An example is one tensor whose first dimension is time (features
    ``(frames, dims)``, a waveform ``(samples,)``, tokens ``(tokens,)``), or a tuple of such tensors when
    ``fn`` takes several padded inputs (e.g. decoder tokens and encoder memory). Each input is padded to
    ``(batch, max_time, ...)`` and passed with its absolute int64 lengths, in order:
    ``fn(x, x_lengths)`` or ``fn(x, x_lengths, y, y_lengths, ...)``.

    ``fn`` may return
      * ``(output, output_lengths)``: ``output`` is ``(batch, time', ...)``; frames below
        ``output_lengths[i]`` are compared (e.g. an encoder returning subsampled lengths);
      * a tensor ``(batch, time, ...)``: with ``output_lengths_from`` set to the index of an input, the
        item's frames up to that input's length are compared (same-length outputs such as a conformer block);
        otherwise the whole ``output[i]`` is compared (pooled outputs);
      * a list with one entry per item (e.g. decoded hypotheses): entries must be exactly equal.

A module passed as ``fn`` is put in eval mode for the check (dropout off) and restored afterwards; when ``fn``
is a function that calls modules, put them in eval mode yourself.

Example:
    >>> import torch
    >>> from speechkit.nn import ConformerBlock
    >>> block = ConformerBlock(d_model=16, num_heads=2, ffn_dim=32, kernel_size=5)
    >>> items = [torch.randn(n, 16) for n in (9, 4, 6)]
    >>> outputs = assert_batch_invariant(block, items, output_lengths_from=0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

import torch

Example = Union[torch.Tensor, tuple]


def _as_tuple(example: Example) -> tuple:
    return example if isinstance(example, tuple) else (example,)


def _pad(tensors: Sequence[torch.Tensor], padding: Union[str, float, int], generator: torch.Generator):
    """Stack ``tensors`` along a new batch dimension, padding time with noise or a constant."""
    lengths = torch.tensor([t.shape[0] for t in tensors], dtype=torch.long)
    max_len = int(lengths.max())
    first = tensors[0]
    shape = (len(tensors), max_len) + tuple(first.shape[1:])
    if padding == "noise":
        if first.dtype.is_floating_point:
            out = (torch.randn(shape, generator=generator) * 3.0).to(first.dtype)
        else:
            # Integer inputs (token ids) get random ids; fn must be valid for any id below the max seen.
            high = 1 + max((int(t.max()) for t in tensors if t.numel()), default=0)
            out = torch.randint(0, high, shape, generator=generator).to(first.dtype)
    else:
        out = torch.full(shape, padding, dtype=first.dtype)
    for i, tensor in enumerate(tensors):
        out[i, : tensor.shape[0]] = tensor
    return out, lengths


def _call(fn: Callable, examples: Sequence[tuple], padding, generator) -> Any:
    arguments = []
    for position in range(len(examples[0])):
        padded, lengths = _pad([example[position] for example in examples], padding, generator)
        arguments += [padded, lengths]
    with torch.no_grad():
        return fn(*arguments), arguments


def _item_outputs(result: Any, arguments: list, output_lengths_from: Optional[int]) -> list:
    """Split a batched result into one comparable object per item."""
    if isinstance(result, list):
        return list(result)
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], torch.Tensor):
        output, lengths = result
        return [output[i, : int(lengths[i])] for i in range(output.shape[0])]
    if isinstance(result, torch.Tensor):
        if output_lengths_from is None:
            return [result[i] for i in range(result.shape[0])]
        lengths = arguments[2 * output_lengths_from + 1]
        return [result[i, : int(lengths[i])] for i in range(result.shape[0])]
    raise TypeError(
        f"fn returned {type(result).__name__}; expected a tensor, (output, lengths) or a list per item"
    )


def _assert_same(alone: Any, batched: Any, index: int, order: list, atol: float, rtol: float) -> None:
    where = f"item {index} batched in order {order}"
    if isinstance(alone, torch.Tensor):
        assert isinstance(batched, torch.Tensor), f"{where}: output type changed"
        assert alone.shape == batched.shape, (
            f"{where}: shape {tuple(batched.shape)} differs from {tuple(alone.shape)} when decoded alone"
        )
        if alone.dtype.is_floating_point:
            torch.testing.assert_close(batched, alone, atol=atol, rtol=rtol, msg=lambda m: f"{where}: {m}")
        else:
            assert torch.equal(batched, alone), f"{where}: {batched} != {alone} (alone)"
    else:
        assert batched == alone, f"{where}: {batched!r} != {alone!r} (alone)"


def assert_batch_invariant(
    fn: Callable,
    items: Sequence[Example],
    *,
    output_lengths_from: Optional[int] = None,
    padding: Union[str, float, int] = "noise",
    atol: float = 1e-5,
    rtol: float = 1e-4,
    seed: int = 0,
) -> list:
    """Assert that ``fn`` gives each item the same output alone and padded in batches with the others.

    Args:
        fn: a module or function called as ``fn(x, x_lengths[, y, y_lengths, ...])`` (see the module doc).
        items: at least two examples, with different lengths so that batching pads some of them.
        output_lengths_from: for plain tensor outputs of the same time size as an input, the index of that
            input whose lengths select the valid output frames.
        padding: ``"noise"`` (random values, random token ids for integer inputs) or a constant.
        atol, rtol: float tolerance (batched matmuls may round differently); integer outputs and lists must
            be exactly equal.
        seed: seed of the padding noise.

    Returns:
        The outputs of each item run alone, in order, for further checks.

    Raises:
        AssertionError: naming the item and the batch order whose output differs.
    """
    examples = [_as_tuple(item) for item in items]
    if len(examples) < 2:
        raise ValueError("assert_batch_invariant needs at least two items")
    if len({example[0].shape[0] for example in examples}) < 2:
        raise ValueError("give items of different lengths, otherwise batching adds no padding to check")
    generator = torch.Generator().manual_seed(seed)
    module = fn if isinstance(fn, torch.nn.Module) else None
    was_training = module.training if module is not None else False
    if module is not None:
        module.eval()
    try:
        alone = []
        for example in examples:
            result, arguments = _call(fn, [example], padding, generator)
            alone.append(_item_outputs(result, arguments, output_lengths_from)[0])
        count = len(examples)
        orders = [list(range(count)), list(reversed(range(count)))]
        # Interleave long and short items too, so each item sits next to different neighbours.
        orders.append(list(range(0, count, 2)) + list(range(1, count, 2)))
        for order in orders:
            result, arguments = _call(fn, [examples[i] for i in order], padding, generator)
            outputs = _item_outputs(result, arguments, output_lengths_from)
            assert len(outputs) == count, f"fn returned {len(outputs)} outputs for a batch of {count}"
            for position, index in enumerate(order):
                _assert_same(alone[index], outputs[position], index, order, atol, rtol)
    finally:
        if module is not None:
            module.train(was_training)
    return alone
