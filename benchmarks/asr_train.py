"""Conformer-CTC training throughput (seconds of audio per second) and decoding real-time factor.

Batches hold about ``--batch-seconds`` of audio and come from a small fixed set of shapes: each utterance
goes to the shortest bucket whose bound fits it and is padded to that bound, so a compiled step (or a CUDA
graph) is reused instead of recompiled for every new length. Inputs are random fbank-shaped features
(80 dims, 100 frames per second) with LibriSpeech-like durations, prepared in pinned memory and copied
without blocking. The optimizer is AdamW (fused on CUDA).

Usage:
    python benchmarks/asr_train.py --small                     # CPU, about two minutes
    python benchmarks/asr_train.py --device cuda --compile     # d_model 144 and 256, 400 s batches
    python benchmarks/asr_train.py --device cuda --compile --cuda-graphs --dtypes bf16

With ``--loader real`` the batches come instead through speechkit's own loader, as in training: a dataset
of feature items, dynamic batches over the same buckets, padding to a multiple of ``--pad-multiple`` frames,
``--loader-workers`` worker processes and pinned memory; its waits count in the timed steps. ``--profile``
adds what the step does on the device (``step_profile.py``): kernels per step, achieved TFLOP/s (and the
share of the GPU's bf16 peak) and the GPU's idle time.

Throughput counts real audio only (not padding). The decoding real-time factor is encoder + CTC head +
greedy decoding time divided by the audio duration (lower is faster).
"""

from __future__ import annotations

import argparse
import itertools
import math
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # speechkit and benchmarks/ of this checkout

from benchmarks.step_profile import profile_step, step_flops  # noqa: E402
from speechkit.data.loader import make_dataloader  # noqa: E402
from speechkit.decoding import ctc_greedy_decode  # noqa: E402
from speechkit.machine import machine_line
from speechkit.models import ConformerEncoder, CTCHead  # noqa: E402
from speechkit.nn import ctc_loss  # noqa: E402

FEATURE_DIM = 80
FRAMES_PER_SECOND = 100
TOKENS_PER_SECOND = 3.0  # a 256-unit BPE vocabulary emits about 3 tokens per second of read speech


FULL_DEFAULTS = {"batch_seconds": 400.0, "bounds": [8.0, 12.0, 16.0, 20.0], "steps": 20, "warmup": 2}
SMALL_DEFAULTS = {"batch_seconds": 8.0, "bounds": [4.0, 8.0], "steps": 2, "warmup": 1}


@dataclass
class Batch:
    features: torch.Tensor  # (batch, frames, 80)
    lengths: torch.Tensor  # (batch,)
    targets: torch.Tensor  # (batch, tokens)
    target_lengths: torch.Tensor  # (batch,)
    audio_seconds: float  # real (unpadded) audio in the batch

    def to(self, device: str) -> Batch:
        def move(t):
            return t.to(device, non_blocking=True)

        return Batch(
            move(self.features),
            move(self.lengths),
            move(self.targets),
            move(self.target_lengths),
            self.audio_seconds,
        )


def bucket_frames(bound_seconds: float) -> int:
    """Padded frames of a bucket: ``4 m + 3``, so the encoder sees ``m`` frames with ``m`` a multiple of 8."""
    encoder_frames = 8 * math.ceil(bound_seconds * FRAMES_PER_SECOND / 4 / 8)
    return 4 * encoder_frames + 3


def make_batches(
    num_batches: int, batch_seconds: float, bounds: list[float], vocab_size: int, seed: int, pin: bool
) -> list[Batch]:
    """Random utterances (durations ~ N(12 s, 4 s) clipped to the buckets), grouped into bucketed batches."""
    generator = torch.Generator().manual_seed(seed)
    batches: list[Batch] = []
    pending: dict[float, list[float]] = {bound: [] for bound in bounds}
    while len(batches) < num_batches:
        duration = float((torch.randn(1, generator=generator) * 4 + 12).clamp(1.0, bounds[-1]))
        bound = next(b for b in bounds if duration <= b)
        pending[bound].append(duration)
        per_batch = max(1, int(batch_seconds // bound))
        if len(pending[bound]) < per_batch:
            continue
        durations, pending[bound] = pending[bound], []
        frames, max_tokens = bucket_frames(bound), int(bound * TOKENS_PER_SECOND)
        lengths = torch.tensor([int(d * FRAMES_PER_SECOND) for d in durations])
        target_lengths = torch.tensor([max(1, int(d * TOKENS_PER_SECOND)) for d in durations])
        features = torch.randn(len(durations), frames, FEATURE_DIM, generator=generator)
        targets = torch.randint(1, vocab_size, (len(durations), max_tokens), generator=generator)
        tensors = [features, lengths, targets, target_lengths]
        if pin:
            tensors = [t.pin_memory() for t in tensors]
        batches.append(Batch(*tensors, sum(durations)))
    return batches


class FeatureItems(torch.utils.data.Dataset):
    """Utterances of fbank-shaped random features (what a feature cache on disk would give), durations as in
    :func:`make_batches`; ``lengths("duration")`` lets speechkit's dynamic batching bucket them."""

    def __init__(self, count: int, bounds: list[float], vocab_size: int, seed: int):
        generator = torch.Generator().manual_seed(seed)
        self.durations = (torch.randn(count, generator=generator) * 4 + 12).clamp(1.0, bounds[-1]).tolist()
        self.vocab_size, self.seed = vocab_size, seed

    def __len__(self) -> int:
        return len(self.durations)

    def lengths(self, key: str = "duration") -> list:
        return list(self.durations)

    def __getitem__(self, index: int) -> dict:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        duration = self.durations[index]
        frames, tokens = int(duration * FRAMES_PER_SECOND), max(1, int(duration * TOKENS_PER_SECOND))
        return {"features": torch.randn(frames, FEATURE_DIM, generator=generator),
                "tokens": torch.randint(1, self.vocab_size, (tokens,), generator=generator)}


def loader_batches(args, epoch: int):
    """Batches from speechkit's loader (dynamic batching over the buckets, workers, pinned memory)."""
    count = int(args.steps + args.warmup + 4) * max(1, int(args.batch_seconds // 12)) * 2
    loader = make_dataloader(
        FeatureItems(count, args.bounds, args.vocab_size, seed=epoch), "train", seed=epoch,
        dynamic_batching={"max_batch_length": args.batch_seconds, "bucket_boundaries": args.bounds},
        pad_to_multiple=args.pad_multiple, num_workers=args.loader_workers,
        pin_memory=args.device.startswith("cuda"),
    )
    for batch in loader:
        lengths, target_lengths = batch.features.lengths, batch.tokens.lengths
        yield Batch(batch.features.data, lengths, batch.tokens.data, target_lengths,
                    float(lengths.sum()) / FRAMES_PER_SECOND)


def one_batch_per_shape(batches: list[Batch]) -> list[Batch]:
    return list({tuple(b.features.shape): b for b in batches}.values())


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_config(args, d_model: int, dtype_name: str, batches: list[Batch]) -> dict:
    device = args.device
    torch.manual_seed(0)
    encoder = ConformerEncoder(
        FEATURE_DIM, d_model, args.heads, args.layers, 4 * d_model, args.kernel_size, dropout=0.1
    ).to(device)
    head = CTCHead(d_model, args.vocab_size).to(device)
    parameters = list(encoder.parameters()) + list(head.parameters())
    fused = device.startswith("cuda")
    optimizer = torch.optim.AdamW(parameters, lr=1e-4, fused=fused)
    use_bf16 = dtype_name == "bf16"
    device_type = "cuda" if device.startswith("cuda") else "cpu"

    def forward(features, lengths):
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=use_bf16):
            encoded, encoded_lengths = encoder(features, lengths)
            return head(encoded), encoded_lengths

    if args.compile:
        # One graph per (bucket shape, train/inference); forget the previous configuration's graphs.
        torch._dynamo.reset()
        torch._dynamo.config.cache_size_limit = max(
            torch._dynamo.config.cache_size_limit, 4 * len(args.bounds)
        )
        # Encoder + head trace as one graph per bucket shape. The CTC loss stays eager: its internal
        # buffers depend on the target lengths, which a static graph cannot hold.
        mode = "reduce-overhead" if args.cuda_graphs else None
        # speechkit's loader pads to a multiple of frames: more shapes, so let the graph take dynamic ones.
        dynamic = None if args.loader == "real" else False
        forward = torch.compile(
            forward, backend=args.compile_backend, dynamic=dynamic, fullgraph=True, mode=mode
        )

    def train_step(batch: Batch) -> None:
        batch = batch.to(device)
        log_probs, encoded_lengths = forward(batch.features, batch.lengths)
        loss = ctc_loss(log_probs, batch.targets, encoded_lengths, batch.target_lengths)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    # Warm-up: one step per distinct shape, so every compiled graph exists before timing.
    encoder.train()
    if args.loader == "real":
        for batch in itertools.islice(loader_batches(args, epoch=1), args.warmup * 2 * len(args.bounds)):
            train_step(batch)
    else:
        for batch in one_batch_per_shape(batches):
            for _ in range(args.warmup):
                train_step(batch)
    synchronize(device)
    if device_type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    timed = batches[: args.steps]
    if args.loader == "real":  # the loader's waits are part of the timed steps
        timed = []
        start = time.perf_counter()
        for batch in itertools.islice(loader_batches(args, epoch=2), args.steps):
            train_step(batch)
            timed.append(batch)
    else:
        start = time.perf_counter()
        for batch in timed:
            train_step(batch)
    synchronize(device)
    train_seconds = time.perf_counter() - start
    train_audio = sum(b.audio_seconds for b in timed)
    peak_gib = torch.cuda.max_memory_allocated() / 2**30 if device_type == "cuda" else float("nan")
    profiled = {}
    if args.profile:
        flops = step_flops(train_step, timed[0])
        source = (itertools.islice(loader_batches(args, epoch=3), args.profile_steps) if args.loader == "real"
                  else timed[: args.profile_steps])
        profiled = profile_step(train_step, source, device, flops * 1.0, args.peak_tflops)

    encoder.eval()
    with torch.inference_mode():
        for batch in one_batch_per_shape(batches):
            gpu = batch.to(device)
            forward(gpu.features, gpu.lengths)
        synchronize(device)
        start = time.perf_counter()
        for batch in timed:
            gpu = batch.to(device)
            log_probs, encoded_lengths = forward(gpu.features, gpu.lengths)
            ctc_greedy_decode(log_probs, encoded_lengths)
        synchronize(device)
        decode_seconds = time.perf_counter() - start

    padded = sum(b.features.shape[0] * b.features.shape[1] for b in timed) / FRAMES_PER_SECOND
    return {
        "d_model": d_model,
        "params_m": sum(p.numel() for p in parameters) / 1e6,
        "dtype": dtype_name,
        "batch_s": train_audio / len(timed),
        "padding": 1.0 - train_audio / padded,
        "step_s": train_seconds / len(timed),
        "train_audio_per_s": train_audio / train_seconds,
        "decode_rtf": decode_seconds / train_audio,
        "peak_gib": peak_gib,
        **profiled,
    }


def print_table(args, rows: list[dict]) -> None:
    print()
    print(f"command: python {' '.join(sys.argv)}")
    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor()
    print(
        f"device: {args.device} ({device_name or 'cpu'}), torch {torch.__version__}, "
        f"threads {torch.get_num_threads()}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"compile {args.compile}, cuda graphs {args.cuda_graphs}"
    )
    source = f"speechkit's loader ({args.loader_workers} workers)" if args.loader == "real" else "memory"
    print(
        f"model: Conformer-CTC, {args.layers} layers, {args.heads} heads, ffn 4 x d_model, kernel "
        f"{args.kernel_size}, vocab {args.vocab_size}; buckets {args.bounds} s; {args.steps} timed steps; "
        f"batches from {source}"
    )
    header = (
        f"| {'d_model':>7} | {'params':>7} | {'dtype':>5} | {'batch audio':>11} | {'padding':>7} | "
        f"{'step':>8} | {'train audio s/s':>15} | {'decode RTF':>10} | {'peak GiB':>8} |"
    )
    if args.profile:
        header += f" {'kernels/step':>12} | {'TFLOP/s':>8} | {'of bf16 peak':>12} | {'GPU idle':>8} |"
    print(header)
    print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|")
    for row in rows:
        print(
            f"| {row['d_model']:>7} | {row['params_m']:>6.1f}M | {row['dtype']:>5} | "
            f"{row['batch_s']:>9.1f} s | "
            f"{row['padding']:>6.1%} | {row['step_s']:>6.2f} s | {row['train_audio_per_s']:>15.1f} | "
            f"{row['decode_rtf']:>10.4f} | {row['peak_gib']:>8.2f} |"
            + (f" {row['kernels_per_step']:>12.0f} | {row['tflops']:>8.3f} | {row['peak_fraction']:>12.1%} | "
               f"{row['idle']:>8.1%} |" if args.profile else "")
        )


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--d-models", type=int, nargs="+", default=[144, 256])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kernel-size", type=int, default=31)
    parser.add_argument("--vocab-size", type=int, default=256)
    parser.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--batch-seconds", type=float, default=None, help="audio per batch (padded bound)")
    parser.add_argument(
        "--bounds",
        type=float,
        nargs="+",
        default=None,
        help="bucket bounds in seconds (each batch is padded to its bucket's bound)",
    )
    parser.add_argument("--steps", type=int, default=None, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps per batch shape")
    parser.add_argument("--compile", action="store_true", help="torch.compile the step (fixed shapes)")
    parser.add_argument("--compile-backend", default="inductor", help="torch.compile backend")
    parser.add_argument("--cuda-graphs", action="store_true", help="with --compile: capture CUDA graphs")
    parser.add_argument("--tf32", action="store_true", help="allow TF32 matmuls in fp32 runs on CUDA")
    parser.add_argument(
        "--small",
        action="store_true",
        help="quick CPU setting: 8 s batches, buckets 4/8 s, 2 timed steps, 1 warm-up",
    )
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (torch.set_num_threads)")
    parser.add_argument("--loader", choices=["memory", "real"], default="memory",
                        help="batches prepared in memory, or from speechkit's loader (see above)")
    parser.add_argument("--loader-workers", type=int, default=4, help="with --loader real")
    parser.add_argument("--pad-multiple", type=int, default=64, help="with --loader real: frames")
    parser.add_argument("--profile", action="store_true", help="kernels per step, TFLOP/s, GPU idle")
    parser.add_argument("--profile-steps", type=int, default=3)
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="the GPU's dense bf16 peak (known H100/H200/A100 names need none)")
    args = parser.parse_args(argv)
    # --small changes the defaults only; explicit options still win.
    defaults = SMALL_DEFAULTS if args.small else FULL_DEFAULTS
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.bounds = sorted(args.bounds)
    return args


def main(argv=None) -> int:
    print(machine_line(), flush=True)  # the figures below are true of this machine
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
    batches = make_batches(
        args.steps + 2 * len(args.bounds),
        args.batch_seconds,
        args.bounds,
        args.vocab_size,
        seed=0,
        pin=args.device.startswith("cuda"),
    )
    rows = []
    for d_model in args.d_models:
        for dtype_name in args.dtypes:
            row = run_config(args, d_model, dtype_name, batches)
            rows.append(row)
            print(
                f"d_model {d_model} {dtype_name}: {row['train_audio_per_s']:.1f} audio s/s, "
                f"decode RTF {row['decode_rtf']:.4f}",
                flush=True,
            )
    print_table(args, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
