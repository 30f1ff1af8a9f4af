"""What int8 quantisation (``speechkit export --quantize int8``) costs in quality: WER of a recognizer and
SI-SNR improvement of a separator, PyTorch against the float32 and int8 ONNX graphs, on held-out test sets.

Both models are small and trained here, in a few minutes on one thread, on synthetic data (no corpus is
needed): the recognizer (fbank, per-utterance normalization, a 2-layer bidirectional LSTM, CTC head) reads
"words" of tone letters (``tests/integration/pretrained/tiny_asr.py``: each letter a 10 ms tone, under
white noise at ``--noise-db`` so that it makes errors worth comparing); the separator (Conv-TasNet, the
``small`` preset, 8 kHz) separates two speech-like voices (``speech_like_waveforms``: harmonics of two
fundamentals under formant resonances and syllable envelopes). The figures are these models' figures, not
those of a recipe trained on speech; what the script measures is the change int8 brings to a model that
works, with the same decoding (greedy CTC) and scoring for all three.

Usage:
    python benchmarks/quantize.py                                  # both models, default sizes
    python benchmarks/quantize.py --models separator --steps 400 --test-items 100
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.export import ctc_greedy_numpy, export_graph, load_graph  # noqa: E402
from speechkit.export.graphs import graph_specs, speech_like_waveforms  # noqa: E402
from speechkit.export.quantize import quantize_graph  # noqa: E402
from speechkit.metrics.error_rate import score_utterance, summarize_scores  # noqa: E402
from speechkit.metrics.si_snr import si_snr  # noqa: E402
from tests.integration.pretrained import tiny_asr  # noqa: E402

LETTERS = tiny_asr.SYMBOLS[2:]


def random_text(rng: random.Random) -> str:
    return " ".join("".join(rng.choice(LETTERS) for _ in range(rng.randint(1, 4)))
                    for _ in range(rng.randint(2, 5)))


def recognizer_batch(rng: random.Random, size: int, noise_db: float) -> tuple:
    """``(wavs (B, T), lengths (B,), texts)``: tone words under white noise ``noise_db`` below them (the
    noise drawn from ``rng`` too, so that a seed gives the same test set to every backend)."""
    texts = [random_text(rng) for _ in range(size)]
    waves = [tiny_asr.synthesize(text) for text in texts]
    lengths = torch.tensor([len(w) for w in waves])
    wavs = torch.zeros(size, int(lengths.max()))
    generator = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    for i, w in enumerate(waves):
        level = float(w.pow(2).mean().sqrt()) * 10 ** (-noise_db / 20)
        noise = torch.randn(len(w), generator=generator) * level
        wavs[i, :len(w)] = w + noise
    return wavs, lengths, texts


def build_recognizer():
    from speechkit.features import Fbank, UtteranceNormalization
    from speechkit.models import CTCHead, RecurrentEncoder
    from speechkit.pretrained.interfaces import EncoderASR

    modules = {"compute_features": Fbank(n_mels=40), "normalize": UtteranceNormalization(),
               "encoder": RecurrentEncoder(40, d_model=64, hidden_size=64, num_layers=2, stride=2,
                                           upsample=2),
               "ctc_head": CTCHead(64, len(tiny_asr.SYMBOLS))}
    hparams = {"modules": modules, "sample_rate": 16000, "encoder_pipeline": list(modules),
               "tokenizer": tiny_asr.CharTokenizer(tiny_asr.SYMBOLS)}
    return EncoderASR(modules, hparams)


def train_recognizer(args) -> tuple:
    torch.manual_seed(0)
    rng = random.Random(0)
    interface = build_recognizer()
    spec = graph_specs(interface)[0]
    model = spec.module.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(args.steps):
        wavs, lengths, texts = recognizer_batch(rng, 16, args.noise_db)
        log_probs, frames = model(wavs, lengths)
        targets = [torch.tensor([tiny_asr.SYMBOLS.index(c) for c in text]) for text in texts]
        loss = torch.nn.functional.ctc_loss(log_probs.transpose(0, 1), torch.cat(targets), frames,
                                            torch.tensor([len(t) for t in targets]), zero_infinity=True)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"  recognizer step {step}: CTC loss {loss.item():.3f}", flush=True)
    model.eval()
    return spec, random.Random(12345)


def score_recognizer(run, rng_seed: int, items: int, noise_db: float) -> float:
    rng = random.Random(rng_seed)
    scores = {}
    for start in range(0, items, 8):
        wavs, lengths, texts = recognizer_batch(rng, min(8, items - start), noise_db)
        log_probs, frames = run(wavs, lengths)
        for i, ids in enumerate(ctc_greedy_numpy(log_probs.numpy(), frames.numpy(), 0)):
            hypothesis = "".join(tiny_asr.SYMBOLS[t] for t in ids).split()
            scores[start + i] = score_utterance(texts[i].split(), hypothesis)
    return summarize_scores(scores)["WER"]


def separator_batch(generator: torch.Generator, size: int, samples: int) -> tuple:
    """``(mixtures (B, T), sources (B, 2, T))`` of two speech-like voices at 8 kHz."""
    with torch.random.fork_rng():
        torch.manual_seed(int(torch.randint(0, 2 ** 31, (1,), generator=generator)))
        sources = torch.stack([speech_like_waveforms([samples] * size, rate=8000) for _ in range(2)], 1)
    return sources.sum(1), sources


def train_separator(args):
    from speechkit.models import ConvTasNet
    from speechkit.nn.pit import pit_si_snr_loss
    from speechkit.pretrained.separation import SeparationModel

    torch.manual_seed(0)
    separator = ConvTasNet.from_preset("small", num_speakers=2)
    modules = {"separator": separator}
    interface = SeparationModel(modules, {"modules": modules, "sample_rate": 8000, "num_speakers": 2})
    spec = graph_specs(interface)[0]
    optimizer = torch.optim.Adam(separator.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    separator.train()
    for step in range(args.steps):
        mixtures, sources = separator_batch(generator, 4, 4000)
        loss = pit_si_snr_loss(separator(mixtures), sources)[0]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"  separator step {step}: loss {loss.item():.2f} (negative SI-SNR, dB)", flush=True)
    spec.module.eval()
    return spec


def score_separator(run, items: int) -> float:
    """Mean SI-SNR improvement (dB) under the best assignment, over ``items`` 1 s test mixtures."""
    generator = torch.Generator().manual_seed(777)
    improvements = []
    for _ in range(0, items, 4):
        mixtures, sources = separator_batch(generator, 4, 8000)
        estimates = run(mixtures, torch.full((4,), 8000))
        estimates = estimates[0] if isinstance(estimates, tuple) else estimates
        for est, ref, mix in zip(estimates, sources, mixtures):
            pairs = [(0, 1), (1, 0)]
            best = max(float(si_snr(est[list(p)], ref).mean()) for p in pairs)
            improvements.append(best - float(si_snr(mix.expand(2, -1), ref).mean()))
    return sum(improvements) / len(improvements)


def runners(spec, folder: Path) -> dict:
    """backend -> ``run(x, lengths)``: PyTorch, the float32 graph and the int8 graph."""
    fp32, int8 = folder / f"{spec.name}.onnx", folder / f"{spec.name}.int8.onnx"
    export_graph(spec, fp32, "onnx")
    snr = quantize_graph(spec, fp32, int8)["min_snr_db"]
    print(f"  {spec.name}: int8 graph checked, signal-to-error against PyTorch at least {snr:.1f} dB")

    def eager(x, lengths):
        with torch.no_grad():
            return spec.module(x, lengths)

    return {"PyTorch": eager,
            "onnxruntime float32": load_graph(fp32, "onnx", spec.input_names, spec.output_names),
            "onnxruntime int8": load_graph(int8, "onnx", spec.input_names, spec.output_names)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["recognizer", "separator"],
                        choices=["recognizer", "separator"])
    parser.add_argument("--steps", type=int, default=300, help="Training steps per model.")
    parser.add_argument("--test-items", type=int, default=200)
    parser.add_argument("--noise-db", type=float, default=3.0,
                        help="Tone-to-noise ratio of the recognizer's audio (dB).")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"torch {torch.__version__}; one thread; {args.steps} training steps, {args.test_items} test items")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if "recognizer" in args.models:
            start = time.time()
            spec, _ = train_recognizer(args)
            print(f"  trained in {time.time() - start:.0f} s", flush=True)
            for backend, run in runners(spec, Path(tmp)).items():
                rows.append(("recognizer (WER %, lower is better)", backend,
                             score_recognizer(run, 12345, args.test_items, args.noise_db)))
        if "separator" in args.models:
            start = time.time()
            spec = train_separator(args)
            print(f"  trained in {time.time() - start:.0f} s", flush=True)
            for backend, run in runners(spec, Path(tmp)).items():
                rows.append(("separator (SI-SNR improvement dB, higher is better)", backend,
                             score_separator(run, args.test_items)))
    print("| model (metric) | backend | score | change vs PyTorch |")
    print("| --- | --- | --- | --- |")
    reference = {}
    for model, backend, score in rows:
        reference.setdefault(model, score)
        print(f"| {model} | {backend} | {score:.2f} | {score - reference[model]:+.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
