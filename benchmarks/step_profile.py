"""What a training step does on the device: kernels per step, achieved TFLOP/s and the device's idle time.

Used by the benchmarks' ``--profile`` option. The step is run under :mod:`torch.profiler` for a few steps:
on CUDA, every kernel is an event on the GPU's timeline, so the union of the kernels' intervals is the time
the GPU was busy and the rest of the window is idle (waiting for the host: Python, the data loader, a
synchronisation). On CPU, the figures are the operators run by the host (there is no separate device).
Floating-point work comes from :class:`torch.utils.flop_counter.FlopCounterMode` over one step (matrix
products and convolutions, forward and backward), divided by the measured step time.

Example:
    >>> step = lambda batch: model(batch).sum().backward()                          # doctest: +SKIP
    >>> row = profile_step(step, batches, "cpu", step_flops(step, batches[0]))      # doctest: +SKIP
    >>> row["kernels_per_step"], row["tflops"], row["idle"]                              # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Callable, Optional

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity) by GPU name, first match wins; else --peak-tflops.
BF16_PEAK_TFLOPS = {"H100 PCIe": 756.0, "H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0,
                    "A10": 125.0}


def bf16_peak_tflops(device: str, override: Optional[float] = None) -> Optional[float]:
    """The dense bf16 peak of ``device``'s GPU: ``override``, or by the GPU's name when known, else None."""
    if override or not device.startswith("cuda"):
        return override
    name = torch.cuda.get_device_name(torch.device(device))
    return next((peak for key, peak in BF16_PEAK_TFLOPS.items() if key in name), None)


def step_flops(step: Callable, batch) -> int:
    """Floating-point operations of one call of ``step(batch)`` (forward and backward)."""
    counter = FlopCounterMode(display=False)
    with counter:
        step(batch)
    return counter.get_total_flops()


def busy_seconds(intervals: list) -> float:
    """Length of the union of ``(start, end)`` intervals (kernels that overlap count once).

    Example:
        >>> busy_seconds([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)])
        4.0
    """
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def profile_step(step: Callable, batches: Iterable, device: str, flops_per_step: float,
                 peak_tflops: Optional[float] = None) -> dict:
    """Run ``step`` over ``batches`` (a list, or a data loader: its waits count) under the profiler; kernels
    (or host operators) per step, TFLOP/s and the idle fraction of the device over the window."""
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        started, steps = time.perf_counter(), 0
        for batch in batches:
            step(batch)
            steps += 1
        if cuda:
            torch.cuda.synchronize()
        window = time.perf_counter() - started
    events = prof.events()
    if cuda:
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        intervals = [(e.time_range.start / 1e6, e.time_range.end / 1e6) for e in kernels]
        busy = busy_seconds(intervals)
        span = (max(end for _, end in intervals) - min(start for start, _ in intervals)) if intervals else 0.0
        # The profiler's clock and perf_counter differ; idle is measured inside the profiler's own window.
        idle = max(0.0, 1.0 - busy / max(window, span, 1e-9))
        count = len(kernels)
    else:
        count = sum(1 for e in events
                    if e.device_type == torch.autograd.DeviceType.CPU and e.name.startswith("aten::"))
        idle = float("nan")
    step_s = window / steps
    tflops = flops_per_step / step_s / 1e12
    peak = bf16_peak_tflops(device, peak_tflops)
    return {"kernels_per_step": count / steps, "tflops": tflops,
            "peak_fraction": tflops / peak if peak else float("nan"), "idle": idle, "profiled_step_s": step_s}
