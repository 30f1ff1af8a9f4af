"""What each of the Whisper decoder's speed levers is worth: speechkit's greedy decoding from encoder states
as it is (``as built``), with one kept lever switched off at a time, with one lever that was tried and not
kept switched on, and transformers' ``generate()``, on the model and audio of ``benchmarks/whisper.py``,
repetitions interleaved (every variant once, then again) so that a change in the machine's load hits all
alike. Every variant's tokens are checked equal to ``generate()``'s first.

Kept levers (each ``-`` variant is the former way):

- ``- values contiguous``: the cross-attention values stay the projection's strided view, so each step's
  product copies them (batch x 1500 x d_model per layer per step);
- ``- k/v one product``: the cross-attention keys and values are projected by two products, not one;
- ``- no log_softmax``: greedy search computes each taken token's log-probability at every step.

Tried, not kept (no effect above the noise of a shared machine):

- ``+ prompt by products``: the prompt's cross-attention by two plain products instead of the fused kernel;
- ``+ inference_mode``: the search under ``torch.inference_mode`` instead of ``torch.no_grad``.

Usage:
    python benchmarks/whisper_levers.py --repeats 2 --tokens 32 --batches 8 1
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from whisper import build, generated_tokens, random_features  # noqa: E402

import speechkit.models.whisper.transcribe as transcribe_module  # noqa: E402
from speechkit.machine import machine_line  # noqa: E402
from speechkit.models.whisper import model as model_module  # noqa: E402
from speechkit.models.whisper.search import greedy_search  # noqa: E402
from speechkit.models.whisper.transcribe import DecodingOptions, WhisperTranscriber  # noqa: E402
from speechkit.pretrained.huggingface.whisper import load_whisper_folder  # noqa: E402

Attention = model_module.Attention
FUSED_PROJECTION, FORWARD = Attention.project_cross_keys_values, Attention.forward


def strided_values(self, states):
    keys, values = FUSED_PROJECTION(self, states)
    strided = torch.empty(values.shape[0], values.shape[2], values.shape[1], values.shape[3]).transpose(1, 2)
    return keys, strided.copy_(values)


def two_products(self, states):
    keys, values = self.project_keys_values(states)
    return keys.transpose(-1, -2).contiguous(), values.contiguous()


def prompt_by_products(self, x, keys, values, mask=None, transposed=False):
    if transposed and mask is None and not self.training and x.shape[1] > 1:
        queries = self.split(self.q_proj(x) * self.scaling)
        out = torch.softmax(queries @ keys, dim=-1) @ values
        return self.out_proj(out.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1))
    return FORWARD(self, x, keys, values, mask, transposed)


def log_softmax_per_step(*args, **kwargs):
    return greedy_search(*args, **{**kwargs, "log_probs": True})


VARIANTS = {  # name -> (cross projection, attention forward, search, under inference mode)
    "as built": (FUSED_PROJECTION, FORWARD, greedy_search, False),
    "- values contiguous": (strided_values, FORWARD, greedy_search, False),
    "- k/v one product": (two_products, FORWARD, greedy_search, False),
    "- no log_softmax": (FUSED_PROJECTION, FORWARD, log_softmax_per_step, False),
    "+ prompt by products": (FUSED_PROJECTION, prompt_by_products, greedy_search, False),
    "+ inference_mode": (FUSED_PROJECTION, FORWARD, greedy_search, True),
}


def decode(transcriber, options, states, variant: str) -> list:
    projection, forward, search, inference = VARIANTS[variant]
    Attention.project_cross_keys_values, Attention.forward = projection, forward
    transcribe_module.greedy_search = search
    transcriber.encode_features = lambda _: states
    try:
        with torch.inference_mode(inference):
            found = transcriber.decode_features(None, ["en"] * len(states), options)
    finally:
        Attention.project_cross_keys_values, Attention.forward = FUSED_PROJECTION, FORWARD
        transcribe_module.greedy_search = greedy_search
    return [t.tokens for t in found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 1])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as folder:
        hf_model = build(folder)
        loaded = load_whisper_folder(folder)
    transcriber = WhisperTranscriber(loaded.model, loaded.generation, None)
    options = DecodingOptions(language="en", max_new_tokens=args.tokens)
    print(machine_line())
    print(f"random Whisper base, greedy from encoder states, {args.tokens} tokens per item, {args.threads} "
          f"thread(s), median of {args.repeats} interleaved repeats")
    header = f"{'batch':>5} | {'variant':<22} {'seconds':>7} {'as built / this':>15} {'tf / this':>9}"
    print(header)
    print("-" * len(header))
    for batch in args.batches:
        features = random_features(batch)
        with torch.no_grad():
            states = loaded.model.encoder(features)
            encoder_outputs = hf_model.model.encoder(features)
        expected = generated_tokens(hf_model, features, args.tokens)
        for variant in VARIANTS:
            got = decode(transcriber, options, states, variant)
            if [row[:len(g)] for row, g in zip(expected, got)] != got:
                raise SystemExit(f"{variant}: tokens differ from transformers'")
        times = {name: [] for name in (*VARIANTS, "transformers")}
        for _ in range(args.repeats):
            for variant in VARIANTS:
                start = time.perf_counter()
                decode(transcriber, options, states, variant)
                times[variant].append(time.perf_counter() - start)
            start = time.perf_counter()
            with torch.no_grad():
                hf_model.generate(encoder_outputs=encoder_outputs, language="en", max_new_tokens=args.tokens)
            times["transformers"].append(time.perf_counter() - start)
        median = {name: statistics.median(values) for name, values in times.items()}
        for name, seconds in median.items():
            print(f"{batch:>5} | {name:<22} {seconds:>7.2f} {median['as built'] / seconds:>14.2f}x "
                  f"{median['transformers'] / seconds:>8.2f}x", flush=True)


if __name__ == "__main__":
    main()
