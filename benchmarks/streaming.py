"""Streaming recognition speed: real-time factor on one thread, latency of the first partial transcript and
of the final one after the end of the audio, for chunks of 160, 320 and 640 ms.

The model is the streaming preset of templates/speech_recognition (80 filterbanks, global normalization,
3 unidirectional LSTM layers of 192 units, 2 CTC frames per 40 ms) with random weights, fed ``--seconds`` of
audio chunk by chunk as fast as it takes them. Columns:

* RTF: compute time of all ``accept`` and ``finish`` calls / audio time (lower is faster);
* first partial: from the start of the audio to the first output of the model, when chunks arrive in real
  time: the first chunk's duration plus the compute time of the calls up to the first one that gives frames;
* final after end: compute time of ``finish()`` (the last frames and the final decoding; greedy here);
* per chunk: mean compute time of one ``accept``.

Usage:
    python benchmarks/streaming.py                   # 160/320/640 ms chunks, 20 s of audio, one thread
    python benchmarks/streaming.py --seconds 5 --chunks-ms 320
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.streaming import StreamingASR  # noqa: E402


class _Tokenizer:
    def decode_ids(self, ids):
        return "".join(chr(97 + i % 26) for i in ids)


def build(tiny: bool = False):
    """The streaming preset's recognizer as an EncoderASR, random weights, statistics of random audio."""
    from speechkit.features import Fbank, GlobalNormalization
    from speechkit.models import CTCHead, RecurrentEncoder
    from speechkit.pretrained.interfaces import EncoderASR

    torch.manual_seed(0)
    n_mels, hidden, d_model, layers = (16, 16, 16, 1) if tiny else (80, 192, 256, 3)
    fbank = Fbank(n_mels=n_mels)
    norm = GlobalNormalization(n_mels).train()
    norm(*fbank(0.1 * torch.randn(2, 16000), torch.tensor([16000, 16000])))
    modules = {"compute_features": fbank, "normalize": norm.eval(),
               "encoder": RecurrentEncoder(n_mels, d_model=d_model, hidden_size=hidden, num_layers=layers,
                                           stride=4, upsample=2, bidirectional=False),
               "ctc_head": CTCHead(d_model, 40)}
    hparams = {"modules": modules, "sample_rate": 16000, "encoder_pipeline": list(modules),
               "tokenizer": _Tokenizer()}
    return EncoderASR(modules, hparams)


def measure(streaming: StreamingASR, audio: torch.Tensor, chunk_ms: float) -> dict:
    rate = streaming.sample_rate
    chunk = int(rate * chunk_ms / 1000)
    stream = streaming.stream()
    compute, first, calls = 0.0, None, 0
    for piece in audio.split(chunk):
        start = time.perf_counter()
        stream.accept(piece)
        spent = time.perf_counter() - start
        compute += spent
        calls += 1
        if first is None and stream.log_probs.shape[0]:
            first = calls * chunk / rate + compute  # audio up to this chunk arrived, then the calls ran
    start = time.perf_counter()
    stream.finish()
    final = time.perf_counter() - start
    compute += final
    return {"chunk_ms": chunk_ms, "rtf": compute / (audio.numel() / rate), "first": first, "final": final,
            "per_chunk": (compute - final) / calls}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks-ms", nargs="+", type=float, default=[160.0, 320.0, 640.0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tiny", action="store_true", help="A tiny model (a smoke test of the script).")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    streaming = StreamingASR(build(args.tiny))
    audio = 0.1 * torch.randn(int(args.seconds * 16000))
    measure(streaming, audio[:16000], 320.0)  # warm-up
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; torch "
          f"{torch.__version__}; {args.threads} thread(s); {args.seconds:g} s of audio")
    print("| chunk (ms) | RTF | first partial (ms) | final after end (ms) | per chunk (ms) |")
    print("| --- | --- | --- | --- | --- |")
    for chunk_ms in args.chunks_ms:
        r = measure(streaming, audio, chunk_ms)
        first = "n/a" if r["first"] is None else f"{1000 * r['first']:.0f}"
        print(f"| {chunk_ms:g} | {r['rtf']:.3f} | {first} | {1000 * r['final']:.1f} | "
              f"{1000 * r['per_chunk']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
