"""The token sequences of a transcript, as a dynamic item of a dataset (what every text model reads), and
the texts of decoded hypotheses.

Example:
    >>> from speechkit.data.dataset import DynamicItemDataset
    >>> dataset = DynamicItemDataset({"utt1": {"text": "HELLO"}})
    >>> dataset.add_dynamic_item(token_sequences(tokenizer, bos_index=0, eos_index=0))
    >>> dataset.set_output_keys(["tokens", "tokens_bos", "tokens_eos"])
    >>> dataset[0]["tokens"], dataset[0]["tokens_bos"], dataset[0]["tokens_eos"]
    (tensor([2, 9, 8, 3, 3, 1]), tensor([0, 2, 9, 8, 3, 3, 1]), tensor([2, 9, 8, 3, 3, 1, 0]))
"""

from __future__ import annotations

import torch

from speechkit.data.pipeline import DynamicItem


def token_sequences(tokenizer, bos_index: int, eos_index: int, text_key: str = "text") -> DynamicItem:
    """A dynamic item taking ``text_key`` and providing three int64 tensors:

    - ``tokens_bos``: ``[bos] + ids`` (decoder/LM input, length n + 1),
    - ``tokens_eos``: ``ids + [eos]`` (decoder/LM target, length n + 1),
    - ``tokens``: ``ids`` (CTC target, length n),

    where ``ids = tokenizer.encode(text)``.
    """

    def encode(text: str):
        ids = tokenizer.encode(text)
        yield torch.tensor([bos_index] + ids, dtype=torch.long)
        yield torch.tensor(ids + [eos_index], dtype=torch.long)
        yield torch.tensor(ids, dtype=torch.long)

    return DynamicItem(encode, takes=[text_key], provides=["tokens_bos", "tokens_eos", "tokens"])


def hypothesis_texts(tokenizer, hypotheses) -> list:
    """The texts of decoded token-id sequences, whitespace collapsed.

    Ids at or past ``tokenizer.vocab_size`` (an output layer larger than the tokenizer, as a ``char``
    recipe's upper-bound ``vocab_size`` makes it) are never training targets: they are dropped.

    Example:
        >>> hypothesis_texts(tokenizer, [tokenizer.encode("HELLO"), [9, 20]])
        ['HELLO', 'H']
    """
    size = tokenizer.vocab_size
    return [" ".join(tokenizer.decode([int(t) for t in hyp if t < size]).split()) for hyp in hypotheses]
