"""Batch jobs `separate` and `extract`: each item alone (byte-exact) against `--padded-batches` (faster).

Runs the same one-shard job twice per task, over a generated corpus (noise WAVs of 1-4 s) and randomly
initialised model folders (ConvTasNet ``small`` preset at 8 kHz; the wav2vec 2.0 ``small`` preset, its last
layer): once running every item alone, once running every batch padded together. Prints, per task and mode,
the wall time from start to merged results (the fastest of ``--repeats`` runs, interleaved), items/s,
audio-seconds/s, the ratio to the item-alone run, and the largest difference of the padded outputs from the
exact ones.

Usage:
    python benchmarks/infer_padding.py [--items 32] [--repeats 2] [--device cpu] [--max-batch-seconds 32]

Nothing here is asserted in the tests; the numbers depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile
import torch

from speechkit.machine import machine_line

REPO = Path(__file__).resolve().parents[1]
SEPARATOR_YAML = """\
interface: SeparationModel
sample_rate: 8000
num_speakers: 2
separator: !new:speechkit.models.ConvTasNet
  num_speakers: 2
{sizes}modules: {separator: !ref <separator>}
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables: {separator: !ref <separator>}
  paths: {separator: separator.safetensors}
"""
FEATURES_YAML = """\
interface: Wav2Vec2Features
sample_rate: 16000
config: !apply:speechkit.models.wav2vec2.Wav2Vec2Config.preset [small]
normalize: !new:speechkit.models.wav2vec2.WaveformNormalization
wav2vec2: !new:speechkit.models.wav2vec2.Wav2Vec2Model [!ref <config>]
modules: {normalize: !ref <normalize>, wav2vec2: !ref <wav2vec2>}
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables: {wav2vec2: !ref <wav2vec2>}
  paths: {wav2vec2: encoder.safetensors}
"""


def make_files(folder: Path, items: int) -> dict:
    """Model folders and a manifest of ``items`` noise WAVs of 1-4 s at 16 kHz."""
    from speechkit.models import ConvTasNet
    from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model
    from speechkit.pretrained.loading import save_weights

    torch.manual_seed(0)
    (folder / "separator").mkdir(parents=True)
    from speechkit.models.conv_tasnet import PRESETS

    sizes = "".join(f"  {key}: {value}\n" for key, value in PRESETS["small"].items())
    (folder / "separator" / "hyperparams.yaml").write_text(SEPARATOR_YAML.replace("{sizes}", sizes))
    save_weights(ConvTasNet.from_preset("small", num_speakers=2).state_dict(),
                 folder / "separator" / "separator.safetensors")
    (folder / "features").mkdir()
    (folder / "features" / "hyperparams.yaml").write_text(FEATURES_YAML)
    save_weights(Wav2Vec2Model(Wav2Vec2Config.preset("small")).state_dict(),
                 folder / "features" / "encoder.safetensors")
    rng = np.random.default_rng(0)
    (folder / "audio").mkdir()
    manifest = {}
    for index in range(items):
        samples = int(rng.uniform(1.0, 4.0) * 16000)
        path = folder / "audio" / f"noise{index:04d}.wav"
        soundfile.write(path, (0.1 * rng.standard_normal(samples)).astype(np.float32), 16000)
        manifest[f"noise{index:04d}"] = {"wav": str(path), "duration": samples / 16000}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return {"separate": folder / "separator", "extract": folder / "features",
            "manifest": folder / "manifest.json", "seconds": sum(r["duration"] for r in manifest.values())}


def run_once(files: dict, task: str, padded: bool, out: Path, args) -> float:
    from speechkit.jobs import JobConfig, run_job

    shutil.rmtree(out, ignore_errors=True)
    config = JobConfig(str(files[task]), str(files["manifest"]), str(out), task=task,
                       task_options={"padded_batches": padded}, max_batch_seconds=args.max_batch_seconds,
                       device=args.device, progress=False)
    start = time.perf_counter()
    result = run_job(config, environ={})
    elapsed = time.perf_counter() - start
    assert result.merged is not None and result.merged["items"] == args.items
    return elapsed


def largest_difference(exact: Path, padded: Path) -> float:
    worst = 0.0
    for path in sorted((exact / "outputs").rglob("*.*")):
        other = padded / path.relative_to(exact)
        read = np.load if path.suffix == ".npy" else (lambda p: soundfile.read(p, dtype="float32")[0])
        worst = max(worst, float(np.abs(read(path) - read(other)).max()))
    return worst


def main(argv=None) -> dict:
    print(machine_line(), flush=True)  # the figures below are true of this machine
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--max-batch-seconds", type=float, default=32.0)
    parser.add_argument("--tasks", nargs="+", default=["separate", "extract"],
                        choices=["separate", "extract"])
    args = parser.parse_args(argv)
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="speechkit-infer-padding-") as tmp:
        tmp = Path(tmp)
        files = make_files(tmp / "files", args.items)
        print(f"{args.items} items, {files['seconds']:.1f} s of audio, device {args.device}, "
              f"batches of at most {args.max_batch_seconds:g} padded seconds, best of {args.repeats}\n")
        print("| task | mode | wall s | items/s | audio-s/s | speed-up | max abs difference |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for task in args.tasks:
            times = {"alone": [], "padded": []}
            for _ in range(args.repeats):  # interleaved, so that a change of load hits both modes
                for mode in times:
                    times[mode].append(run_once(files, task, mode == "padded", tmp / task / mode, args))
            best = {mode: min(values) for mode, values in times.items()}
            difference = largest_difference(tmp / task / "alone", tmp / task / "padded")
            results[task] = {**best, "difference": difference}
            for mode, seconds in best.items():
                shown = f"{difference:.1e}" if mode == "padded" else "0 (exact)"
                print(f"| {task} | {mode} | {seconds:.2f} | {args.items / seconds:.1f} | "
                      f"{files['seconds'] / seconds:.1f} | {best['alone'] / seconds:.2f} | {shown} |")
    return results


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
