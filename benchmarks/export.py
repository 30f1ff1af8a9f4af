"""Inference speed of exported graphs: PyTorch eager, TorchScript, onnxruntime float32 and int8, in one run.

For the demo's recognizer (templates/speech_recognition: fbank, per-utterance normalization, 3 bidirectional
LSTM layers of 192 units, CTC head), the ``small`` Conv-TasNet (8 kHz) and the recipe's vocoder generator
(``small`` iSTFT preset), all with random weights (speed does not depend on them): each model is exported
(and checked against PyTorch, as ``speechkit export`` does; the int8 graph as ``speechkit export --quantize
int8`` writes and checks it), then every backend runs batches of 1 and 8 items of ``--seconds`` of audio on 1
and 2 threads.

On a shared machine one backend's measurement can fall in a quiet moment and the next one's in a busy one
(single measurements gave 0.21x and 1.81x for the same pair): so the backends are timed interleaved (one
run of each in turn, the order rotating, ``--repeats`` rounds after two warm-up runs each), and each
backend's median is reported with its spread (the 25th to 75th percentile, relative to the median). The
speed-up over eager is the ratio of medians. Printed first: the thread settings in force (torch's threads,
OMP_NUM_THREADS, onnxruntime's intra- and inter-op threads and graph optimisation level). The peak resident
memory above the level before is measured afterwards, per backend, over a few runs of its own (sampled every
millisecond; an allocator keeps memory it took for an earlier measurement, so later rows can read low).

Usage:
    python benchmarks/export.py                       # the three models, batch 1 and 8, 1 and 2 threads
    python benchmarks/export.py --models recognizer --seconds 2 --repeats 30 --threads 1 --batches 1
    python benchmarks/export.py --backends eager onnxruntime onnxruntime-int8 --repeats 60
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.export.convert import export_graph  # noqa: E402
from speechkit.export.graphs import graph_specs  # noqa: E402
from speechkit.export.quantize import quantize_graph  # noqa: E402
from speechkit.pretrained.backends import ORT_OPTIMIZATION, load_graph  # noqa: E402

MODELS = ("recognizer", "separator", "vocoder")
BACKENDS = ("eager", "torchscript", "onnxruntime", "onnxruntime-int8")


class _Tokenizer:
    def decode_ids(self, ids):
        return " ".join(map(str, ids))


def build(name: str, tiny: bool = False):
    """``(interface, sample_rate, audio seconds per input step)`` of model ``name`` with random weights."""
    from speechkit.features import Fbank, UtteranceNormalization
    from speechkit.models import ConvTasNet, CTCHead, ISTFTGenerator, MelSpectrogram, RecurrentEncoder
    from speechkit.pretrained.interfaces import EncoderASR
    from speechkit.pretrained.separation import SeparationModel
    from speechkit.pretrained.vocoder import Vocoder

    torch.manual_seed(0)
    if name == "recognizer":
        n_mels, hidden, d_model = (16, 16, 16) if tiny else (80, 192, 256)
        modules = {"compute_features": Fbank(n_mels=n_mels), "normalize": UtteranceNormalization(),
                   "encoder": RecurrentEncoder(n_mels, d_model=d_model, hidden_size=hidden,
                                               num_layers=1 if tiny else 3, stride=4, upsample=2),
                   "ctc_head": CTCHead(d_model, 40)}
        hparams = {"modules": modules, "sample_rate": 16000, "encoder_pipeline": list(modules),
                   "tokenizer": _Tokenizer()}
        return EncoderASR(modules, hparams), 16000, 1 / 16000
    if name == "separator":
        separator = ConvTasNet.from_preset("tiny" if tiny else "small", num_speakers=2)
        modules = {"separator": separator}
        return SeparationModel(modules, {"modules": modules, "sample_rate": 8000, "num_speakers": 2}), \
            8000, 1 / 8000
    if name == "vocoder":
        mel = MelSpectrogram()
        modules = {"mel": mel, "generator": ISTFTGenerator.from_preset("tiny" if tiny else "small")}
        return Vocoder(modules, {"modules": modules, "sample_rate": 16000}), 16000, mel.hop_length / 16000
    raise ValueError(f"unknown model {name!r}; choose from {MODELS}")


class PeakMemory:
    """Largest resident set size above the starting level while the block runs (Linux /proc)."""

    def __enter__(self):
        self.start = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())

    @property
    def mib(self):
        return None if self.start is None else (self.peak - self.start) / 2 ** 20


def _rss():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def timed_interleaved(backends: dict, inputs, repeats: int) -> dict:
    """name -> (median seconds, 25th percentile, 75th percentile) over ``repeats`` rounds, each round one
    run of every backend in turn (the order rotating each round), after two warm-up runs of each
    (TorchScript optimizes its graph during its first runs)."""
    names = list(backends)
    for name in names:
        backends[name](*inputs)
        backends[name](*inputs)
    times = {name: [] for name in names}
    for round_ in range(repeats):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            start = time.perf_counter()
            backends[name](*inputs)
            times[name].append(time.perf_counter() - start)
    return {name: tuple(float(q) for q in np.percentile(t, [50, 25, 75])) for name, t in times.items()}


def peak_memory(run, inputs, runs: int = 3):
    """Peak MiB above the level before, over ``runs`` runs."""
    with PeakMemory() as memory:
        for _ in range(runs):
            run(*inputs)
    return memory.mib


def measure_model(name: str, args, folder: Path) -> list:
    interface, rate, step_seconds = build(name, args.tiny)
    rows = []
    for spec in graph_specs(interface):
        if name == "vocoder" and spec.name == "mel":
            continue  # the mel front end is a small part of the vocoder's time
        spec.module.eval()
        params = sum(p.numel() for p in spec.module.parameters())
        files = {fmt: folder / f"{spec.name}.{fmt}" for fmt in ("onnx", "torchscript")}
        for fmt, path in files.items():
            export_graph(spec, path, fmt)
        files["int8"] = folder / f"{spec.name}.int8.onnx"
        snr = quantize_graph(spec, files["onnx"], files["int8"])["min_snr_db"]
        print(f"{name} ({spec.name}): int8 graph {files['int8'].stat().st_size / 2 ** 20:.2f} MiB "
              f"(float32 {files['onnx'].stat().st_size / 2 ** 20:.2f} MiB), signal-to-error against PyTorch "
              f"at least {snr:.1f} dB", flush=True)
        steps = int(round(args.seconds / step_seconds))
        for batch in args.batches:
            x = spec.example([steps] * batch)
            lengths = torch.full((batch,), steps, dtype=torch.int64)
            audio = batch * steps * step_seconds
            for threads in args.threads:
                torch.set_num_threads(threads)
                chosen = ["eager"] + [b for b in args.backends if b != "eager"]
                backends = {b: open_backend(b, spec, files, threads) for b in chosen}
                timings = timed_interleaved(backends, (x, lengths), args.repeats)
                eager_seconds = timings["eager"][0]
                for backend, (median, low, high) in timings.items():
                    rows.append(dict(model=f"{name} ({spec.name})", params=params, backend=backend,
                                     threads=threads, batch=batch, rtf=median / audio,
                                     spread=(low / median, high / median), speedup=eager_seconds / median,
                                     mib=peak_memory(backends[backend], (x, lengths))))
    return rows


def open_backend(backend: str, spec, files: dict, threads: int):
    """``run(x, lengths)`` of ``backend`` for the graph ``spec`` (``files``: format -> exported file)."""
    if backend == "eager":
        return _eager(spec.module)
    if backend == "torchscript":
        return load_graph(files["torchscript"], "torchscript", spec.input_names, spec.output_names)
    path = files["int8" if backend == "onnxruntime-int8" else "onnx"]
    return load_graph(path, "onnx", spec.input_names, spec.output_names, threads=threads)


def _eager(module):
    def run(x, lengths):
        with torch.no_grad():
            return module(x, lengths)
    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--seconds", type=float, default=4.0, help="Audio per item.")
    parser.add_argument("--repeats", type=int, default=30,
                        help="Interleaved rounds per row (each backend's median is kept).")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS,
                        help="Backends to time (eager always: the ratios are against it).")
    parser.add_argument("--tiny", action="store_true", help="Tiny models (a smoke test of the script).")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import onnxruntime

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}; torch {torch.__version__}, onnxruntime {onnxruntime.__version__}; "
          f"{args.seconds:g} s of audio per item, medians of {args.repeats} interleaved rounds")
    print(f"threads: torch.set_num_threads(N) and onnxruntime intra_op_num_threads=N for each row's N, "
          f"inter_op_num_threads=1, graph optimisation level {ORT_OPTIMIZATION}; OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, torch inter-op threads "
          f"{torch.get_num_interop_threads()}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            (Path(tmp) / name).mkdir()
            rows += measure_model(name, args, Path(tmp) / name)
    print("| model | parameters | backend | threads | batch | RTF (median) | spread (p25-p75 / median) | "
          "speed-up vs eager | peak MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        mib = "n/a" if r["mib"] is None else f"{r['mib']:.0f}"
        print(f"| {r['model']} | {r['params'] / 1e6:.2f} M | {r['backend']} | {r['threads']} | "
              f"{r['batch']} | {r['rtf']:.4f} | {r['spread'][0]:.2f}-{r['spread'][1]:.2f} | "
              f"{r['speedup']:.2f}x | {mib} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
