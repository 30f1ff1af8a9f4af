"""Conv-TasNet speed: training throughput (seconds of mixture audio per second) and separation real-time
factor, for the ``small`` and ``paper`` presets, fp32 and bf16, beside the alternatives in the same run.

Alternatives, same sizes and weights layout:
  * ``torchaudio``: ``torchaudio.models.ConvTasNet`` with the same configuration (sizes, non-causal, global
    layer norm, skip connections of B channels, no residual output on the last block, the same mask
    activation), when a torchaudio release matching the installed torch is installed; the table says why it
    is absent otherwise. ``benchmarks/peer_env.sh`` builds an environment with a torch that a torchaudio
    release was built for. The parameter shapes are checked to be the same; what still differs is printed
    (``TORCHAUDIO_DIFFERENCES``).
  * ``conv1d``: speechkit's model with PyTorch's dilated depthwise ``nn.Conv1d`` instead of its shifted-sum
    depthwise convolution (the obvious way to write it).

Usage:
    OMP_NUM_THREADS=1 $(bash benchmarks/peer_env.sh) benchmarks/separation.py   # beside torchaudio
    python benchmarks/separation.py                          # small and paper, fp32 and bf16, 2 CPU cores
    python benchmarks/separation.py --presets small --batch 4 --seconds 2 --steps 5 --device cuda
"""
from __future__ import annotations

import argparse
import importlib.metadata
import platform
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.machine import machine_line
from speechkit.models.conv_tasnet import PRESETS, ConvTasNet  # noqa: E402
from speechkit.nn.pit import pit_si_snr_loss  # noqa: E402


def with_conv1d_depthwise(model: ConvTasNet) -> ConvTasNet:
    """The same model (same weights) with ``nn.Conv1d`` depthwise convolutions."""
    for block in model.blocks:
        old = block.depthwise
        conv = nn.Conv1d(old.weight.shape[0], old.weight.shape[0], old.kernel, dilation=old.dilation,
                         padding=old.dilation * (old.kernel - 1) // 2, groups=old.weight.shape[0])
        conv.load_state_dict(old.state_dict())
        block.depthwise = conv
    return model


#: What differs between torchaudio's ConvTasNet and speechkit's for the same sizes (both are non-causal, both
#: normalize with a global layer norm: torchaudio's GroupNorm(1, C) is gLN with a per-channel affine map).
TORCHAUDIO_DIFFERENCES = (
    "torchaudio differs only in: no ReLU on the encoder output; the mixture zero-padded by L/2 on both "
    "sides (two more frames); no length masks (gLN statistics over the whole padded batch item, which "
    "speechkit takes over the valid frames only, for batch invariance)")


def same_parameter_shapes(ours: nn.Module, theirs: nn.Module) -> bool:
    """Whether both models hold the same multiset of parameter shapes (gLN's (1, C, 1) counted as (C,))."""
    def shapes(model):
        return sorted(tuple(s for s in p.shape if s != 1) for p in model.parameters())
    return shapes(ours) == shapes(theirs)


def torchaudio_model(preset: str, speakers: int, mask_activation: str):
    """torchaudio's ConvTasNet of the same configuration, or the reason it cannot run here."""
    try:
        version = importlib.metadata.version("torchaudio")
    except importlib.metadata.PackageNotFoundError:
        return None, f"not installed (no torchaudio release for torch {torch.__version__.split('+')[0]})"
    if version.split("+")[0].rsplit(".", 1)[0] != torch.__version__.split("+")[0].rsplit(".", 1)[0]:
        return None, f"torchaudio {version} does not match torch {torch.__version__}"
    from torchaudio.models import ConvTasNet as TorchaudioConvTasNet

    p = PRESETS[preset]
    model = TorchaudioConvTasNet(num_sources=speakers, enc_kernel_size=p["kernel_size"],
                                 enc_num_feats=p["enc_dim"], msk_kernel_size=p["conv_kernel"],
                                 msk_num_feats=p["bottleneck_dim"], msk_num_hidden_feats=p["hidden_dim"],
                                 msk_num_layers=p["blocks_per_repeat"], msk_num_stacks=p["repeats"],
                                 msk_activate=mask_activation)
    return model, ""


def call(model, mixture, lengths, takes_lengths: bool):
    if takes_lengths:
        return model(mixture, lengths)
    out = model(mixture.unsqueeze(1))  # torchaudio: (batch, 1, time) -> (batch, sources, time)
    return out[..., : mixture.shape[-1]]


def measure(rows: list, args, dtype: str, device: torch.device) -> list:
    """(training audio seconds per second, separation real-time factor) for each ``(model, takes_lengths)``.

    The implementations take turns step by step (one training step of each, then the next round), so a change
    in the load of a shared host reaches all of them alike instead of favouring whichever ran at a quiet time.
    """
    rate = 8000
    generator = torch.Generator().manual_seed(0)
    mixture = torch.randn(args.batch, int(args.seconds * rate), generator=generator).to(device)
    targets = torch.randn(args.batch, args.speakers, mixture.shape[1], generator=generator).to(device)
    lengths = torch.full((args.batch,), mixture.shape[1], dtype=torch.int64, device=device)
    if args.padded:  # every item but the first 3/4 long: speechkit's masked path (torchaudio has no lengths)
        lengths[1:] = mixture.shape[1] * 3 // 4
    models = [model.to(device) for model, _ in rows]
    optimizers = [torch.optim.Adam(model.parameters(), lr=1e-3) for model in models]
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == "bf16")
    audio_seconds = args.steps * args.batch * args.seconds

    def timed(work, index: int) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        work(index)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    def train_step(index: int):
        model, takes_lengths = models[index], rows[index][1]
        with autocast:
            loss, _ = pit_si_snr_loss(call(model, mixture, lengths, takes_lengths).float(), targets, lengths)
        optimizers[index].zero_grad(set_to_none=True)
        loss.backward()
        optimizers[index].step()

    def separate(index: int):
        with torch.no_grad(), autocast:
            call(models[index], mixture, lengths, rows[index][1])

    train_time, separate_time = [0.0] * len(rows), [0.0] * len(rows)
    for model in models:
        model.train()
    for step in range(args.warmup + args.steps):
        for index in range(len(rows)):
            spent = timed(train_step, index)
            train_time[index] += spent if step >= args.warmup else 0.0
    for model in models:
        model.eval()
    for step in range(args.warmup + args.steps):
        for index in range(len(rows)):
            spent = timed(separate, index)
            separate_time[index] += spent if step >= args.warmup else 0.0
    return [(audio_seconds / train, spent / audio_seconds) for train, spent in zip(train_time, separate_time)]


def main(argv=None) -> int:
    print(machine_line(), flush=True)  # the figures below are true of this machine
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["small", "paper"], choices=sorted(PRESETS))
    parser.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--speakers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=1.0, help="mixture length, 8 kHz")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--padded", action="store_true",
                        help="items after the first 3/4 long (padded batches: evaluation, dynamic batches)")
    parser.add_argument("--no-conv1d", action="store_true", help="skip the nn.Conv1d alternative")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {device}, "
          f"{torch.get_num_threads()} threads; batch {args.batch} x {args.seconds} s at 8 kHz"
          + (", items after the first 3/4 long" if args.padded else ""))
    print("| preset | dtype | implementation | parameters | train audio s/s | separation RTF | "
          "train speed vs speechkit | separation time vs speechkit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    compared = False
    for preset in args.presets:
        for dtype in args.dtypes:
            torch.manual_seed(0)
            ours = ConvTasNet.from_preset(preset, num_speakers=args.speakers)
            rows = [("speechkit", ours, True)]
            if not args.no_conv1d:
                torch.manual_seed(0)
                rows.append(("conv1d", with_conv1d_depthwise(ConvTasNet.from_preset(preset, args.speakers)),
                             True))
            reference, reason = torchaudio_model(preset, args.speakers, ours.mask_activation)
            if reference is not None:
                if not same_parameter_shapes(ours, reference):
                    raise SystemExit(f"torchaudio's {preset} model has other parameter shapes than ours")
                rows.append(("torchaudio", reference, False))
                compared = True
            results = measure([(model, takes) for _, model, takes in rows], args, dtype, device)
            base_train, base_rtf = results[0]
            for (name, model, _), (train, rtf) in zip(rows, results):
                count = sum(p.numel() for p in model.parameters())
                print(f"| {preset} | {dtype} | {name} | {count:,} | {train:.2f} | {rtf:.4f} | "
                      f"{train / base_train:.2f} | {rtf / base_rtf:.2f} |", flush=True)
            if reference is None:
                print(f"| {preset} | {dtype} | torchaudio | - | - | - | - | {reason} |", flush=True)
    if compared:
        print(f"\nSame sizes and parameter shapes; {TORCHAUDIO_DIFFERENCES}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
