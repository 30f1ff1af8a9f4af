"""`speechkit serve` under load: requests per second and latency with dynamic batching against serving one
request at a time, for 1, 8 and 32 concurrent clients on 127.0.0.1, and the ratio of the two at each (a lone
client should lose nothing to batching: the wait is adaptive).

Two servers run side by side on the same randomly initialised speechkit ASR model folder (Fbank,
Transformer encoder, CTC head; the model of benchmarks/infer.py): one batching (``--max-batch-items 8`` by
default, the server's default),
one serving one request at a time (``--max-batch-items 1``). Each client sends ``--requests`` 2-second clips
(16-bit WAV) one after the other over a kept-alive connection; a client stops early when the run passes
``--time-limit-s`` (what it did not send is reported). For each number of clients the two servers are
measured in turns, ``--repeats`` times, in the same run, and the table keeps each server's best measurement
(on a shared machine, the one least slowed by other work; a measurement with errors always wins, so errors
are never hidden). It gives requests per second (answered / wall time), p50 and p99 latency, and errors
(any answer but 200, which must be 0). Last, the model alone in this process (no server, one thread as
each server has): milliseconds per clip at batch 1, the batching server's batch size and the largest client
count, the most batching can give this model.

Usage:
    python benchmarks/serve.py [--clients 1,8,32] [--requests 8] [--repeats 3] [--threads 1] [--d-model 96]

Nothing here is asserted in the tests; the numbers depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import io
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from infer import make_model  # noqa: E402  (the same ASR model folder as the batch-job benchmark)

READY = re.compile(r"speechkit: serving .* on (http://\S+)")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,8,32", help="Comma-separated numbers of concurrent clients.")
    parser.add_argument("--requests", type=int, default=8, help="Requests each client sends.")
    parser.add_argument("--clip-seconds", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=1, help="Torch threads of each server (1 leaves a "
                        "core to the event loop and the clients on a 2-core machine).")
    parser.add_argument("--max-batch-items", type=int, default=8, help="The batching server's batch size.")
    parser.add_argument("--d-model", type=int, default=96)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--max-wait-ms", type=float, default=10.0, help="The batching server's wait.")
    parser.add_argument("--repeats", type=int, default=3, help="Measurements of each setting, the two "
                        "servers taking turns; the table shows each one's best (least disturbed by other "
                        "load).")
    parser.add_argument("--time-limit-s", type=float, default=120.0,
                        help="Per measurement: clients send nothing new after this.")
    return parser.parse_args(argv)


class Server:
    """``python -m speechkit serve`` on a free port of 127.0.0.1; its output is kept for errors."""

    def __init__(self, args: list, threads: int):
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "CUDA_VISIBLE_DEVICES": "",
               "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        self.process = subprocess.Popen([sys.executable, "-m", "speechkit", "serve", *args, "--port", "0",
                                         "--threads", str(threads), "--log-level", "warning"],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines, self.url = [], None
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + 180
        while self.url is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the server did not start:\n" + "".join(self.lines))
            time.sleep(0.05)

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line)
            match = READY.search(line)
            if match:
                self.url = match.group(1)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(60)


def clip_bytes(seconds: float, count: int, seed: int = 0) -> list:
    import soundfile

    rng = np.random.default_rng(seed)
    clips = []
    for _ in range(count):
        buffer = io.BytesIO()
        soundfile.write(buffer, (0.1 * rng.standard_normal(int(seconds * 16000))).astype(np.float32), 16000,
                        format="WAV", subtype="PCM_16")
        clips.append(buffer.getvalue())
    return clips


def run_load(url: str, clients: int, requests: int, clips: list, time_limit_s: float) -> dict:
    """``clients`` threads, each sending ``requests`` clips in turn on its own connection."""
    parsed = urllib.parse.urlsplit(url)
    path = "/v1/models/asr/transcribe"
    started = time.perf_counter()

    def client(index: int) -> tuple:
        connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=300)
        latencies, errors = [], 0
        for k in range(requests):
            if time.perf_counter() - started > time_limit_s:
                break
            body = clips[(index * requests + k) % len(clips)]
            sent = time.perf_counter()
            try:
                connection.request("POST", path, body, {"Content-Type": "audio/wav"})
                answer = connection.getresponse()
                answer.read()
                errors += answer.status != 200
            except (OSError, http.client.HTTPException):
                errors += 1
                connection.close()
                connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=300)
            latencies.append(time.perf_counter() - sent)
        connection.close()
        return latencies, errors

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(client, range(clients)))
    wall = time.perf_counter() - started
    latencies = np.array([x for lat, _ in results for x in lat])
    errors = sum(e for _, e in results)
    return {"clients": clients, "planned": clients * requests, "answered": len(latencies) - errors,
            "errors": errors, "wall_s": wall, "rps": (len(latencies) - errors) / wall,
            "p50_s": float(np.percentile(latencies, 50)) if len(latencies) else float("nan"),
            "p99_s": float(np.percentile(latencies, 99)) if len(latencies) else float("nan")}


def model_batch_cost(model: Path, clip_seconds: float, batches: list, threads: int,
                     repeats: int = 10) -> dict:
    """batch size -> milliseconds per clip of ``transcribe_batch`` on random clips (median of ``repeats``)."""
    import torch

    from speechkit.pretrained import Pretrained

    torch.set_num_threads(threads)
    asr = Pretrained.from_hparams(str(model))
    samples = int(clip_seconds * 16000)
    cost = {}
    for batch in batches:
        wavs = 0.1 * torch.randn(batch, samples, generator=torch.Generator().manual_seed(0))
        lengths = torch.full((batch,), samples)
        asr.transcribe_batch(wavs, lengths)  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            asr.transcribe_batch(wavs, lengths)
            times.append(time.perf_counter() - start)
        cost[batch] = 1000 * float(np.median(times)) / batch
    return cost


def main(argv=None) -> dict:
    args = parse_args(argv)
    counts = [int(c) for c in args.clients.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        model = make_model(Path(tmp) / "asr", args.d_model, args.layers)
        clips = clip_bytes(args.clip_seconds, 16)
        common = [f"asr={model}", "--queue-size", str(4 * max(counts)), "--max-audio-seconds", "30"]
        servers = {"batched": Server(common + ["--max-batch-items", str(args.max_batch_items),
                                               "--max-batch-seconds", "64",
                                               "--max-wait-ms", str(args.max_wait_ms)], args.threads),
                   "one-at-a-time": Server(common + ["--max-batch-items", "1"], args.threads)}
        try:
            for server in servers.values():  # warm-up: the first forward passes allocate
                run_load(server.url, 2, 2, clips, args.time_limit_s)
            results = {name: {} for name in servers}
            for clients in counts:
                for _ in range(args.repeats):
                    for name, server in servers.items():
                        run = run_load(server.url, clients, args.requests, clips, args.time_limit_s)
                        best = results[name].get(clients)
                        if best is None or run["errors"] > best["errors"] or (
                                run["errors"] == best["errors"] and run["rps"] > best["rps"]):
                            results[name][clients] = run  # errors are never hidden by a faster run
        finally:
            for server in servers.values():
                server.stop()
        cost = model_batch_cost(model, args.clip_seconds, sorted({1, args.max_batch_items, max(counts)}),
                                args.threads)
    print(f"\nspeechkit serve: {args.clip_seconds:g} s clips, Transformer d_model={args.d_model} "
          f"layers={args.layers}, {args.threads} torch thread(s) per server, batches of up to "
          f"{args.max_batch_items}, best of {args.repeats}, {os.cpu_count()} CPUs\n")
    print("| serving | clients | answered/planned | requests/s | p50 (s) | p99 (s) | errors |")
    print("|---|---|---|---|---|---|---|")
    for clients in counts:
        for name in servers:
            r = results[name][clients]
            print(f"| {name} | {clients} | {r['answered']}/{r['planned']} | {r['rps']:.2f} | "
                  f"{r['p50_s']:.3f} | "
                  f"{r['p99_s']:.3f} | {r['errors']} |")
    ratios = {clients: results["batched"][clients]["rps"]
              / max(results["one-at-a-time"][clients]["rps"], 1e-9) for clients in counts}
    print()
    for clients, ratio in ratios.items():
        print(f"batching at {clients} client(s): {ratio:.2f}x the requests/s of one-at-a-time serving")
    print("\nthe model alone, " + ", ".join(f"batch {batch}: {ms:.2f} ms per clip "
                                            f"({cost[1] / ms:.2f}x batch 1)" for batch, ms in cost.items()))
    results["ratios"] = ratios
    results["speedup"] = ratios[max(counts)]
    results["model_ms_per_clip"] = cost
    return results


if __name__ == "__main__":
    main()
