"""`speechkit serve` streaming: how long after ``{"type": "end"}`` the final transcript arrives, for a
client sending a microphone's 48 kHz audio in real time, through the incremental recognizer (the stream
resampled and recognised chunk by chunk) and through re-decoding (``--stream-recognizer redecoding``: all
the audio so far transcribed again every ``--partial-every-s``), both servers in the same run.

The model folders are the streaming preset of templates/speech_recognition with random weights (the model of
benchmarks/streaming.py): ``greedy`` (no decoder) and ``beam+lm`` (the CTC prefix beam search with the LSTM
LM of inference_streaming.yaml, run along the stream by the incremental recognizer). Each client streams
``--seconds`` of audio in ``--chunk-ms`` chunks, paced in real time as a microphone sends them, then "end";
the table gives, per recognizer and model, the median over ``--repeats`` streams (the two servers taking
turns) of: the final's latency after "end", the partials received, and the time from the last chunk to the
last partial before the final (how far the partials lag behind the audio).

Usage:
    python benchmarks/serve_stream.py [--seconds 6] [--chunk-ms 100] [--rate 48000] [--repeats 3]

Nothing here is asserted in the tests; the numbers depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import Server  # noqa: E402  (the server process of benchmarks/serve.py)
from streaming import TEMPLATE_SEARCH, build  # noqa: E402  (the streaming preset's model)

YAML = """\
sample_rate: 16000
compute_features: !new:speechkit.features.Fbank
  n_mels: {n_mels}
normalize: !new:speechkit.features.GlobalNormalization
  num_features: {n_mels}
encoder: !new:speechkit.models.RecurrentEncoder
  input_size: {n_mels}
  d_model: {d_model}
  hidden_size: {hidden}
  num_layers: {layers}
  stride: 4
  upsample: 2
  bidirectional: False
ctc_head: !new:speechkit.models.CTCHead
  d_model: {d_model}
  vocab_size: 40
tokenizer: !new:speechkit.data.encoders.CTCLabelEncoder
{lm}modules:
  compute_features: !ref <compute_features>
  normalize: !ref <normalize>
  encoder: !ref <encoder>
  ctc_head: !ref <ctc_head>
{lm_module}encoder_pipeline: [compute_features, normalize, encoder, ctc_head]
decoding: {{blank_index: 0}}
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
    normalize: !ref <normalize>
    encoder: !ref <encoder>
    ctc_head: !ref <ctc_head>
    tokenizer: !ref <tokenizer>
{lm_loadable}  paths:
    normalize: normalize.safetensors
    encoder: encoder.safetensors
    ctc_head: ctc_head.safetensors
    tokenizer: tokenizer.txt
{lm_path}"""
LM = """\
lm: !new:speechkit.models.LSTMLanguageModel
  vocab_size: 40
  embedding_dim: {embedding}
  hidden_size: {lm_hidden}
  num_layers: 2
decoder: !new:speechkit.decoding.CTCPrefixBeamSearch
{search}  lm: !ref <lm>
"""


def write_folder(folder: Path, decoding: str, tiny: bool = False) -> Path:
    """The streaming preset's model of benchmarks/streaming.py as a model folder for ``speechkit serve``."""
    from speechkit.data.encoders import CTCLabelEncoder
    from speechkit.pretrained.loading import save_weights

    asr = build(tiny, decoding)
    folder.mkdir(parents=True)
    for name, module in asr.mods.items():
        if name != "compute_features":
            save_weights(module.state_dict(), folder / f"{name}.safetensors")
    labels = [chr(0x61 + i) if i < 26 else str(i - 26) for i in range(39)]  # 39 labels and the blank: 40 ids
    CTCLabelEncoder(labels).save(folder / "tokenizer.txt")
    encoder = asr.mods["encoder"]
    sizes = dict(n_mels=asr.mods["compute_features"].filters.shape[1], d_model=encoder.d_model,
                 hidden=encoder.layers[0][0].hidden_size, layers=len(encoder.layers))
    parts = dict(lm="", lm_module="", lm_loadable="", lm_path="")
    if decoding != "greedy":
        lm = asr.mods["lm"]
        search = "".join(f"  {key}: {value}\n" for key, value in TEMPLATE_SEARCH.items())
        parts = dict(lm=LM.format(embedding=lm.embedding.embedding_dim, lm_hidden=lm.lstm.hidden_size,
                                  search=search),
                     lm_module="  lm: !ref <lm>\n", lm_loadable="    lm: !ref <lm>\n",
                     lm_path="    lm: lm.safetensors\n")
    (folder / "hyperparams.yaml").write_text(YAML.format(**sizes, **parts))
    return folder


def served(decoding: str) -> str:
    """The name a model is served under (``beam+lm`` -> ``beam-lm``)."""
    return decoding.replace("+", "-")


def stream_once(url: str, model: str, samples: np.ndarray, rate: int, chunk_ms: float) -> dict:
    """One real-time stream; the final's latency after "end" and what came before it."""
    from websockets.sync.client import connect

    chunk = int(rate * chunk_ms / 1000)
    partial_times = []
    with connect(f"ws{url[len('http'):]}/v1/models/{model}/stream", open_timeout=60,
                 max_size=None) as socket:
        socket.send(json.dumps({"type": "start", "sample_rate": rate}))
        recognizer = json.loads(socket.recv(timeout=60))["recognizer"]
        started = time.perf_counter()
        for index, begin in enumerate(range(0, len(samples), chunk)):
            due = started + index * chunk_ms / 1000  # a microphone delivers each chunk once it is recorded
            while True:
                wait = due - time.perf_counter()
                try:
                    message = json.loads(socket.recv(timeout=max(wait, 0.0)))
                except TimeoutError:
                    break
                partial_times.append(time.perf_counter())
                assert message["type"] == "partial", message
            socket.send(samples[begin:begin + chunk].tobytes())
        last_chunk = time.perf_counter()
        socket.send(json.dumps({"type": "end"}))
        ended = time.perf_counter()
        while True:
            message = json.loads(socket.recv(timeout=600))
            if message["type"] == "final":
                final = time.perf_counter()
                break
            partial_times.append(time.perf_counter())
    return {"recognizer": recognizer, "final_s": final - ended, "partials": len(partial_times),
            "partial_lag_s": max(partial_times[-1] - last_chunk, 0.0) if partial_times else float("nan"),
            "text": message["text"]}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--chunk-ms", type=float, default=100.0)
    parser.add_argument("--rate", type=int, default=48000, help="The client's (microphone's) rate.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--decodings", nargs="+", default=["greedy", "beam+lm"],
                        choices=["greedy", "beam+lm"])
    parser.add_argument("--tiny", action="store_true", help="Tiny models (a smoke test of the script).")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    samples = (0.1 * rng.standard_normal(int(args.seconds * args.rate))).astype("<f4")
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        models = [f"{served(d)}={write_folder(Path(tmp) / served(d), d, args.tiny)}" for d in args.decodings]
        common = [*models, "--max-audio-seconds", str(args.seconds + 5), "--stream-idle-s", "600"]
        servers = {"incremental": Server(common, args.threads),
                   "redecoding": Server(common + ["--stream-recognizer", "redecoding"], args.threads)}
        try:
            for server in servers.values():  # warm-up: the first passes allocate
                for decoding in args.decodings:
                    stream_once(server.url, served(decoding), samples[:args.rate], args.rate, args.chunk_ms)
            for _ in range(args.repeats):
                for decoding in args.decodings:
                    for recognizer, server in servers.items():
                        run = stream_once(server.url, served(decoding), samples, args.rate, args.chunk_ms)
                        assert run["recognizer"] == recognizer, run
                        results.setdefault((decoding, recognizer), []).append(run)
        finally:
            for server in servers.values():
                server.stop()
    print(f"\nspeechkit serve streams: {args.seconds:g} s at {args.rate} Hz in {args.chunk_ms:g} ms chunks, "
          f"paced in real time; streaming preset (random weights{', tiny' if args.tiny else ''}); "
          f"{args.threads} torch thread(s) per server; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; torch {torch.__version__}; medians of {args.repeats}\n")
    print("| model | recognizer | final after end (ms) | partials | last partial after last chunk (ms) |")
    print("|---|---|---|---|---|")
    for decoding in args.decodings:
        for recognizer in servers:
            runs = results[(decoding, recognizer)]
            final_ms = 1000 * statistics.median(r["final_s"] for r in runs)
            print(f"| {decoding} | {recognizer} | {final_ms:.0f} | "
                  f"{statistics.median(r['partials'] for r in runs):.0f} | "
                  f"{1000 * statistics.median(r['partial_lag_s'] for r in runs):.0f} |")
    print()
    for decoding in args.decodings:
        ratio = (statistics.median(r["final_s"] for r in results[(decoding, "redecoding")])
                 / max(statistics.median(r["final_s"] for r in results[(decoding, "incremental")]), 1e-9))
        same = all(a["text"] == b["text"] for a, b in zip(results[(decoding, "incremental")],
                                                          results[(decoding, "redecoding")]))
        print(f"{decoding}: the incremental final arrives {ratio:.1f}x sooner than the re-decoded one "
              f"(same text: {'yes' if same else 'no'})")
        results[decoding] = {"ratio": ratio, "same_text": same}
    return results


if __name__ == "__main__":
    main()
