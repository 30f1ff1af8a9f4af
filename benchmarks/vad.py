"""Voice activity accuracy: the trained frame classifier (``speechkit.diarization.trained_vad``) against the
energy detector, in the same run, on generated conversations of held-out speakers, clean and with noise.

Trains a :class:`FrameVAD` on conversations built from the corpus' train split (``--train-count``), then
scores both detectors on conversations of the test split's speakers (never heard in training), clean and
mixed with white, pink and brown noise (brown is never used in training) at the SNRs listed. Frame level, no
collar: missed = reference speech frames called non-speech, false alarm = non-speech frames called speech,
both as a percentage of the reference speech (the convention of DER).

Usage:
    OMP_NUM_THREADS=1 python benchmarks/vad.py data/SynthSpeech --work /tmp/vad-work
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.corpus.conversations import (  # noqa: E402
    load_speaker_rows,
    read_conversations,
    write_conversations,
)
from speechkit.diarization.trained_vad import (  # noqa: E402
    TrainedVAD,
    add_noise,
    reference_frames,
    train_frame_vad,
)
from speechkit.diarization.vad import energy_vad  # noqa: E402
from speechkit.machine import machine_line  # noqa: E402

CONDITIONS = [(None, None), ("white", 20), ("white", 10), ("pink", 10), ("pink", 5), ("brown", 10),
              ("brown", 5)]


def conversations(corpus: Path, split: str, output: Path, count: int, seed: int) -> list:
    """``[(wave, turns), ...]`` of ``count`` conversations of ``split``'s speakers (written once)."""
    if not (output / "conversations.json").exists():
        write_conversations(load_speaker_rows(str(corpus / f"{split}.json"), str(corpus)), str(output),
                            count=count, seed=seed)
    return [(wave, turns) for _, wave, turns in read_conversations(str(output))]


def frame_errors(reference: np.ndarray, segments: list) -> tuple:
    hypothesis = reference_frames(segments, reference.shape[0])
    return int((reference & ~hypothesis).sum()), int((~reference & hypothesis).sum())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path, help="a built-in corpus folder (speechkit corpus)")
    parser.add_argument("--work", type=Path, required=True, help="where the conversations are written")
    parser.add_argument("--train-count", type=int, default=16)
    parser.add_argument("--test-count", type=int, default=12)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    train = conversations(args.corpus, "train", args.work / "train", args.train_count, seed=11)
    test = conversations(args.corpus, "test", args.work / "test", args.test_count, seed=12)
    started = time.perf_counter()
    vad = TrainedVAD(train_frame_vad(train, steps=args.steps))
    trained_s = time.perf_counter() - started
    print(machine_line())
    print(f"trained on {sum(len(w) for w, _ in train) / 16000:.0f} s ({len(train)} conversations) in "
          f"{trained_s:.0f} s; tested on {sum(len(w) for w, _ in test) / 16000:.0f} s ({len(test)} "
          "conversations of held-out speakers)\n")
    print("| noise | SNR (dB) | energy: missed | energy: false alarm | trained: missed | trained: false "
          "alarm |")
    print("|---|---|---|---|---|---|")
    for kind, snr in CONDITIONS:
        rng = np.random.default_rng(99)
        speech, errors = 0, {"energy": [0, 0], "trained": [0, 0]}
        for wave, turns in test:
            noisy = add_noise(wave, kind, snr, rng)
            reference = reference_frames(turns, int(len(noisy) / 160))
            speech += int(reference.sum())
            for name, detector in (("energy", energy_vad), ("trained", vad)):
                missed, false_alarm = frame_errors(reference, detector(torch.from_numpy(noisy), 16000))
                errors[name][0] += missed
                errors[name][1] += false_alarm
        cells = [f"{100 * value / speech:.2f}%" for name in ("energy", "trained") for value in errors[name]]
        print(f"| {kind or 'none'} | {snr if snr is not None else '-'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
