"""Audio from mel spectrograms: a trained vocoder as an inference interface.

A model folder for :meth:`Vocoder.from_hparams` holds a ``hyperparams.yaml`` declaring ``interface:
Vocoder``, ``sample_rate``, ``modules: {mel: MelSpectrogram, generator: MelGenerator}`` and a ``pretrainer``
loading the generator's weights (see recipes/SynthSpeech/vocoder/hparams/inference.yaml). The mel module is
the one the vocoder was trained on, so :meth:`mel_of_file` gives exactly the input :meth:`generate` expects:
the "embedding" of a recording, which can be stored, edited or interpolated and turned back into audio.

Example:
    >>> vocoder = Vocoder.from_hparams("results/vocoder-model")                 # doctest: +SKIP
    >>> mel = vocoder.mel_of_file("utt1.flac")  # (frames, n_mels)                # doctest: +SKIP
    >>> wavs, samples = vocoder.generate(mel.unsqueeze(0))  # (1, frames * hop)   # doctest: +SKIP
    >>> audio = vocoder.resynthesize_file("utt1.flac")  # (time,) like the input  # doctest: +SKIP
"""
from __future__ import annotations

from typing import Optional

import torch

from speechkit.errors import HparamsError
from speechkit.models.istft_vocoder import ISTFTGenerator
from speechkit.models.vocoder import MelGenerator, MelSpectrogram
from speechkit.pretrained.interfaces import Pretrained
from speechkit.pretrained.registry import register_interface


@register_interface
class Vocoder(Pretrained):
    """Mel spectrogram -> waveform at ``sample_rate``; ``hop_length`` samples per mel frame."""

    REQUIRED_KEYS = ("modules", "sample_rate")

    def __init__(self, modules: dict, hparams: dict, run_opts=None, source_description: str = "hyperparams"):
        super().__init__(modules, hparams, run_opts, source_description)
        mel, generator = self.mods["mel"] if "mel" in self.mods else None, \
            self.mods["generator"] if "generator" in self.mods else None
        if not isinstance(mel, MelSpectrogram) or not isinstance(generator, (MelGenerator, ISTFTGenerator)):
            raise HparamsError(f"{source_description}: a Vocoder needs modules.mel (a MelSpectrogram) and "
                               f"modules.generator (a MelGenerator or an ISTFTGenerator), got "
                               f"{type(mel).__name__} and {type(generator).__name__}")
        if mel.hop_length != generator.hop_length or mel.n_mels != generator.n_mels:
            raise HparamsError(f"{source_description}: the mel has hop {mel.hop_length} and {mel.n_mels} "
                               f"bins but the generator expects hop {generator.hop_length} and "
                               f"{generator.n_mels} bins")
        if mel.sample_rate != self.sample_rate:
            raise HparamsError(f"{source_description}: sample_rate is {self.sample_rate} but modules.mel "
                               f"computes mels at {mel.sample_rate}")
        self.n_mels, self.hop_length = mel.n_mels, mel.hop_length

    @torch.no_grad()
    def mel_batch(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> tuple:
        """``(mels, frames)``: (batch, frames, n_mels) log mel magnitudes of a padded batch at the model's
        rate, and (batch,) int64 valid frames (``1 + samples // hop_length``)."""
        wavs, lengths = self._prepare(wavs, lengths)
        return self.mods["mel"](wavs, lengths)

    def mel_of_file(self, path) -> torch.Tensor:
        """The (frames, n_mels) log mel spectrogram of one audio file (resampled to the model's rate)."""
        waveform = self.load_audio(path)
        mels, _ = self.mel_batch(waveform.unsqueeze(0), torch.tensor([waveform.shape[0]]))
        return mels[0]

    @torch.no_grad()
    def generate(self, mels: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> tuple:
        """Waveforms of a padded batch of mel spectrograms.

        Args:
            mels: (batch, frames, n_mels) or (frames, n_mels) float log mel magnitudes.
            lengths: (batch,) int64 valid frames (default: all).

        Returns:
            ``(wavs, samples)``: (batch, frames * hop_length) float32 in [-1, 1], zero past each item's
            ``samples = lengths * hop_length``.
        """
        mels = torch.as_tensor(mels)
        if mels.dim() == 2:
            mels = mels.unsqueeze(0)
        if mels.dim() != 3 or mels.shape[2] != self.n_mels:
            raise ValueError(f"expected mels (batch, frames, {self.n_mels}), got shape {tuple(mels.shape)}")
        if lengths is None:
            lengths = torch.full((mels.shape[0],), mels.shape[1], dtype=torch.int64)
        lengths = torch.as_tensor(lengths)
        if lengths.is_floating_point():
            raise ValueError("lengths must be absolute int64 frame counts, not relative lengths")
        mels, lengths = mels.to(self.device, torch.float32), lengths.to(self.device, torch.int64)
        return self.mods["generator"](mels, lengths)

    def resynthesize_file(self, path) -> torch.Tensor:
        """One audio file through mel and vocoder: (time,) at the model's rate, as long as the input."""
        waveform = self.load_audio(path)
        mels, frames = self.mel_batch(waveform.unsqueeze(0), torch.tensor([waveform.shape[0]]))
        wavs, _ = self.generate(mels, frames)
        return wavs[0, :waveform.shape[0]].cpu()

    def forward(self, mels: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> tuple:
        return self.generate(mels, lengths)
