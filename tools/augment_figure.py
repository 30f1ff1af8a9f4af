#!/usr/bin/env python3
"""Spectrograms of one utterance under each augmentation of ``speechkit.augment`` (docs/augment.png).

The utterance is spoken by the built-in corpus' flite voice ``slt`` (or read from ``--wav``); each panel is
the log-mel spectrogram of the clean item or of one augmentation's output, with the same seed.

Usage:
    python tools/augment_figure.py docs/augment.png
    python tools/augment_figure.py out.png --wav my.wav --seed 3
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # speechkit of this checkout

from speechkit import augment  # noqa: E402
from speechkit.data import audio  # noqa: E402
from speechkit.features import Fbank  # noqa: E402

RATE = 16000
TEXT = "she had your dark suit in greasy wash water all year"


def spoken_utterance() -> torch.Tensor:
    from speechkit.corpus.voices import check_engines, synthesize_many, voice_by_name

    voice = voice_by_name("slt")
    check_engines([voice])
    [wave] = synthesize_many([(TEXT, 1.0)], voice)
    return torch.from_numpy(wave).float()


def panels(rooms: int) -> dict:
    return {
        "clean": None,
        "SpeedPerturb 1.15": augment.SpeedPerturb(speeds=[1.15]),
        "PitchShift +4 semitones": augment.PitchShift(semitones=(4, 4)),
        "FormantWarp 1.15": augment.FormantWarp(warp_range=(1.15, 1.15)),
        "Equalizer": augment.Equalizer(tilt_db_per_octave=(-4, -4), peaks=3),
        "BandLimit (telephone)": augment.BandLimit(low_hz=(300, 300), high_hz=(3400, 3400)),
        "MuLaw 4 bits": augment.MuLaw(bits=4),
        "FrequencyDrop": augment.FrequencyDrop(bands=(3, 3)),
        "ChunkDrop": augment.ChunkDrop(chunks=(4, 4), max_ms=150),
        "AddNoise 5 dB (pink)": augment.AddNoise(snr_db=(5, 5), colors=["pink"]),
        "Reverb (RT60 0.7 s)": augment.Reverb(rooms=rooms, rt60=(0.7, 0.7), source_distance=(2.5, 3.0)),
        "RandomGain + clipping": augment.RandomGain(gain_db=(6, 6), clip_probability=1.0,
                                                    clip_level=(0.2, 0.2)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output", help="PNG file to write")
    parser.add_argument("--wav", help="an utterance to use instead of the synthesized one (any rate)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rooms", type=int, default=2)
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wave = (audio.read(args.wav, channels=0, sample_rate=RATE, resample_to_rate=True) if args.wav
            else spoken_utterance())
    fbank = Fbank(sample_rate=RATE, n_mels=80)
    figure, axes = plt.subplots(4, 3, figsize=(13, 10), constrained_layout=True)
    for axis, (title, augmentation) in zip(axes.flat, panels(args.rooms).items()):
        out = wave if augmentation is None else augmentation.augment(wave, augment.generator_for(args.seed))
        feats, _ = fbank(out.unsqueeze(0), torch.tensor([out.shape[0]]))
        axis.imshow(feats[0].T.numpy(), origin="lower", aspect="auto", cmap="magma",
                    extent=(0, out.shape[0] / RATE, 0, 80))
        axis.set_title(title, fontsize=10)
        axis.set_xlabel("seconds", fontsize=8)
        axis.set_ylabel("mel channel", fontsize=8)
    figure.suptitle("speechkit.augment: log-mel spectrograms of one utterance", fontsize=12)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.output, dpi=56)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
