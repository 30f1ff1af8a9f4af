"""The machine line benchmarks print: CPU model, instruction sets, torch, threads, GPU, load."""

from __future__ import annotations

import os

import torch

from speechkit.experiment.machine import instruction_sets, machine_line


def test_machine_line_names_what_a_figure_depends_on():
    line = machine_line()
    assert line.startswith("machine: ") and f"torch {torch.__version__}" in line
    assert f"{torch.get_num_threads()} of {os.cpu_count()} cores as threads" in line
    assert ("no GPU" in line) != torch.cuda.is_available()
    assert instruction_sets() in line and instruction_sets()
