"""Vocoder figures: generation speed (real-time factor) and multi-resolution STFT distance to the original
audio, for the neural vocoder and for Griffin-Lim from the same mel spectrograms, in the same run.

RTF = seconds of computing / seconds of audio made (below 1: faster than real time). The distance is
:func:`speechkit.nn.stft_distances` (spectral convergence, log-magnitude L1; lower is better), averaged over
the utterances. Without ``--model`` the vocoder has random weights of the ``small`` preset (speed only).

Usage:
    python benchmarks/vocoder.py --model results/vocoder-model \
        --manifest data/SynthSpeech/test.json --replacement data_root=data/SynthSpeech --utterances 20
    python benchmarks/vocoder.py --threads 2                     # speed of the small preset only
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.models.vocoder import MelGenerator, MelSpectrogram, griffin_lim  # noqa: E402
from speechkit.nn import stft_distances  # noqa: E402


def load(args) -> tuple:
    """(mel module, generator, list of (time,) waveforms)."""
    if args.model:
        from speechkit.pretrained import Vocoder

        vocoder = Vocoder.from_hparams(args.model)
        mel, generator, load_audio = vocoder.mods["mel"], vocoder.mods["generator"], vocoder.load_audio
    else:
        torch.manual_seed(0)
        mel, generator, load_audio = MelSpectrogram(), MelGenerator.from_preset("small").eval(), None
    if args.manifest:
        from speechkit.data.manifest import load_manifest

        rows = load_manifest(args.manifest, replacements=dict(r.split("=", 1) for r in args.replacement))
        ids = sorted(rows)[:args.utterances]
        if load_audio is None:
            from speechkit.data import read_audio as load_audio
        waves = [load_audio(rows[i]["wav"]) for i in ids]
    else:
        generator_rng = torch.Generator().manual_seed(1)
        waves = [0.1 * torch.randn(int(16000 * 3.0), generator=generator_rng) for _ in range(args.utterances)]
    return mel, generator, waves


def measure(name: str, make, mel, waves: list) -> dict:
    seconds, audio_seconds, sc, logmag = 0.0, 0.0, [], []
    for wav in waves:
        lengths = torch.tensor([wav.shape[0]])
        with torch.no_grad():
            feats, frames = mel(wav.unsqueeze(0), lengths)
            start = time.perf_counter()
            out, _ = make(feats, frames)
            seconds += time.perf_counter() - start
            out = out[:, :wav.shape[0]]
            distance = stft_distances(out, wav.unsqueeze(0), lengths)
        audio_seconds += wav.shape[0] / mel.sample_rate
        sc.append(float(distance["spectral_convergence"][0]))
        logmag.append(float(distance["log_magnitude"][0]))
    return {"name": name, "rtf": seconds / audio_seconds, "sc": sum(sc) / len(sc),
            "logmag": sum(logmag) / len(logmag)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="A Vocoder model folder (default: random weights).")
    parser.add_argument("--manifest", default=None, help="Utterances to resynthesize (default: noise).")
    parser.add_argument("--replacement", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--utterances", type=int, default=10)
    parser.add_argument("--griffin-lim-iterations", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    mel, generator, waves = load(args)
    total = sum(w.shape[0] for w in waves) / mel.sample_rate
    print(f"torch {torch.__version__}, {platform.machine()}, {args.threads} threads, {len(waves)} "
          f"utterances, {total:.1f} s of audio, model: {args.model or 'random small preset'}")
    rows = [measure("vocoder", generator, mel, waves),
            measure(f"Griffin-Lim ({args.griffin_lim_iterations} it.)",
                    lambda f, n: griffin_lim(f, n, mel, iterations=args.griffin_lim_iterations), mel, waves)]
    print("| method | RTF | speed vs Griffin-Lim | spectral convergence | log-magnitude L1 |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['name']} | {row['rtf']:.4f} | {rows[1]['rtf'] / row['rtf']:.2f}x | {row['sc']:.3f} | "
              f"{row['logmag']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
