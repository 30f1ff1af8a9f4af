"""Diarization error rate with and without overlap-aware re-segmentation, in the same run.

Trains an overlapped-speech detector (:class:`~speechkit.diarization.trained_vad.FrameVAD` with
``target="overlap"``) on conversations of the corpus' training speakers, then diarizes the conversations
given (those of ``speechkit corpus ... --conversations N``: held-out speakers) with a speaker model, each
clustering method three ways: one speaker per frame (no re-segmentation), overlapped frames found by the
detector given their second speaker, and the reference's overlapped frames given it (what a perfect
detector would reach). Also prints the detector's frame precision and recall on those conversations. DER
with a 0.25 s collar, overlap scored.

Usage:
    speechkit corpus data/SynthSpeech-speaker --conversations 12
    OMP_NUM_THREADS=1 python benchmarks/diarization.py data/SynthSpeech-speaker \\
        --model results/speaker-model --work /tmp/diarization-work
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speechkit.corpus.conversations import (  # noqa: E402
    load_speaker_rows,
    read_conversations,
    write_conversations,
)
from speechkit.diarization import Diarizer  # noqa: E402
from speechkit.diarization.overlap import OverlapDetector, overlap_segments  # noqa: E402
from speechkit.diarization.trained_vad import overlap_frames, reference_frames, train_frame_vad  # noqa: E402
from speechkit.machine import machine_line  # noqa: E402
from speechkit.metrics.diarization import diarization_error_rate  # noqa: E402
from speechkit.pretrained.speaker import SpeakerRecognition  # noqa: E402


def reference_overlap(turns: list):
    """A detector that returns the reference's overlapped segments (what a perfect detector finds)."""
    return lambda wave, sample_rate: overlap_segments(turns, wave.shape[0] / sample_rate)


def score(model, options: dict, conversations: list, overlap_for) -> dict:
    """DER shares (%) and speaker-count errors over ``conversations``; ``overlap_for(turns)``: the overlap
    detector for a conversation with reference ``turns`` (or None)."""
    totals = {"missed": 0.0, "false_alarm": 0.0, "confusion": 0.0, "total": 0.0}
    count_errors = 0
    for _, wave, reference in conversations:
        diarizer = Diarizer(model, overlap=overlap_for(reference), **options)
        turns = diarizer.diarize(torch.from_numpy(wave))
        result = diarization_error_rate(reference, turns, collar=0.25)
        for key in totals:
            totals[key] += result[key]
        count_errors += len({s for _, _, s in turns}) != len({s for _, _, s in reference})
    share = {key: 100 * totals[key] / totals["total"] for key in ("missed", "false_alarm", "confusion")}
    return {"der": sum(share.values()), **share, "count_errors": count_errors}


def detector_accuracy(detector: OverlapDetector, conversations: list) -> tuple:
    """Frame precision and recall (%) of the detector's overlapped segments against the reference."""
    hits = found = true = 0
    for _, wave, turns in conversations:
        frames = int(wave.shape[0] / 160)
        reference = overlap_frames(turns, frames)
        hypothesis = reference_frames(detector(torch.from_numpy(wave), 16000), frames)
        hits += int((reference & hypothesis).sum())
        found += int(hypothesis.sum())
        true += int(reference.sum())
    return 100 * hits / max(found, 1), 100 * hits / max(true, 1)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path, help="a built-in corpus folder (speechkit corpus) "
                        "with conversations/")
    parser.add_argument("--model", required=True, help="a speaker model folder (speechkit export)")
    parser.add_argument("--work", type=Path, required=True,
                        help="where the training conversations and the trained detector are kept")
    parser.add_argument("--conversations", type=Path, default=None,
                        help="test conversations folder (default: CORPUS/conversations)")
    parser.add_argument("--train-count", type=int, default=96)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--threshold", type=float, default=0.5, help="the detector's probability threshold")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    train_folder = args.work / f"train-conversations-{args.train_count}"
    if not (train_folder / "conversations.json").exists():
        rows = load_speaker_rows(str(args.corpus / "train.json"), str(args.corpus))
        write_conversations(rows, str(train_folder), count=args.train_count, seed=11)
    train = [(wave, turns) for _, wave, turns in read_conversations(str(train_folder))]
    test = read_conversations(str(args.conversations or args.corpus / "conversations"))
    weights = args.work / f"overlap-{args.train_count}-{args.steps}.safetensors"
    if weights.exists():  # trained by an earlier run of the same settings
        detector = OverlapDetector.load(weights, threshold=args.threshold)
        trained = f"loaded from {weights}"
    else:
        started = time.perf_counter()
        detector = OverlapDetector(train_frame_vad(train, steps=args.steps, target="overlap"),
                                   threshold=args.threshold)
        detector.save(weights)
        trained = f"{args.steps} steps in {time.perf_counter() - started:.0f} s"
    model = SpeakerRecognition.from_hparams(args.model)
    precision, recall = detector_accuracy(detector, test)
    print(machine_line())
    print(f"overlap detector: trained on {sum(len(w) for w, _ in train) / 16000:.0f} s ({len(train)} "
          f"conversations of training speakers), {trained}; on the {len(test)} test conversations "
          f"frame precision {precision:.1f}%, recall {recall:.1f}% (threshold {args.threshold})\n")
    print("| clustering | overlapped frames | DER | missed | false alarm | confusion | speaker count wrong |")
    print("|---|---|---|---|---|---|---|")
    methods = (("spectral", {"method": "spectral"}),
               (f"agglomerative, threshold {model.threshold:.3f}",
                {"method": "agglomerative", "threshold": model.threshold}))
    ways = (("one speaker each", lambda turns: None), ("detected: second speaker", lambda turns: detector),
            ("reference: second speaker", reference_overlap))
    for label, options in methods:
        for name, overlap_for in ways:
            result = score(model, options, test, overlap_for)
            print(f"| {label} | {name} | {result['der']:.2f}% | {result['missed']:.2f}% | "
                  f"{result['false_alarm']:.2f}% | {result['confusion']:.2f}% | "
                  f"{result['count_errors']} of {len(test)} |", flush=True)


if __name__ == "__main__":
    main()
