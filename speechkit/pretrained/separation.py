"""``SeparationModel``: split a recording of several talkers into one waveform per talker.

A separation model folder's ``hyperparams.yaml`` declares ``interface: SeparationModel``, ``sample_rate``,
``num_speakers``, ``modules`` with a ``separator`` (called as ``separator(mixtures, lengths)``, returning
``(batch, speakers, time)``, e.g. :class:`speechkit.models.ConvTasNet`), and a ``pretrainer`` naming its
weight file. ``speechkit export`` writes one from a trained separation recipe.

Example:
    >>> from speechkit.pretrained import SeparationModel
    >>> model = SeparationModel.from_hparams("results/separator-model")  # doctest: +SKIP
    >>> sources = model.separate_file("meeting.wav")  # (speakers, time), model's rate  # doctest: +SKIP
"""
from __future__ import annotations

from typing import Optional

import torch

from speechkit.errors import HparamsError
from speechkit.pretrained.interfaces import Pretrained
from speechkit.pretrained.registry import register_interface


@register_interface
class SeparationModel(Pretrained):
    """Mixture in, sources out; batch-invariant, so a file separated alone or in a batch gives the same."""

    REQUIRED_KEYS = ("modules", "sample_rate", "num_speakers")

    def __init__(self, modules: dict, hparams: dict, run_opts=None, source_description: str = "hyperparams"):
        super().__init__(modules, hparams, run_opts, source_description)
        if "separator" not in self.mods:
            raise HparamsError(f"{source_description}: modules must hold a 'separator' (it holds "
                               f"{', '.join(self.mods) or 'nothing'})")
        self.num_speakers = int(hparams["num_speakers"])

    @torch.no_grad()
    def separate_batch(self, mixtures: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Separate a zero-padded batch at the model's rate.

        Args:
            mixtures: (batch, time) or (time,) float waveforms.
            lengths: (batch,) int64 valid samples (default: all).

        Returns:
            (batch, num_speakers, time) estimates, zero past each length.
        """
        wavs, lengths = self._prepare(mixtures, lengths)
        estimates = self.mods["separator"](wavs, lengths)
        if estimates.dim() != 3 or estimates.shape[1] != self.num_speakers:
            raise HparamsError(f"the separator returned shape {tuple(estimates.shape)}; expected (batch, "
                               f"{self.num_speakers}, time) for num_speakers={self.num_speakers}")
        return estimates

    def separate_file(self, path) -> torch.Tensor:
        """Separate one audio file (any rate soundfile reads; resampled to the model's); (speakers, time)."""
        waveform = self.load_audio(path)
        return self.separate_batch(waveform.unsqueeze(0), torch.tensor([waveform.shape[0]]))[0]

    def forward(self, mixtures: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.separate_batch(mixtures, lengths)
