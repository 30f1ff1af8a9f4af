"""Streaming recognition speed: real-time factor on one thread, latency of the first partial transcript and
of the final one after the end of the audio, for chunks of 160, 320 and 640 ms, at the model's rate and at a
microphone's 48 kHz, with greedy decoding and with the template's beam search and LM.

The model is the streaming preset of templates/speech_recognition (80 filterbanks, global normalization,
3 unidirectional LSTM layers of 192 units, 2 CTC frames per 40 ms) with random weights, fed ``--seconds`` of
audio chunk by chunk as fast as it takes them. Decodings (``--decodings``):

* ``greedy``: no ``decoder`` in the folder, the final transcript is the greedy one;
* ``beam+lm``: the final decoding of templates/speech_recognition/ASR/hparams/inference_streaming.yaml (CTC
  prefix beam search, beam 10, fused with a 2-layer LSTM LM of 256 units, random weights), run along the
  stream: each chunk's frames are searched as they arrive, ``finish`` searches the last ones;
* ``beam+lm rerun``: the same search run once over all the stream's scores at ``finish`` (what a decoder
  that cannot follow a stream costs, and what streams did before the search was incremental).

Random weights give no near-certain blank frames, so no frame is skipped by ``blank_skip_threshold``: the
beam search costs more per frame than with a trained model. Columns:

* RTF: compute time of all ``accept`` and ``finish`` calls / audio time (lower is faster);
* first partial: from the start of the audio to the first output of the model, when chunks arrive in real
  time: the first chunk's duration plus the compute time of the calls up to the first one that gives frames;
* final after end: compute time of ``finish()`` (the resampler's and the features' last samples, the last
  encoder steps, the end of the decoding);
* per chunk: mean compute time of one ``accept``.

Usage:
    python benchmarks/streaming.py                   # every row: 20 s of audio, one thread
    python benchmarks/streaming.py --seconds 10 --chunks-ms 320 --rates 48000
    python benchmarks/streaming.py --seconds 10 --chunks-ms 320 --decodings beam+lm "beam+lm rerun"
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.data.resample import POLICY_FILTER, resample  # noqa: E402
from speechkit.streaming import StreamingASR  # noqa: E402

DECODINGS = ("greedy", "beam+lm", "beam+lm rerun")
#: The final decoding of templates/speech_recognition/ASR/hparams/inference_streaming.yaml (bos 2, eos 3).
TEMPLATE_SEARCH = dict(beam_size=10, blank_index=0, blank_skip_threshold=0.999, lm_weight=1.0,
                       length_bonus=2.0, bos_index=2, eos_index=3)


class _Tokenizer:
    def decode_ids(self, ids):
        return "".join(chr(97 + i % 26) for i in ids)


class _Rerun:
    """The template's search behind a plain callable: a stream cannot follow it, so it runs once over all
    the scores at the end."""

    def __init__(self, search):
        self.search = search

    def __call__(self, log_probs, lengths):
        return self.search(log_probs, lengths)


def build(tiny: bool = False, decoding: str = "greedy"):
    """The streaming preset's recognizer as an EncoderASR, random weights, statistics of random audio; with
    the template's beam search and LM for the ``beam+lm`` decodings."""
    from speechkit.decoding import CTCPrefixBeamSearch
    from speechkit.features import Fbank, GlobalNormalization
    from speechkit.models import CTCHead, LSTMLanguageModel, RecurrentEncoder
    from speechkit.pretrained.interfaces import EncoderASR

    torch.manual_seed(0)
    n_mels, hidden, d_model, layers = (16, 16, 16, 1) if tiny else (80, 192, 256, 3)
    fbank = Fbank(n_mels=n_mels)
    norm = GlobalNormalization(n_mels).train()
    norm(*fbank(0.1 * torch.randn(2, 16000), torch.tensor([16000, 16000])))
    modules = {"compute_features": fbank, "normalize": norm.eval(),
               "encoder": RecurrentEncoder(n_mels, d_model=d_model, hidden_size=hidden, num_layers=layers,
                                           stride=4, upsample=2, bidirectional=False).eval(),
               "ctc_head": CTCHead(d_model, 40).eval()}
    hparams = {"modules": dict(modules), "sample_rate": 16000, "encoder_pipeline": list(modules),
               "tokenizer": _Tokenizer()}
    if decoding != "greedy":
        lm = LSTMLanguageModel(40, embedding_dim=16 if tiny else 64, hidden_size=16 if tiny else 256,
                               num_layers=2).eval()
        hparams["modules"]["lm"] = lm
        search = CTCPrefixBeamSearch(lm=lm, **TEMPLATE_SEARCH)
        hparams["decoder"] = search if decoding == "beam+lm" else _Rerun(search)
    return EncoderASR(hparams["modules"], hparams)


def measure(streaming: StreamingASR, audio: torch.Tensor, rate: int, chunk_ms: float) -> dict:
    chunk = int(rate * chunk_ms / 1000)
    stream = streaming.stream(sample_rate=rate)
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
    return {"rtf": compute / (audio.numel() / rate), "first": first, "final": final,
            "per_chunk": (compute - final) / calls}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks-ms", nargs="+", type=float, default=[160.0, 320.0, 640.0])
    parser.add_argument("--rates", nargs="+", type=int, default=[16000, 48000],
                        help="Rates the audio is sent at (another than 16 kHz is resampled chunk by chunk).")
    parser.add_argument("--decodings", nargs="+", choices=DECODINGS, default=list(DECODINGS))
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=1, help="Runs per row; the table shows medians.")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tiny", action="store_true", help="A tiny model (a smoke test of the script).")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    at_16k = 0.1 * torch.randn(int(args.seconds * 16000), generator=torch.Generator().manual_seed(0))
    audio = {rate: resample(at_16k, 16000, rate, **POLICY_FILTER) for rate in args.rates}
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}; torch {torch.__version__}; {args.threads} thread(s); "
          f"{args.seconds:g} s of audio; medians of {args.repeats}")
    print("| decoding | rate (Hz) | chunk (ms) | RTF | first partial (ms) | final after end (ms) | "
          "per chunk (ms) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for decoding in args.decodings:
        streaming = StreamingASR(build(args.tiny, decoding))
        measure(streaming, at_16k[:16000], 16000, 320.0)  # warm-up
        for rate in args.rates:
            for chunk_ms in args.chunks_ms:
                runs = [measure(streaming, audio[rate], rate, chunk_ms) for _ in range(args.repeats)]
                r = {key: statistics.median(run[key] for run in runs) if runs[0][key] is not None else None
                     for key in runs[0]}
                first = "n/a" if r["first"] is None else f"{1000 * r['first']:.0f}"
                print(f"| {decoding} | {rate} | {chunk_ms:g} | {r['rtf']:.3f} | {first} | "
                      f"{1000 * r['final']:.1f} | {1000 * r['per_chunk']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
