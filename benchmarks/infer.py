"""Batch jobs (`speechkit infer`): throughput with 1 and N workers; what the ledger and atomic writes cost.

Prints two tables, on a generated corpus (noise WAVs of 1-8 s) and a randomly initialised speechkit ASR model
folder (Fbank, Transformer encoder, CTC head):

1. overhead: the same batches through a plain loop (load, run the interface, keep the texts or ``np.save``
   each output, write the transcripts once) against a one-shard job (plan, shard lock, ledger flushed every
   100 items, atomic renamed outputs with their checksum, merge), in this process, for ``transcribe`` and
   ``encode``; the fastest of ``--repeats`` runs of each, interleaved, in wall time and in this process's CPU
   time (which other processes on a shared machine disturb much less);
2. workers: wall time, items/s and audio-seconds/s of ``speechkit infer`` with 1 and N processes (one thread
   each, ``--shard K --num-shards N``) over the same manifest, from start to merged results.

Usage:
    python benchmarks/infer.py [--items 240] [--workers 2] [--repeats 3] [--d-model 144] [--device cuda:0]

Nothing here is asserted in the tests; the numbers depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from speechkit.machine import machine_line

REPO = Path(__file__).resolve().parents[1]
YAML = """\
sample_rate: 16000
features: !new:speechkit.features.Fbank
  n_mels: 40
encoder: !new:speechkit.models.encoders.TransformerEncoder
  input_size: 40
  d_model: {d_model}
  num_heads: 4
  num_layers: {layers}
  ffn_dim: {ffn}
ctc_head: !new:speechkit.models.encoders.CTCHead
  d_model: {d_model}
  vocab_size: 29
tokenizer: !new:speechkit.data.encoders.CTCLabelEncoder
modules:
  features: !ref <features>
  encoder: !ref <encoder>
  ctc_head: !ref <ctc_head>
encoder_pipeline: [features, encoder, ctc_head]
decoding: {{blank_index: 0}}
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
    encoder: !ref <encoder>
    ctc_head: !ref <ctc_head>
    tokenizer: !ref <tokenizer>
  paths:
    encoder: encoder.safetensors
    ctc_head: ctc_head.safetensors
    tokenizer: tokenizer.txt
"""


def make_model(folder: Path, d_model: int, layers: int) -> Path:
    from speechkit.data.encoders import CTCLabelEncoder
    from speechkit.models.encoders import CTCHead, TransformerEncoder
    from speechkit.pretrained.loading import save_weights

    torch.manual_seed(0)
    folder.mkdir(parents=True)
    encoder = TransformerEncoder(40, d_model=d_model, num_heads=4, num_layers=layers, ffn_dim=4 * d_model)
    save_weights(encoder.state_dict(), folder / "encoder.safetensors")
    save_weights(CTCHead(d_model, 29).state_dict(), folder / "ctc_head.safetensors")
    CTCLabelEncoder(list("abcdefghijklmnopqrstuvwxyz '")).save(folder / "tokenizer.txt")
    (folder / "hyperparams.yaml").write_text(YAML.format(d_model=d_model, layers=layers, ffn=4 * d_model))
    return folder


def make_corpus(folder: Path, items: int, seed: int = 0) -> Path:
    import soundfile

    rng = np.random.default_rng(seed)
    (folder / "audio").mkdir(parents=True)
    manifest = {}
    for index in range(items):
        samples = int(rng.uniform(1.0, 8.0) * 16000)
        path = folder / "audio" / f"utt{index:05d}.wav"
        soundfile.write(path, (0.1 * rng.standard_normal(samples)).astype(np.float32), 16000)
        manifest[f"utt{index:05d}"] = {"wav": str(path), "duration": samples / 16000, "words": "a b"}
    path = folder / "manifest.json"
    path.write_text(json.dumps(manifest))
    return path


def timed(function, *args) -> tuple:
    """``(wall seconds, CPU seconds of this process)`` of ``function(*args)``."""
    wall, cpu = time.perf_counter(), time.process_time()
    function(*args)
    return time.perf_counter() - wall, time.process_time() - cpu


def plain_loop(model_folder: Path, manifest: Path, out: Path, task: str, max_batch_seconds: float,
               device: str = "cpu") -> None:
    """What one would write by hand: the same batches, no ledger, outputs saved directly."""
    from speechkit.data.manifest import load_manifest
    from speechkit.jobs.registry import make_task
    from speechkit.jobs.runner import batches_by_duration
    from speechkit.pretrained.interfaces import Pretrained

    rows = load_manifest(manifest)
    model = Pretrained.from_hparams(str(model_folder), run_opts={"device": device})
    adapter = make_task(task)
    durations = {i: row["duration"] for i, row in rows.items()}
    texts = {}
    out.mkdir(parents=True)
    for batch in batches_by_duration(sorted(rows), durations, max_batch_seconds):
        results = adapter.run(model, [model.load_audio(rows[i]["wav"]) for i in batch])
        for item_id, result in zip(batch, results):
            if task == "encode":
                np.save(out / f"{item_id}.npy", result)
            else:
                texts[item_id] = result
    if texts:
        (out / "transcripts.txt").write_text("".join(f"{i}\t{texts[i]}\n" for i in sorted(texts)))


def job_loop(model_folder: Path, manifest: Path, out: Path, task: str, max_batch_seconds: float,
             device: str = "cpu") -> None:
    from speechkit.jobs import JobConfig, run_job

    config = JobConfig(str(model_folder), str(manifest), str(out), task=task, progress=False,
                       max_batch_seconds=max_batch_seconds, flush_every=100, device=device)
    result = run_job(config, environ={})
    assert result.merged is not None


def run_workers(workers: int, model_folder: Path, manifest: Path, out: Path,
                max_batch_seconds: float, device: str = "cpu") -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TORCHELASTIC_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p))
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    started = time.perf_counter()
    command = [sys.executable, "-m", "speechkit", "infer", str(model_folder), str(manifest),
               "--output", str(out), "--num-shards", str(workers), "--no-progress",
               "--max-batch-seconds", str(max_batch_seconds), "--device", device]
    procs = [subprocess.Popen(command + ["--shard", str(k)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for k in range(workers)]
    outputs = [proc.communicate()[0] for proc in procs]
    elapsed = time.perf_counter() - started
    for proc, output in zip(procs, outputs):
        if proc.returncode != 0:
            raise SystemExit(f"a worker failed:\n{output}")
    if not (out / "summary.json").exists():
        raise SystemExit("the job was not merged:\n" + "\n".join(outputs))
    return elapsed


def main(argv=None) -> dict:
    print(machine_line(), flush=True)  # the figures below are true of this machine
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=240)
    parser.add_argument("--workers", type=int, default=2, help="N of the 1-vs-N comparison (0: skip it).")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--d-model", type=int, default=144)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--max-batch-seconds", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the in-process runs.")
    parser.add_argument("--no-overhead", action="store_true", help="Only the 1-vs-N workers table.")
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N (the workers share it)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    scratch = Path(tempfile.mkdtemp(prefix="speechkit-infer-bench-"))
    try:
        model = make_model(scratch / "model", args.d_model, args.layers)
        manifest = make_corpus(scratch / "data", args.items)
        audio = sum(row["duration"] for row in json.loads(manifest.read_text()).values())
        print(f"{args.items} items, {audio:.0f} s of audio, Transformer d_model {args.d_model} x "
              f"{args.layers} layers, {args.max_batch_seconds:g} padded s a batch, "
              f"torch threads {args.threads}, device {args.device}\n")
        results = {"overhead": {}, "workers": {}}
        plain_loop(model, manifest, scratch / "warm-up", "transcribe", args.max_batch_seconds,
                   args.device)  # file cache, and CUDA's start-up
        print("| task | plain loop: wall, CPU | job (ledger + atomic writes + merge): wall, CPU | overhead: "
              "wall, CPU |")
        print("| --- | --- | --- | --- |")
        for task in () if args.no_overhead else ("transcribe", "encode"):
            times: dict = {"plain": [], "job": []}
            for repeat in range(args.repeats):
                for name, function in (("plain", plain_loop), ("job", job_loop)):
                    out = scratch / f"{task}-{name}-{repeat}"
                    times[name].append(timed(function, model, manifest, out, task, args.max_batch_seconds,
                                             args.device))
                    shutil.rmtree(out)
            plain = [min(t[k] for t in times["plain"]) for k in (0, 1)]
            job = [min(t[k] for t in times["job"]) for k in (0, 1)]
            overhead = [job[k] / plain[k] - 1 for k in (0, 1)]
            results["overhead"][task] = {"plain_s": plain, "job_s": job, "overhead": overhead}
            print(f"| {task} | {plain[0]:.2f} s, {plain[1]:.2f} s | {job[0]:.2f} s, {job[1]:.2f} s | "
                  f"{100 * overhead[0]:+.1f}%, {100 * overhead[1]:+.1f}% |")
        if args.workers > 1:
            walls: dict = {1: [], args.workers: []}
            for repeat in range(max(1, args.repeats - 1)):  # interleaved: a change of load hits both
                for workers in walls:
                    walls[workers].append(run_workers(workers, model, manifest,
                                                      scratch / f"workers-{workers}-{repeat}",
                                                      args.max_batch_seconds, args.device))
            print("\n| workers | wall | items/s | audio-s/s | speed-up |")
            print("| --- | --- | --- | --- | --- |")
            for workers, elapsed in ((w, min(times)) for w, times in walls.items()):
                results["workers"][workers] = elapsed
                speedup = min(walls[1]) / elapsed
                print(f"| {workers} | {elapsed:.2f} s | {args.items / elapsed:.1f} | {audio / elapsed:.1f} | "
                      f"{speedup:.2f}x |")
        return results
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
