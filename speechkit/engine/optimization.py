"""One optimizer step made of accumulated micro-batches: backward, clipping, non-finite guard, step.

Accumulation: each micro-batch's loss (a mean over its items) is divided by the factor k before backward, so
k micro-batches of b items give the gradient of one batch of k*b items. A cycle cut short at the end of an
epoch (m < k micro-batches) is rescaled by k/m, so it is still a mean.

Non-finite values never reach the weights: a cycle in which any loss was inf/NaN is skipped (no backward on a
single process; under DDP the backward still runs so that every rank joins the gradient all-reduce, which then
carries the NaN to every rank, and every rank skips the same step). Gradients are checked too whenever their
norm is computed anyway (clipping, ``skip_nonfinite_grads``, several processes). Skipped steps are counted;
more than ``nonfinite_patience`` in a row raise :class:`~speechkit.errors.NonFiniteLossError` on every rank at
the same step. With fp16 the gradient scaler handles overflowing gradients itself (not counted).

On a GPU nothing is read back per micro-batch: the loss check stays a flag on the device, the backward always
runs, and the flag and the gradient norm are read together once per optimizer step (one synchronisation,
where the step must decide whether to update).

Example:
    >>> model = torch.nn.Linear(3, 1)
    >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> steps = OptimizationStep({"opt": opt}, Precision("fp32", "cpu"), accumulation=2)
    >>> for micro_batch in torch.randn(2, 4, 3):
    ...     final = steps.is_final_micro_batch()   # asked before the backward (DDP syncs on it)
    ...     finite = steps.backward(model(micro_batch).pow(2).mean())
    ...     if final:
    ...         print("stepped:", steps.step())
    stepped: True
"""

from __future__ import annotations

import logging
import math
from typing import Optional

import torch

from speechkit.engine.precision import Precision
from speechkit.errors import NonFiniteLossError

logger = logging.getLogger(__name__)


class OptimizationStep:
    """Owns the micro-batch count, gradient clipping and the non-finite counter of a training run.

    Args:
        optimizers: ``{name: torch.optim.Optimizer}``.
        precision: the training :class:`Precision` (its scaler, if any, is used).
        accumulation: micro-batches per optimizer step (k).
        max_grad_norm: clip the global gradient L2 norm to this; 0 disables clipping.
        nonfinite_patience: consecutive skipped steps tolerated before raising.
        skip_nonfinite_grads: check gradients even when clipping is off.
        distributed: several processes train together (backward always runs; gradients always checked).
        defer_checks: keep the loss check on the device until the step (default: when the loss is not on
            the CPU); True on CPU runs the GPU path, for tests.
    """

    def __init__(
        self,
        optimizers: dict,
        precision: Precision,
        accumulation: int = 1,
        max_grad_norm: float = 0.0,
        nonfinite_patience: int = 3,
        skip_nonfinite_grads: bool = False,
        distributed: bool = False,
        defer_checks: Optional[bool] = None,
    ):
        if int(accumulation) < 1:
            raise ValueError(f"gradient accumulation factor must be >= 1, got {accumulation}")
        self.optimizers = dict(optimizers)
        self.precision = precision
        self.accumulation = int(accumulation)
        self.max_grad_norm = float(max_grad_norm or 0.0)
        self.nonfinite_patience = int(nonfinite_patience)
        self.skip_nonfinite_grads = bool(skip_nonfinite_grads)
        self.distributed = distributed
        self.defer_checks = defer_checks
        self.micro_batches = 0  # micro-batches accumulated in the current cycle
        self.cycle_nonfinite = False
        self._device_nonfinite: Optional[torch.Tensor] = None  # the cycle's loss check, kept on the GPU
        self.consecutive_nonfinite = 0
        self.skipped_total = 0

    def is_final_micro_batch(self, last_in_epoch: bool = False) -> bool:
        """Whether the next micro-batch completes a cycle (and therefore must synchronize gradients)."""
        return self.micro_batches + 1 >= self.accumulation or last_in_epoch

    def backward(self, loss: torch.Tensor) -> bool:
        """Accumulate ``loss / k``'s gradients; returns False when the loss is non-finite."""
        self.micro_batches += 1
        if loss.device.type != "cpu" if self.defer_checks is None else self.defer_checks:
            nonfinite = ~torch.isfinite(loss.detach()).all()
            flag = self._device_nonfinite
            self._device_nonfinite = nonfinite if flag is None else flag | nonfinite
            self._scaled_backward(loss)
            return True  # not known yet without waiting for the GPU; step() reads the flag
        finite = bool(torch.isfinite(loss.detach()).all())
        if not finite:
            self.cycle_nonfinite = True
            logger.warning(
                "Non-finite loss (%s); this optimizer step will be skipped",
                loss.detach().float().item() if loss.numel() == 1 else "tensor",
            )
            if not self.distributed:
                return False  # nothing to synchronize with: save the backward
        self._scaled_backward(loss)
        return finite

    def _scaled_backward(self, loss: torch.Tensor) -> None:
        scaled = loss / self.accumulation
        if self.precision.scaler is not None:
            scaled = self.precision.scaler.scale(scaled)
        scaled.backward()

    def parameters(self) -> list:
        return [
            p
            for opt in self.optimizers.values()
            for group in opt.param_groups
            for p in group["params"]
            if p.grad is not None
        ]

    def step(self) -> bool:
        """Finish the cycle: unscale, rescale a short cycle, clip, check, step, zero the gradients.

        Returns whether the weights were updated.
        """
        micro, self.micro_batches = self.micro_batches, 0
        poisoned, self.cycle_nonfinite = self.cycle_nonfinite, False
        device_flag, self._device_nonfinite = self._device_nonfinite, None
        scaler = self.precision.scaler
        if scaler is not None:
            for optimizer in self.optimizers.values():
                scaler.unscale_(optimizer)
        params = self.parameters()
        if 0 < micro < self.accumulation and not poisoned:
            # A NaN cycle on a GPU is rescaled too (its flag is unread yet); it is skipped below all the same.
            for p in params:
                p.grad.mul_(self.accumulation / micro)
        grad_norm = self._clip_and_measure(params, read=device_flag is None)
        if device_flag is not None:
            poisoned, grad_norm = self._read_once(device_flag, grad_norm)
        bad_grads = grad_norm is not None and not math.isfinite(grad_norm)
        updated = False
        if scaler is not None:
            if not poisoned:
                for optimizer in self.optimizers.values():
                    scaler.step(optimizer)  # skips by itself when the unscaled gradients overflowed
                updated = not bad_grads
            scaler.update()
            bad_grads = False  # overflow under fp16 is routine: the scaler lowers its scale, nothing to count
        elif not poisoned and not bad_grads:
            for optimizer in self.optimizers.values():
                optimizer.step()
            updated = True
        for optimizer in self.optimizers.values():
            optimizer.zero_grad(set_to_none=True)
        self._count(poisoned or bad_grads)
        return updated

    def _clip_and_measure(self, params: list, read: bool = True) -> Optional[float | torch.Tensor]:
        """The gradient norm when clipping or checking needs it: a float, or a tensor with ``read=False``."""
        if not params:
            return None
        if self.max_grad_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)
        elif self.skip_nonfinite_grads or self.distributed:
            norm = torch.nn.utils.get_total_norm([p.grad for p in params])
        else:
            return None
        return float(norm) if read else norm

    def _read_once(self, nonfinite: torch.Tensor, grad_norm: Optional[torch.Tensor]) -> tuple:
        """The cycle's loss flag and gradient norm from the GPU in one read; logs a non-finite loss."""
        values = [nonfinite.float()]
        if grad_norm is not None:
            values.append(grad_norm.float().to(nonfinite.device))
        read = torch.stack(values).tolist()
        poisoned = bool(read[0])
        if poisoned:
            logger.warning("Non-finite loss in this optimizer step's micro-batches; the step is skipped")
        return poisoned, (read[1] if grad_norm is not None else None)

    def _count(self, skipped: bool) -> None:
        if not skipped:
            self.consecutive_nonfinite = 0
            return
        self.consecutive_nonfinite += 1
        self.skipped_total += 1
        if self.consecutive_nonfinite > self.nonfinite_patience:
            raise NonFiniteLossError(
                f"the loss or gradients were non-finite for {self.consecutive_nonfinite} optimizer steps "
                f"in a row (--nonfinite_patience {self.nonfinite_patience}); every such step was skipped. "
                "Lower the learning rate, check the data, or try --precision fp32"
            )

    def discard(self) -> None:
        """Drop gradients of an unfinished cycle (e.g. when training stops early)."""
        self.micro_batches = 0
        self.cycle_nonfinite = False
        self._device_nonfinite = None
        for optimizer in self.optimizers.values():
            optimizer.zero_grad(set_to_none=True)

    def state_dict(self) -> dict:
        return {"consecutive_nonfinite": self.consecutive_nonfinite, "skipped_total": self.skipped_total}

    def load_state_dict(self, state: dict) -> None:
        self.consecutive_nonfinite = int(state.get("consecutive_nonfinite", 0))
        self.skipped_total = int(state.get("skipped_total", 0))
