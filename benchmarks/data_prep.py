"""What bringing your own audio costs: on-the-fly conversion against pre-converted files, per training step.

The template's default data path reads each batch in the training process (``num_workers: 0``), so reading and
converting audio adds to every step. This script times, on the same batches, interleaved:

- loading a batch (decode + the audio policy) from pre-converted 16 kHz mono FLAC (``speechkit data
  convert``), from 48 kHz stereo FLAC and from 48 kHz stereo MP3 (a Common Voice clip) converted on the fly;
- one training step of the speech recognition template's model (``templates/.../ASR.yaml``: filterbank,
  per-utterance normalization, recurrent encoder, CTC head and loss, backward, AdamW), on those batches;

and prints load time, step time and their ratio. It also times ``speechkit data convert`` per hour of audio
and, with ``--quality``, the resampler of the audio policy against ``resample``'s Hann defaults (folding of
tones above the new Nyquist frequency, passband error, CPU cost).

Usage:
    python benchmarks/data_prep.py                 # about a minute on 2 CPU cores
    python benchmarks/data_prep.py --quality       # and the resampler table
    python benchmarks/data_prep.py --tiny          # seconds: a tiny model and 4 batches (what the test runs)
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from speechkit.data.audio_policy import AudioPolicy  # noqa: E402
from speechkit.data.batch import PaddedBatch  # noqa: E402
from speechkit.data.convert import convert_manifest  # noqa: E402
from speechkit.data.resample import POLICY_FILTER, resample  # noqa: E402
from speechkit.hparams import load_hparams  # noqa: E402
from speechkit.machine import machine_line  # noqa: E402
from speechkit.nn.losses import ctc_loss  # noqa: E402

MODEL_YAML = ROOT / "templates" / "speech_recognition" / "ASR" / "hparams" / "ASR.yaml"
TINY = {"d_model": 32, "rnn_hidden_size": 16, "num_layers": 1}


def speech_like(rng: np.random.Generator, seconds: float, rate: int) -> np.ndarray:
    """(time, 2) float32: harmonics of a wandering pitch with noise up to 24 kHz (a full-band recording)."""
    t = np.arange(int(seconds * rate)) / rate
    pitch = 120 + 40 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 30)) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
    left = 0.1 * voiced + 0.01 * rng.standard_normal(t.size)
    right = 0.8 * left + 0.01 * rng.standard_normal(t.size)
    return np.stack([left, right], axis=1).astype(np.float32)


def write_sources(folder: Path, count: int, seed: int = 0) -> dict:
    """48 kHz stereo FLAC and MP3 copies of ``count`` utterances of 1.5-4 s; manifests ``{name: path}``."""
    rng = np.random.default_rng(seed)
    manifests = {}
    rows = {"flac48": {}, "mp348": {}}
    for index in range(count):
        seconds = float(rng.uniform(1.5, 4.0))
        wave = speech_like(rng, seconds, 48000)
        for kind, ext in (("flac48", "flac"), ("mp348", "mp3")):
            path = folder / kind / f"u{index:03d}.{ext}"
            path.parent.mkdir(parents=True, exist_ok=True)
            soundfile.write(path, wave, 48000)
            rows[kind][f"u{index:03d}"] = {"wav": str(path), "duration": seconds}
    for kind, kind_rows in rows.items():
        manifests[kind] = folder / f"{kind}.json"
        manifests[kind].write_text(json.dumps(kind_rows))
    return manifests


def batches_of(rows: dict, max_seconds: float) -> list:
    """Ids in batches of at most ``max_seconds`` of padded audio (the template's dynamic batches)."""
    ids = sorted(rows, key=lambda i: rows[i]["duration"])
    batches, current = [], []
    for item_id in ids:
        if current and (len(current) + 1) * rows[item_id]["duration"] > max_seconds:
            batches.append(current)
            current = []
        current.append(item_id)
    return batches + ([current] if current else [])


def build_model(tiny: bool):
    model = load_hparams(MODEL_YAML, TINY if tiny else {})
    modules = torch.nn.ModuleDict({"encoder": model["encoder"], "ctc_head": model["ctc_head"]})
    optimizer = torch.optim.AdamW(modules.parameters(), lr=1e-3)
    return model, modules, optimizer


def train_step(model, modules, optimizer, wavs, lengths, rng) -> None:
    feats, feat_lengths = model["normalize"](*model["compute_features"](wavs, lengths))
    encoded, encoded_lengths = modules["encoder"](feats, feat_lengths)
    log_probs = modules["ctc_head"](encoded)
    token_lengths = (lengths // 1600).clamp(min=1)  # ~10 characters a second, as speech has
    tokens = torch.from_numpy(rng.integers(4, model["vocab_size"], (len(lengths), int(token_lengths.max()))))
    loss = ctc_loss(log_probs, tokens, encoded_lengths, token_lengths, blank_index=model["blank_index"])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def load_batch(policy: AudioPolicy, rows: dict, ids: list) -> tuple:
    batch = PaddedBatch([{"id": i, "sig": policy.read(rows[i]["wav"])} for i in ids])
    return batch.sig


def measure_steps(manifests: dict, batch_seconds: float, rounds: int, tiny: bool) -> list:
    policy = AudioPolicy(16000)
    rows = {name: json.loads(Path(path).read_text()) for name, path in manifests.items()}
    for name, kind_rows in rows.items():  # $data_root of the converted manifest
        for row in kind_rows.values():
            row["wav"] = row["wav"].replace("$data_root", str(Path(manifests[name]).parent))
    batches = batches_of(rows["flac16"], batch_seconds)
    model, modules, optimizer = build_model(tiny)
    rng = np.random.default_rng(0)
    load_times = {name: [] for name in rows}
    step_times = []
    train_step(model, modules, optimizer, *load_batch(policy, rows["flac16"], batches[0]), rng)  # warm-up
    for name in rows:
        load_batch(policy, rows[name], batches[0])  # filter banks built, files in the page cache
    for round_index in range(rounds):
        for batch_index, ids in enumerate(batches):
            order = list(rows)
            if (round_index + batch_index) % 2:
                order.reverse()  # interleaved, alternating order: drifts of a shared machine hit all alike
            for name in order:
                started = time.perf_counter()
                wavs, lengths = load_batch(policy, rows[name], ids)
                load_times[name].append(time.perf_counter() - started)
            started = time.perf_counter()
            train_step(model, modules, optimizer, wavs, lengths, rng)
            step_times.append(time.perf_counter() - started)
    step = statistics.median(step_times)
    table = []
    for name, label in (("flac16", "16 kHz mono FLAC (data convert)"),
                        ("flac48", "48 kHz stereo FLAC, on the fly"),
                        ("mp348", "48 kHz stereo MP3, on the fly")):
        load = statistics.median(load_times[name])
        table.append((label, load, step, load / step))
    return table, len(batches), sum(len(b) for b in batches)


def measure_convert(manifests: dict, dest: Path) -> list:
    policy = AudioPolicy(16000)
    out = []
    for name, label in (("flac48", "48 kHz stereo FLAC"), ("mp348", "48 kHz stereo MP3")):
        started = time.perf_counter()
        report = convert_manifest(str(manifests[name]), str(dest / name), policy, num_workers=1)
        elapsed = time.perf_counter() - started
        out.append((label, report.seconds, elapsed, elapsed / (report.seconds / 3600)))
    return out


def resampler_quality() -> list:
    """Rows (settings, worst fold-back of tones 8.8-23.5 kHz in dB, worst passband error up to 7 kHz, ms of
    CPU per second of audio) for 48 kHz -> 16 kHz."""
    rows = []
    for label, options in (("policy: Kaiser, 32 crossings, rolloff 0.96", POLICY_FILTER),
                           ("resample() defaults: Hann, 6 crossings, rolloff 0.99", {})):
        def sine(freq, rate, n):
            return torch.sin(2 * math.pi * freq * torch.arange(n, dtype=torch.float64) / rate)

        folded = max(resample(sine(f, 48000, 48000), 48000, 16000, **options)[800:-800].abs().max().item()
                     for f in np.linspace(8800, 23500, 20))
        passband = max((resample(sine(f, 48000, 48000), 48000, 16000, **options)
                        - sine(f, 16000, 16000))[800:-800].abs().max().item()
                       for f in np.linspace(100, 7000, 12))
        noise = torch.randn(48000 * 10)
        started = time.perf_counter()
        for _ in range(3):
            resample(noise, 48000, 16000, **options)
        cost = (time.perf_counter() - started) / 30 * 1000
        rows.append((label, 20 * math.log10(max(folded, 1e-12)), passband, cost))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--utterances", type=int, default=40)
    parser.add_argument("--batch-seconds", type=float, default=20.0, help="padded seconds per batch "
                        "(the template's max_batch_length)")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the batches")
    parser.add_argument("--tiny", action="store_true", help="a tiny model and 8 utterances (a smoke run)")
    parser.add_argument("--quality", action="store_true", help="also the resampler quality table")
    parser.add_argument("--import-clips", type=int, default=200, help="files per layout for the import and "
                        "check table (benchmarks/data_import_check.py); 0 leaves it out")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    count = 8 if args.tiny else args.utterances
    print(f"# {machine_line()}; torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        manifests = write_sources(folder / "src", count)
        converted = measure_convert(manifests, folder / "converted")
        manifests["flac16"] = folder / "converted" / "flac48" / "flac48.json"
        batch_seconds = 6.0 if args.tiny else args.batch_seconds
        table, batches, items = measure_steps(manifests, batch_seconds, 1 if args.tiny else args.rounds,
                                              args.tiny)
    model = "tiny model" if args.tiny else "the template's model (ASR.yaml defaults)"
    print(f"\nTraining step of {model}, {batches} batches of <= {batch_seconds:g} s ({items} items), "
          "load = decode + audio policy in the training process (num_workers: 0), medians:\n")
    print("| source | load per batch | step | load / step |")
    print("| --- | --- | --- | --- |")
    for label, load, step, ratio in table:
        print(f"| {label} | {load * 1000:.1f} ms | {step * 1000:.0f} ms | {ratio * 100:.1f}% |")
    extra = (table[2][1] - table[0][1]) / table[0][2]
    print(f"\nOn-the-fly conversion of 48 kHz stereo MP3 adds {extra * 100:.1f}% to a step against "
          f"pre-converted FLAC ({'under' if extra < 0.10 else 'over'} the 10% budget).")
    print("\n`speechkit data convert` (one worker):\n")
    print("| source | audio | time | per hour of audio |")
    print("| --- | --- | --- | --- |")
    for label, seconds, elapsed, per_hour in converted:
        print(f"| {label} | {seconds:.1f} s | {elapsed:.2f} s | {per_hour:.0f} s |")
    if args.quality:
        print("\nResampling 48 kHz -> 16 kHz:\n")
        print("| filter | worst fold-back of 8.8-23.5 kHz | worst error of tones <= 7 kHz "
              "| CPU per s of audio |")
        print("| --- | --- | --- | --- |")
        for label, folded_db, passband, cost in resampler_quality():
            print(f"| {label} | {folded_db:.0f} dB | {passband:.1e} | {cost:.2f} ms |")
    if args.import_clips > 0 and not args.tiny:
        import data_import_check  # beside this script

        print("\n`speechkit data import` and `speechkit data check` per hour of audio:\n")
        data_import_check.main(["--clips", str(args.import_clips)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
