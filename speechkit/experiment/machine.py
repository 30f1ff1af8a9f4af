"""The machine a figure was measured on, in one line: every benchmark prints it first.

Speed, and the exact floating-point trajectory of a training run, are true of one machine: torch picks its CPU
kernels by the instruction set, so the same commit and seed can give other losses on another CPU.

``machine_line()`` names the CPU model, its widest vector instruction set (the kernels torch picks depend on
it), the threads torch uses of the cores present, the torch version, the GPU if one is used, and the load
average when the figures were taken (a shared host's other tenants slow every figure down).

Example:
    >>> print(machine_line())   # e.g. AMD EPYC (AVX2, no AVX-512), torch 2.14.1, 1 of 2 cores as threads, ...
    machine: ... (...), torch ..., ... cores as threads, ..., load average ...
"""

from __future__ import annotations

import os
import platform

import torch

_EXTENSIONS = (("amx_bf16", "AMX-BF16"), ("avx512_bf16", "AVX-512 BF16"), ("avx512f", "AVX-512"),
               ("avx2", "AVX2"), ("asimd", "NEON"))


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(("model name", "Model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def instruction_sets() -> str:
    """The widest vector extensions the CPU reports (``/proc/cpuinfo`` flags), e.g. ``AVX2, no AVX-512``."""
    flags: set = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(("flags", "Features")):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return torch.backends.cpu.get_cpu_capability()
    found = [name for flag, name in _EXTENSIONS if flag in flags]
    if "AVX2" in found and "AVX-512" not in found:
        found.append("no AVX-512")
    return ", ".join(found) or torch.backends.cpu.get_cpu_capability()


def machine_line() -> str:
    """``machine: CPU (instruction sets), torch version, threads of cores, GPU, load average``."""
    gpu = f"GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "no GPU"
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return (f"machine: {cpu_model()} ({instruction_sets()}), torch {torch.__version__}, "
            f"{torch.get_num_threads()} of {os.cpu_count()} cores as threads, {gpu}{load}")


__all__ = ["cpu_model", "instruction_sets", "machine_line"]
