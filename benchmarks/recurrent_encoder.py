"""Training throughput of ``RecurrentEncoder`` (one dense pass per direction) against the obvious alternative,
a bidirectional ``nn.LSTM`` over packed sequences, on the same batches.

Batches are shaped like the demo's dynamic batches: about ``--batch-seconds`` of audio of utterances whose
lengths differ by a few frames (80 log-mel features, 100 frames per second), so the packed LSTM sees
batch sizes that shrink near the end of each batch, as it does in training. Both models have the same
weights layout and sizes; each step is forward, a summed loss, backward and an AdamW update.

Usage:
    python benchmarks/recurrent_encoder.py                  # about a minute on 2 CPU cores
    python benchmarks/recurrent_encoder.py --hidden 192 --layers 3 --steps 40
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.machine import machine_line
from speechkit.models import RecurrentEncoder, stack_frames  # noqa: E402

FEATURES = 80
FRAMES_PER_SECOND = 100


class PackedBidirectionalEncoder(nn.Module):
    """The alternative: frame stacking, then one bidirectional ``nn.LSTM`` over packed sequences."""

    def __init__(self, hidden: int, layers: int, stride: int, d_model: int):
        super().__init__()
        self.stride = stride
        self.rnn = nn.LSTM(FEATURES * stride, hidden, layers, batch_first=True, bidirectional=True,
                           dropout=0.1 if layers > 1 else 0.0)
        self.proj = nn.Linear(2 * hidden, d_model)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, lengths = stack_frames(x, lengths, self.stride)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        y, _ = self.rnn(packed)
        y, _ = nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])
        return self.proj(y), lengths


def make_batches(count: int, batch_seconds: float, spread_frames: int, seed: int) -> list:
    """``count`` batches of ``(features, lengths)``: utterances of 1.5-5 s, lengths within a few frames."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        longest = int(torch.randint(150, 500, (1,), generator=generator))
        size = max(1, int(batch_seconds * FRAMES_PER_SECOND // longest))
        lengths = longest - torch.randint(0, spread_frames + 1, (size,), generator=generator)
        lengths[0] = longest
        batches.append((torch.randn(size, longest, FEATURES, generator=generator), lengths))
    return batches


def throughput(model: nn.Module, batches: list, warmup: int) -> float:
    """Seconds of audio per second of training steps (after ``warmup`` untimed steps)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    audio, start = 0.0, None
    for index, (features, lengths) in enumerate(batches):
        if index == warmup:
            start = time.perf_counter()
        encoded, _ = model(features, lengths)
        optimizer.zero_grad(set_to_none=True)
        encoded.sum().backward()
        optimizer.step()
        if start is not None:
            audio += float(lengths.sum()) / FRAMES_PER_SECOND
    return audio / (time.perf_counter() - start)


def main(argv=None) -> int:
    print(machine_line(), flush=True)  # the figures below are true of this machine
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--stride", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--batch-seconds", type=float, default=20.0)
    parser.add_argument("--spread-frames", type=int, default=6, help="max length difference within a batch")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per model")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    batches = make_batches(args.warmup + args.steps, args.batch_seconds, args.spread_frames, args.seed)
    models = {
        "RecurrentEncoder (dense per direction)": RecurrentEncoder(
            FEATURES, args.d_model, args.hidden, args.layers, stride=args.stride),
        "nn.LSTM bidirectional, packed": PackedBidirectionalEncoder(
            args.hidden, args.layers, args.stride, args.d_model),
    }
    rates = {name: throughput(model, batches, args.warmup) for name, model in models.items()}
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}")
    print(f"model: {args.layers} x {args.hidden} bidirectional LSTM over {args.stride}x stacked frames; "
          f"batches of ~{args.batch_seconds:g} s, lengths within {args.spread_frames} frames; "
          f"{args.steps} timed steps")
    print(f"| {'encoder':<40} | {'audio s/s':>9} | {'ratio':>5} |")
    print(f"| {'-' * 40} | {'-' * 9} | {'-' * 5} |")
    baseline = rates["nn.LSTM bidirectional, packed"]
    for name, rate in rates.items():
        print(f"| {name:<40} | {rate:>9.1f} | {rate / baseline:>5.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
