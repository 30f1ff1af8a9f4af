"""Speed perturbation that makes new speakers: each speed is an identity of its own.

Playing a voice 10% faster raises its pitch and its formants by 10%: to a listener, another person. A
speaker classifier trained with ordinary speed perturbation learns to call both the same speaker, which
blurs exactly the cues that tell close voices apart. :class:`SpeedIdentities` plays each training crop at
one of ``speeds`` and gives it the label ``label + k * num_speakers`` for the ``k``-th speed, so the
classifier sees ``len(speeds)`` times as many identities (the recipe of speaker-recognition toolkits for
VoxCeleb: speeds 0.9, 1.0 and 1.1 as three speakers).

Example:
    >>> identities = SpeedIdentities(speeds=[1.0, 0.9, 1.1])
    >>> identities.num_classes(10)
    30
    >>> wavs, lengths = torch.randn(2, 16000), torch.tensor([16000, 12000])
    >>> wavs, lengths, labels = identities(wavs, lengths, torch.tensor([3, 7]), 10, torch.tensor([2, 6]))
    >>> labels.tolist(), lengths.tolist()    # item 1 played at 0.9: 10/9 as long, speaker 7 + 1 x 10
    ([3, 17], [16000, 13334])
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from speechkit.augment.core import generator_for
from speechkit.augment.tempo import _resample_by
from speechkit.errors import HparamsError

_SEED_SALT = 0x5EED  # the speed draw must not repeat the first draw the augmenter makes from the same seed


class SpeedIdentities:
    """Play each item at one of ``speeds`` (drawn per item from its seed) and make each speed a speaker."""

    def __init__(self, speeds: Sequence[float] = (1.0, 0.9, 1.1), sample_rate: int = 16000):
        speeds = tuple(float(s) for s in speeds or ())
        if not speeds or any(not 0.5 <= s <= 2.0 for s in speeds) or len(set(speeds)) != len(speeds):
            raise HparamsError(f"SpeedIdentities: speeds must be distinct factors in [0.5, 2], got "
                               f"{speeds!r}")
        self.speeds, self.sample_rate = speeds, int(sample_rate)

    def num_classes(self, num_speakers: int) -> int:
        """How many identities ``num_speakers`` speakers become (one per speaker and speed)."""
        return num_speakers * len(self.speeds)

    def __call__(self, wavs: torch.Tensor, lengths: torch.Tensor, labels: torch.Tensor, num_speakers: int,
                 seeds: torch.Tensor) -> tuple:
        """``(wavs, lengths, labels)``: (batch, time') float, (batch,) int64 valid samples, (batch,) int64
        identities, from (batch, time) ``wavs``, their (batch,) ``lengths``, (batch,) speaker ``labels``
        (ints in ``[0, num_speakers)``) and the items' (batch,) ``seeds``
        (:meth:`speechkit.Brain.item_seeds`)."""
        labels = torch.as_tensor(labels)
        pieces, out_labels = [], []
        for row in range(wavs.shape[0]):
            generator = generator_for(int(seeds[row]) ^ _SEED_SALT)
            choice = int(torch.randint(len(self.speeds), (), generator=generator))
            wave = wavs[row, : int(lengths[row])]
            if self.speeds[choice] != 1.0:
                wave = _resample_by(wave, self.speeds[choice], self.sample_rate)
            pieces.append(wave)
            out_labels.append(int(labels[row]) + choice * num_speakers)
        out_lengths = torch.tensor([piece.shape[0] for piece in pieces], dtype=torch.int64)
        return (torch.nn.utils.rnn.pad_sequence(pieces, batch_first=True), out_lengths,
                torch.tensor(out_labels, dtype=torch.int64, device=labels.device))
