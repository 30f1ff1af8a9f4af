"""Speaker embedding and diarization speed: embedding throughput (seconds of audio embedded per second) with
the PyTorch modules and with the exported ONNX graph, and the diarization real-time factor (seconds of
compute per second of recording) with each, for an ECAPA-TDNN preset with random weights.

The alternative in the same run is the other backend: onnxruntime runs the same graph (features included)
that ``speechkit export --format onnx`` writes; the table gives the ratio.

Usage:
    OMP_NUM_THREADS=1 python benchmarks/speaker.py                      # small preset, one thread
    python benchmarks/speaker.py --preset paper --seconds 3 --batch 8 --repeats 3
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.machine import machine_line  # noqa: E402
from speechkit.models.speaker import PRESETS  # noqa: E402

HYPERPARAMS = """\
interface: SpeakerRecognition
sample_rate: 16000
compute_features: !new:speechkit.features.Fbank
  n_mels: 80
mean_var_norm: !new:speechkit.features.UtteranceNormalization
  norm_vars: False
embedding_model: !new:speechkit.models.speaker.ECAPATDNN
  input_size: 80
{sizes}modules:
  compute_features: !ref <compute_features>
  mean_var_norm: !ref <mean_var_norm>
  embedding_model: !ref <embedding_model>
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
    embedding_model: !ref <embedding_model>
  paths:
    embedding_model: embedding_model.safetensors
"""


def write_model(folder: Path, preset: str) -> Path:
    from speechkit.models.speaker import ECAPATDNN
    from speechkit.pretrained.loading import save_weights

    sizes = PRESETS[preset]
    text = "".join(f"  {k}: {list(v) if isinstance(v, tuple) else v}\n" for k, v in sizes.items())
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hyperparams.yaml").write_text(HYPERPARAMS.format(sizes=text))
    torch.manual_seed(0)
    save_weights(ECAPATDNN.from_preset(preset, 80).state_dict(), folder / "embedding_model.safetensors")
    return folder


def conversation(seconds: float, seed: int = 0) -> torch.Tensor:
    """Alternating turns of two tone 'voices' with pauses (the audio's content does not change the speed)."""
    rng = np.random.default_rng(seed)
    wave, t = np.zeros(int(seconds * 16000), dtype=np.float32), 0.3
    while t < seconds - 1.0:
        length = rng.uniform(1.0, 3.0)
        n = int(min(length, seconds - t) * 16000)
        pitch = 120 if rng.random() < 0.5 else 210
        wave[int(t * 16000):int(t * 16000) + n] = 0.2 * np.sin(2 * np.pi * pitch * np.arange(n) / 16000)
        t += length + rng.uniform(0.2, 0.8)
    return torch.from_numpy(wave + 0.001 * rng.standard_normal(wave.shape).astype(np.float32))


def timed(function, repeats: int) -> float:
    function()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS))
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each embedded item")
    parser.add_argument("--batch", type=int, default=8, help="items per embedding batch")
    parser.add_argument("--conversation-seconds", type=float, default=60.0,
                        help="length of the diarized audio")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs (the best counts)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    from speechkit.diarization import Diarizer
    from speechkit.export import export_folder
    from speechkit.pretrained import SpeakerRecognition

    print(machine_line())
    with tempfile.TemporaryDirectory() as scratch:
        source = write_model(Path(scratch) / "model", args.preset)
        exported = export_folder(source, Path(scratch) / "onnx", formats=["onnx"])
        models = {"torch": SpeakerRecognition.from_hparams(str(source)),
                  "onnx": SpeakerRecognition.from_hparams(str(exported), backend="onnx")}
        samples = int(args.seconds * 16000)
        wavs = 0.1 * torch.randn(args.batch, samples, generator=torch.Generator().manual_seed(0))
        lengths = torch.full((args.batch,), samples)
        wave = conversation(args.conversation_seconds)
        settings = {"default": {}, "one scale": dict(window=1.5, step=0.5, scales=())}
        rows = {}
        for name, model in models.items():
            embed = timed(lambda m=model: m.embed_batch(wavs, lengths), args.repeats)
            rtfs = [timed(lambda d=Diarizer(model, **options): d.diarize(wave, num_speakers=2),
                          max(1, args.repeats - 2)) / args.conversation_seconds
                    for options in settings.values()]
            rows[name] = (args.batch * args.seconds / embed, *rtfs)
    default = Diarizer(None)
    print(f"\nECAPA-TDNN preset {args.preset!r}, {args.batch} x {args.seconds:g} s per embedding batch, "
          f"{args.conversation_seconds:g} s diarized, best of {args.repeats}; diarization by default: "
          f"{default.window:g} s windows every {default.step:g} s with the scales {list(default.scales)} s; "
          "one scale: 1.5 s windows every 0.5 s")
    print("| backend | embedding throughput (audio s / s) | ratio | diarization RTF (default) | ratio | "
          "diarization RTF (one scale) | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, (throughput, rtf, single) in rows.items():
        torch_row = rows["torch"]
        print(f"| {name} | {throughput:.1f} | {throughput / torch_row[0]:.2f} | {rtf:.4f} | "
              f"{rtf / torch_row[1]:.2f} | {single:.4f} | {single / torch_row[2]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
