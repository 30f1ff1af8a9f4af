"""Data loading: padding and throughput of fixed vs dynamic batches, and decode speed of WAV vs FLAC.

Writes a synthetic corpus (tones in noise, durations drawn like read speech between 1 and 20 s) to a
temporary folder, then loads one epoch through ``make_dataloader`` twice at the same memory budget:

* fixed batch size: the largest batch size whose worst case (every item as long as the longest) fits the
  budget of padded seconds per batch, which is what a fixed-size recipe must pick to never run out of memory;
* dynamic batching: ``max_batch_length`` = the same budget.

Padding efficiency is measured on the padded tensors the loader returns (real samples / padded samples).
Decode speed reads the same files as WAV and as FLAC (after one warm-up read each) with
``speechkit.data.audio.read``.

Usage:
    python benchmarks/dataloader.py --num-utterances 2000
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np
import soundfile

from speechkit.data.dataset import DynamicItemDataset
from speechkit.data.loader import make_dataloader
from speechkit.machine import machine_line

try:
    from speechkit.data.audio import read as read_audio
except ImportError:  # the benchmark still runs on a tree without the audio module
    def read_audio(path):
        return soundfile.read(path, dtype="float32")[0]


def draw_durations(count: int, rng: np.random.Generator) -> np.ndarray:
    """Seconds per utterance: a gamma bulk around 5-8 s with a tail to 20 s, like segmented read speech."""
    return np.round(np.clip(rng.gamma(2.2, 3.0, count) + 1.0, 1.0, 20.0), 2)


def write_corpus(folder: str, durations: np.ndarray, sample_rate: int, flac_count: int,
                 rng: np.random.Generator) -> tuple:
    """WAV files for every utterance, FLAC copies of the first ``flac_count``; returns (wav paths, flac
    paths)."""
    seconds = 60
    time_axis = np.arange(seconds * sample_rate) / sample_rate
    # One long tone-in-noise signal, sliced at random offsets: cheap to make, and not trivially compressible.
    source = 0.3 * np.sin(2 * np.pi * 220.0 * time_axis * (1 + 0.1 * np.sin(time_axis)))
    source += 0.05 * rng.standard_normal(source.size)
    source = np.round(source * 32767).astype(np.int16)  # written as is: no conversion per file
    wavs, flacs = [], []
    for index, duration in enumerate(durations):
        frames = int(round(duration * sample_rate))
        start = int(rng.integers(0, source.size - frames))
        piece = source[start:start + frames]
        wav = os.path.join(folder, f"utt{index:05d}.wav")
        soundfile.write(wav, piece, sample_rate, subtype="PCM_16")
        wavs.append(wav)
        if index < flac_count:
            flac = os.path.join(folder, f"utt{index:05d}.flac")
            soundfile.write(flac, piece, sample_rate, subtype="PCM_16")
            flacs.append(flac)
    return wavs, flacs


def audio_dataset(paths: list, durations: np.ndarray) -> DynamicItemDataset:
    data = {f"utt{index:05d}": {"wav": path, "duration": float(duration)}
            for index, (path, duration) in enumerate(zip(paths, durations))}
    dataset = DynamicItemDataset(data)
    dataset.add_dynamic_item(read_audio, takes=["wav"], provides=["sig"])
    dataset.set_output_keys(["id", "sig"])
    return dataset


def load_epoch(dataset: DynamicItemDataset, num_workers: int, **options) -> dict:
    loader = make_dataloader(dataset, "train", seed=0, num_workers=num_workers, **options)
    loader.set_epoch(0)
    real = padded = items = batches = 0
    begin = time.perf_counter()
    for batch in loader:
        real += int(batch.sig.lengths.sum())
        padded += batch.sig.data.numel()
        items += len(batch)
        batches += 1
    elapsed = time.perf_counter() - begin
    return {"batches": batches, "items": items, "padding": real / padded, "seconds": elapsed,
            "planned_padding": loader.stats()["padding_efficiency"], "real": real}  # planned: from durations


def decode_speed(paths: list, sample_rate: int) -> tuple:
    """(seconds of audio per second of wall time, files per second, megabytes on disk), after a warm-up."""
    for path in paths:
        read_audio(path)
    begin = time.perf_counter()
    samples = sum(int(read_audio(path).shape[0]) for path in paths)
    elapsed = time.perf_counter() - begin
    megabytes = sum(os.path.getsize(path) for path in paths) / 1e6
    return samples / sample_rate / elapsed, len(paths) / elapsed, megabytes


def main(argv=None) -> None:
    print(machine_line(), flush=True)  # the figures below are true of this machine
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-utterances", type=int, default=2000)
    parser.add_argument("--max-batch-seconds", type=float, default=200.0,
                        help="memory budget: padded seconds of audio per batch")
    parser.add_argument("--sample-rate", type=int, default=16000)
    parser.add_argument("--decode-files", type=int, default=300, help="files written as FLAC too")
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--folder", default=None, help="write the corpus here (kept) instead of a temp dir")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    durations = draw_durations(args.num_utterances, rng)
    folder = args.folder or tempfile.mkdtemp(prefix="speechkit-bench-")
    os.makedirs(folder, exist_ok=True)
    try:
        begin = time.perf_counter()
        flac_count = min(args.decode_files, len(durations))
        wavs, flacs = write_corpus(folder, durations, args.sample_rate, flac_count, rng)
        print(f"corpus: {len(wavs)} utterances, {durations.sum() / 3600:.2f} h, durations "
              f"{durations.min():.1f}-{durations.max():.1f} s (mean {durations.mean():.1f}, median "
              f"{np.median(durations):.1f}); written in {time.perf_counter() - begin:.1f} s")
        for path in wavs:  # both passes read from the page cache, not the first one from disk
            with open(path, "rb") as handle:
                handle.read()
        dataset = audio_dataset(wavs, durations)
        budget = args.max_batch_seconds
        fixed_size = max(1, int(budget // durations.max()))
        fixed = load_epoch(dataset, args.num_workers, batch_size=fixed_size)
        dynamic = load_epoch(dataset, args.num_workers, dynamic_batching={"max_batch_length": budget})

        print(f"\nbatching at the same memory budget ({budget:g} padded seconds per batch), one epoch, "
              f"{args.num_workers} loader worker(s)")
        header = (f"| {'batching':<26} | {'batches':>7} | {'items/batch':>11} | {'padding eff.':>12} | "
                  f"{'items/s':>8} | {'audio s/s':>9} |")
        print(header)
        print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|")
        for name, result in ((f"fixed batch_size={fixed_size}", fixed), ("dynamic", dynamic)):
            print(f"| {name:<26} | {result['batches']:>7} | {result['items'] / result['batches']:>11.1f} | "
                  f"{result['padding']:>12.3f} | {result['items'] / result['seconds']:>8.0f} | "
                  f"{result['real'] / args.sample_rate / result['seconds']:>9.0f} |")

        wav_speed = decode_speed(wavs[:len(flacs)], args.sample_rate)
        flac_speed = decode_speed(flacs, args.sample_rate)
        audio_hours = durations[:len(flacs)].sum() / 3600
        print(f"\ndecode speed, {len(flacs)} files ({audio_hours:.2f} h), speechkit.data.audio.read")
        print(f"| {'format':<6} | {'audio s/s':>10} | {'files/s':>8} | {'size MB':>8} |")
        print(f"|{'-' * 8}|{'-' * 12}|{'-' * 10}|{'-' * 10}|")
        for name, (speed, files, megabytes) in (("wav", wav_speed), ("flac", flac_speed)):
            print(f"| {name:<6} | {speed:>10.0f} | {files:>8.0f} | {megabytes:>8.1f} |")
        print(f"\ntotal {time.perf_counter() - started:.0f} s")
    finally:
        if args.folder is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
