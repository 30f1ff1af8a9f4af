"""TensorBoard event files of a training run: per-step loss and learning rate, per-stage loss and metrics,
and the examples a recipe adds from a hook (audio, spectrograms).

Turned on by one run option, ``--tensorboard FOLDER`` or the top-level YAML key
``tensorboard: !ref <output_folder>/tensorboard``; then ``tensorboard --logdir FOLDER`` shows the curves.
Only the main process writes. Needs the ``tensorboard`` extra (``pip install speechkit[tensorboard]``); when
the option is unset nothing is imported and every method does nothing, so recipes call them unconditionally.

Scalars written:
    ``train/step_loss``, ``train/lr`` (x: optimizer steps; the loss is the mean of the step's micro-batches),
    ``<stage>/loss`` and ``<stage>/<metric>`` (x: epochs; the test stage at the last epoch trained).

Example (a recipe calls ``self.tensorboard``'s methods in its ``on_stage_end``):
    >>> tensorboard = TensorBoardLog("tensorboard")
    >>> wav, feats = 0.1 * torch.randn(16000), torch.randn(1, 100, 80)
    >>> tensorboard.audio("valid/example", wav, sample_rate=16000, step=3)
    >>> tensorboard.spectrogram("valid/fbank", feats[0], step=3)
    >>> tensorboard.close()
    >>> import os
    >>> len(os.listdir("tensorboard"))   # one event file
    1
"""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any, Optional

import torch

from speechkit.errors import RunOptionsError


class TensorBoardLog:
    """A ``SummaryWriter`` on the main process when ``folder`` is set; otherwise every method does nothing.

    Args:
        folder: where the event files go (created); ``None`` or ``""`` turns logging off.
        is_main: only the main process writes (the others would write the same curves).
    """

    def __init__(self, folder: Optional[str], is_main: bool = True):
        self.folder = Path(folder) if folder else None
        self.enabled = self.folder is not None and is_main
        self._writer: Any = None
        self._losses: list = []
        self._last_epoch = 0

    @property
    def writer(self) -> Any:
        """The ``torch.utils.tensorboard.SummaryWriter`` (opened on first use); ``None`` when off."""
        if self.enabled and self._writer is None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as error:  # tensorboard is an optional extra
                raise RunOptionsError(
                    f"option 'tensorboard' ({self.folder}) needs the tensorboard package: "
                    "pip install 'speechkit[tensorboard]'"
                ) from error
            self.folder.mkdir(parents=True, exist_ok=True)
            self._writer = SummaryWriter(log_dir=str(self.folder))
        return self._writer

    def micro_batch_loss(self, loss: torch.Tensor) -> None:
        if self.enabled:
            self._losses.append(float(loss))

    def step_values(self, step: int, lr: Optional[float]) -> None:
        """After optimizer step ``step``: the mean loss of its micro-batches and the rate it used."""
        if not self.enabled:
            return
        if self._losses:
            self.writer.add_scalar("train/step_loss", sum(self._losses) / len(self._losses), step)
            self._losses = []
        if lr is not None:
            self.writer.add_scalar("train/lr", lr, step)

    def stage_values(self, stage: str, epoch: Optional[int], loss: float, metrics: Optional[dict]) -> None:
        """The stage's loss and numeric metrics at ``epoch`` (the test stage: the last epoch trained)."""
        if not self.enabled:
            return
        self._last_epoch = epoch if epoch is not None else self._last_epoch
        values = {"loss": loss, **(metrics or {})}
        for key, value in values.items():
            if isinstance(value, torch.Tensor) and value.numel() == 1:
                value = value.item()
            if isinstance(value, numbers.Number):
                self.writer.add_scalar(f"{stage}/{key}", float(value), self._last_epoch)
        self.writer.flush()

    def audio(self, tag: str, wav: torch.Tensor, sample_rate: int, step: int) -> None:
        """One waveform, ``wav``: ``[samples]`` (values in [-1, 1])."""
        if self.enabled:
            self.writer.add_audio(tag, wav.detach().float().cpu().reshape(-1), step, sample_rate=sample_rate)

    def spectrogram(self, tag: str, feats: torch.Tensor, step: int) -> None:
        """One feature matrix, ``feats``: ``[frames, bins]``, drawn as an image (time to the right, low
        frequencies at the bottom, scaled to [0, 1])."""
        if not self.enabled:
            return
        image = feats.detach().float().cpu().t().flip(0)
        image = (image - image.min()) / (image.max() - image.min()).clamp_min(1e-8)
        self.writer.add_image(tag, image, step, dataformats="HW")

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> TensorBoardLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._writer is not None:
            self._writer.flush()
