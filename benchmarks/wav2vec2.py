"""wav2vec 2.0 pretraining throughput (seconds of audio per second): speechkit against transformers'
``Wav2Vec2ForPreTraining`` at the same configuration, weights and batch, in the same run.

A step is what a pretraining step costs: drawing the masks and distractors, forward (feature encoder,
masking, Transformer, quantizer, contrastive and diversity losses), backward and an AdamW update; for bf16
both run under the same autocast. transformers takes its masks and distractors from its own helpers
(``_compute_mask_indices``, ``_sample_negative_indices``), as its pretraining example does; group-norm
models get no attention mask there, as its documentation asks, so both see the same padded batch.

Usage:
    python benchmarks/wav2vec2.py                                 # small and BASE, fp32 and bf16, CPU
    python benchmarks/wav2vec2.py --configs small --dtypes fp32 --steps 5
    python benchmarks/wav2vec2.py --device cuda --batch-seconds 60 --steps 10
"""
from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Pretraining  # noqa: E402
from speechkit.pretrained.huggingface_wav2vec2 import (  # noqa: E402
    config_to_huggingface,
    state_dict_to_huggingface,
)

RATE = 16000


def make_batch(seconds: float, utterance_seconds: float, seed: int) -> tuple:
    """Utterances of about ``utterance_seconds`` (within 10%) filling ``seconds`` of audio."""
    generator = torch.Generator().manual_seed(seed)
    count = max(1, round(seconds / utterance_seconds))
    longest = int(utterance_seconds * RATE)
    lengths = longest - torch.randint(0, longest // 10 + 1, (count,), generator=generator)
    lengths[0] = longest
    wav = torch.randn(count, longest, generator=generator) * (torch.arange(longest) < lengths[:, None])
    return wav, lengths


def speechkit_step(model, optimizer, wav, lengths, autocast):
    with autocast():
        loss = model(wav, lengths).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def transformers_step(model, optimizer, wav, lengths, autocast):
    from transformers.models.wav2vec2.modeling_wav2vec2 import (
        _compute_mask_indices,
        _sample_negative_indices,
    )

    config = model.config
    frames = int(model._get_feat_extract_output_lengths(wav.shape[1]))
    mask = _compute_mask_indices((wav.shape[0], frames), config.mask_time_prob, config.mask_time_length,
                                 min_masks=config.mask_time_min_masks)
    negatives = _sample_negative_indices((wav.shape[0], frames), config.num_negatives, mask)
    mask = torch.tensor(mask, device=wav.device, dtype=torch.bool)
    negatives = torch.tensor(negatives, device=wav.device, dtype=torch.long)
    with autocast():
        loss = model(wav, mask_time_indices=mask, sampled_negative_indices=negatives).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def interleaved_throughputs(steps_and_models, wav, lengths, autocast, steps: int, warmup: int,
                            device) -> list:
    """Audio seconds per second of each (step, model), from the median of ``steps`` timed steps taken in
    turn (one of each, then again): a load change on the host hits both alike, so their ratio holds."""
    optimizers = [torch.optim.AdamW(model.parameters(), lr=1e-5) for _, model in steps_and_models]
    times = [[] for _ in steps_and_models]
    for index in range(warmup + steps):
        for (step, model), optimizer, taken in zip(steps_and_models, optimizers, times):
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            step(model, optimizer, wav, lengths, autocast)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if index >= warmup:
                taken.append(time.perf_counter() - start)
    audio = float(lengths.sum()) / RATE
    return [audio / statistics.median(taken) for taken in times]


def build_pair(config: Wav2Vec2Config, device):
    """speechkit's model and transformers' with the same weights."""
    import transformers

    torch.manual_seed(0)
    ours = Wav2Vec2Pretraining(config).to(device).train()
    theirs = transformers.Wav2Vec2ForPreTraining(
        transformers.Wav2Vec2Config(**config_to_huggingface(config, "Wav2Vec2ForPreTraining")))
    missing, unexpected = theirs.load_state_dict(state_dict_to_huggingface(ours), strict=False)
    if missing or unexpected:
        raise RuntimeError(f"weights do not map: missing {missing[:3]}, unexpected {unexpected[:3]}")
    return ours, theirs.to(device).train()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="small,base", help="presets to measure (small, base, large)")
    parser.add_argument("--dtypes", default="fp32,bf16", help="fp32 and/or bf16 (autocast)")
    parser.add_argument("--batch-seconds", type=float, default=20.0,
                        help="seconds of audio per batch (the pretraining recipe's max_tokens)")
    parser.add_argument("--utterance-seconds", type=float, default=4.0)
    parser.add_argument("--steps", type=int, default=5, help="timed steps of each, taken in turn")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tiny", action="store_true", help="a 1-layer model of width 32 (for the tests)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    wav, lengths = make_batch(args.batch_seconds, args.utterance_seconds, seed=0)
    wav, lengths = wav.to(device), lengths.to(device)
    print(f"# torch {torch.__version__}, {platform.machine()}, device {device}, {torch.get_num_threads()} "
          f"threads; batch {len(lengths)} x {args.utterance_seconds:g} s = {float(lengths.sum()) / RATE:.1f} "
          f"s of audio; median of {args.steps} steps taken in turn after {args.warmup}")
    print("| config | params | dtype | speechkit audio s/s | transformers audio s/s | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.configs.split(","):
        config = Wav2Vec2Config.preset(name)
        if args.tiny:
            config = config.replace(conv_channels=(32,) * 7, d_model=32, num_layers=1, num_heads=2,
                                    ffn_dim=64, pos_conv_kernel=8, pos_conv_groups=4, codebook_entries=8,
                                    codevector_dim=16, final_dim=16, num_negatives=10)
        ours, theirs = build_pair(config, device)
        params = sum(p.numel() for p in ours.parameters()) / 1e6
        for dtype in args.dtypes.split(","):
            if dtype not in ("fp32", "bf16"):
                raise SystemExit(f"unknown dtype {dtype!r}: use fp32 or bf16")

            def autocast(dtype=dtype):
                if dtype == "fp32":
                    return contextlib.nullcontext()
                return torch.autocast(device.type, dtype=torch.bfloat16)

            rates = interleaved_throughputs(((speechkit_step, ours), (transformers_step, theirs)), wav,
                                            lengths, autocast, args.steps, args.warmup, device)
            print(f"| {name} | {params:.1f} M | {dtype} | {rates[0]:.1f} | {rates[1]:.1f} | "
                  f"{rates[0] / rates[1]:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
