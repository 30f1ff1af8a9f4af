"""Vocoder figures: generation speed (real-time factor) and multi-resolution STFT distance to the original
audio, for the neural vocoder and for Griffin-Lim from the same mel spectrograms, in the same run.

RTF = seconds of computing / seconds of audio made (below 1: faster than real time). The distance is
:func:`speechkit.nn.stft_distances` (spectral convergence, log-magnitude L1; lower is better), averaged over
the utterances. Without ``--model`` the vocoder has random weights of the ``small`` preset of
``--generator`` (``istft``: ISTFTGenerator, ``mel``: MelGenerator; speed only).

Usage:
    python benchmarks/vocoder.py --model results/vocoder-model \
        --manifest data/SynthSpeech/test.json --replacement data_root=data/SynthSpeech --utterances 20
    python benchmarks/vocoder.py --threads 2 --generator mel     # speed of a small preset only

``--write DIR`` also writes both resynthesized versions (``DIR/vocoder/<id>.wav``, ``DIR/griffin_lim/...``)
with manifests ``DIR/vocoder.json`` and ``DIR/griffin_lim.json`` that keep every other field of the input rows
(the transcript included), ready for ``speechkit infer ASR-MODEL DIR/vocoder.json --text-field text``.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.machine import machine_line
from speechkit.models import ISTFTGenerator, MelGenerator, MelSpectrogram, griffin_lim  # noqa: E402
from speechkit.nn import stft_distances  # noqa: E402


def load(args) -> tuple:
    """(mel module, generator, list of (time,) waveforms, {id: manifest row})."""
    if args.model:
        from speechkit.pretrained import Vocoder

        vocoder = Vocoder.from_hparams(args.model)
        mel, generator, load_audio = vocoder.mods["mel"], vocoder.mods["generator"], vocoder.load_audio
    else:
        torch.manual_seed(0)
        kind = {"istft": ISTFTGenerator, "mel": MelGenerator}[args.generator]
        mel, generator, load_audio = MelSpectrogram(), kind.from_preset("small").eval(), None
    if args.manifest:
        from speechkit.data.manifest import load_manifest

        rows = load_manifest(args.manifest, replacements=dict(r.split("=", 1) for r in args.replacement))
        ids = sorted(rows)[:args.utterances]
        if load_audio is None:
            from speechkit.data import read_audio as load_audio
        waves = [load_audio(rows[i]["wav"]) for i in ids]
        rows = {i: rows[i] for i in ids}
    else:
        rows = {}
        generator_rng = torch.Generator().manual_seed(1)
        waves = [0.1 * torch.randn(int(16000 * 3.0), generator=generator_rng) for _ in range(args.utterances)]
    return mel, generator, waves, rows


def measure(name: str, make, mel, waves: list, write_to=None) -> dict:
    seconds, audio_seconds, sc, logmag = 0.0, 0.0, [], []
    for wav in waves:
        lengths = torch.tensor([wav.shape[0]])
        with torch.no_grad():
            feats, frames = mel(wav.unsqueeze(0), lengths)
            start = time.perf_counter()
            out, _ = make(feats, frames)
            seconds += time.perf_counter() - start
            out = out[:, :wav.shape[0]]
            if write_to is not None:
                write_to.append(out[0])
            distance = stft_distances(out, wav.unsqueeze(0), lengths)
        audio_seconds += wav.shape[0] / mel.sample_rate
        sc.append(float(distance["spectral_convergence"][0]))
        logmag.append(float(distance["log_magnitude"][0]))
    return {"name": name, "rtf": seconds / audio_seconds, "sc": sum(sc) / len(sc),
            "logmag": sum(logmag) / len(logmag)}


def main(argv=None) -> int:
    print(machine_line(), flush=True)  # the figures below are true of this machine
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="A Vocoder model folder (default: random weights).")
    parser.add_argument("--generator", choices=("istft", "mel"), default="istft",
                        help="The random-weight generator's kind when no --model is given.")
    parser.add_argument("--manifest", default=None, help="Utterances to resynthesize (default: noise).")
    parser.add_argument("--replacement", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--utterances", type=int, default=10)
    parser.add_argument("--griffin-lim-iterations", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--write", default=None, help="Folder for the resynthesized WAVs and manifests.")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    mel, generator, waves, rows = load(args)
    total = sum(w.shape[0] for w in waves) / mel.sample_rate
    model = args.model or f"random small {args.generator} preset"
    print(f"torch {torch.__version__}, {platform.machine()}, {args.threads} threads, {len(waves)} "
          f"utterances, {total:.1f} s of audio, model: {model}")
    outputs = {"vocoder": [], "griffin_lim": []}
    def baseline(feats, frames):
        return griffin_lim(feats, frames, mel, iterations=args.griffin_lim_iterations)

    results = [measure("vocoder", generator, mel, waves, outputs["vocoder"]),
               measure(f"Griffin-Lim ({args.griffin_lim_iterations} it.)", baseline, mel, waves,
                       outputs["griffin_lim"])]
    print("| method | RTF | speed vs Griffin-Lim | spectral convergence | log-magnitude L1 |")
    print("| --- | --- | --- | --- | --- |")
    for row in results:
        speed = results[1]["rtf"] / row["rtf"]
        print(f"| {row['name']} | {row['rtf']:.4f} | {speed:.2f}x | {row['sc']:.3f} | {row['logmag']:.3f} |")
    if args.write and rows:
        write_versions(Path(args.write), rows, outputs, mel.sample_rate)
    return 0


def write_versions(folder: Path, rows: dict, outputs: dict, rate: int) -> None:
    """Each version's WAVs and a manifest keeping the input rows' other fields (e.g. the transcript)."""
    import json

    from speechkit.data import audio

    for version, wavs in outputs.items():
        (folder / version).mkdir(parents=True, exist_ok=True)
        manifest = {}
        for (item_id, row), wav in zip(rows.items(), wavs):
            path = folder / version / f"{item_id}.wav"
            audio.write(str(path), wav.clamp(-1.0, 1.0), rate)
            manifest[item_id] = {**row, "wav": str(path.resolve()), "duration": wav.shape[0] / rate}
        (folder / f"{version}.json").write_text(json.dumps(manifest, indent=1) + "\n")
        print(f"wrote {folder / f'{version}.json'}")


if __name__ == "__main__":
    sys.exit(main())
