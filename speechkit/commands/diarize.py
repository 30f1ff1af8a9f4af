"""``speechkit diarize FILE... --model MODEL --rttm out.rttm``: who spoke when, as RTTM.

Each file is diarized with the speaker model folder ``--model`` (interface SpeakerRecognition): voice
activity detection (by energy, or by the trained detector whose weights ``--vad`` names,
:class:`speechkit.diarization.TrainedVAD`), overlapped speech given a second speaker when ``--overlap``
names the weights of an :class:`speechkit.diarization.OverlapDetector`, embeddings of
``--window``-second windows every ``--step`` seconds (their similarities averaged with those of the longer
``--scales`` windows), clustering (``--clustering spectral`` estimates the
number of speakers from the eigengap, ``agglomerative`` stops at ``--threshold``; ``--num-speakers`` fixes
it). With ``--reference REF.rttm`` the diarization error rate (collar ``--collar`` seconds each side of a
reference boundary) is printed per file and over all files.

Example::

    speechkit diarize meeting.wav --model results/speaker-model --rttm meeting.rttm
    speechkit diarize data/conversations/*.wav --model results/speaker-model --rttm hyp.rttm \\
        --reference data/conversations/all.rttm
"""
from __future__ import annotations

import argparse
import os

from speechkit.commands.model_source import add_model_source_arguments, from_hparams_options, model_source


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("audio", nargs="+", help="Recordings (any format soundfile reads, any rate).")
    add_model_source_arguments(parser, model="option")
    parser.add_argument("--rttm", required=True, help="RTTM file to write (one file id per recording: its "
                        "file name without extension).")
    parser.add_argument("--num-speakers", type=int, default=None, help="Speakers per recording (default: "
                        "estimated).")
    parser.add_argument("--max-speakers", type=int, default=8, help="Most speakers an estimate may give.")
    parser.add_argument("--clustering", choices=["spectral", "agglomerative"], default="spectral")
    parser.add_argument("--threshold", type=float, default=0.5,
                        help="Agglomerative: cosine similarity below which clusters stay apart.")
    parser.add_argument("--window", type=float, default=0.75, help="Embedding window, seconds.")
    parser.add_argument("--step", type=float, default=0.25, help="Embedding window step, seconds.")
    parser.add_argument("--scales", type=float, nargs="*", default=[1.5, 1.0], metavar="SECONDS",
                        help="Longer windows whose similarities are averaged with the --window ones "
                             "(multi-scale); give none for one scale.")
    parser.add_argument("--reference", default=None, help="Reference RTTM: print the DER of each file.")
    parser.add_argument("--collar", type=float, default=0.25,
                        help="Seconds not scored on each side of a reference boundary (default 0.25).")
    parser.add_argument("--vad", default=None, metavar="WEIGHTS", help="Weights of a trained voice activity "
                        "detector (TrainedVAD.save; docs/speaker.md); default: the energy detector.")
    parser.add_argument("--overlap", default=None, metavar="WEIGHTS", help="Weights of a trained overlapped-"
                        "speech detector (OverlapDetector.save; docs/speaker.md): its frames also get the "
                        "nearest other speaker; default: one speaker per frame.")


def run(args: argparse.Namespace) -> int:
    from speechkit.data.rttm import read_rttm, write_rttm
    from speechkit.diarization import Diarizer, OverlapDetector, TrainedVAD
    from speechkit.errors import DataError
    from speechkit.metrics.diarization import diarization_error_rate
    from speechkit.pretrained.speaker import SpeakerRecognition

    ids = [os.path.splitext(os.path.basename(path))[0] for path in args.audio]
    for path in args.audio:
        if not os.path.isfile(path):
            raise DataError(f"no audio file {path!r}")
    if len(set(ids)) != len(ids):
        raise DataError("two recordings share a file name (the RTTM file id): rename one")
    reference = read_rttm(args.reference) if args.reference else None
    if reference is not None:
        missing = [file_id for file_id in ids if file_id not in reference]
        if missing:
            raise DataError(f"{args.reference}: no turns for {', '.join(missing[:5])}")
    for flag, path in (("--vad", args.vad), ("--overlap", args.overlap)):
        if path is not None and not os.path.isfile(path):
            raise DataError(f"{flag}: no weight file {path!r}")
    vad = TrainedVAD.load(args.vad) if args.vad is not None else None
    overlap = OverlapDetector.load(args.overlap) if args.overlap is not None else None
    model = SpeakerRecognition.from_hparams(model_source(args), run_opts={"device": args.device},
                                            **from_hparams_options(args))
    diarizer = Diarizer(model, window=args.window, step=args.step, scales=args.scales, method=args.clustering,
                        threshold=args.threshold, max_speakers=args.max_speakers, vad=vad, overlap=overlap)
    results, totals = {}, {"missed": 0.0, "false_alarm": 0.0, "confusion": 0.0, "total": 0.0}
    count_errors = 0
    for file_id, path in zip(ids, args.audio):
        results[file_id] = diarizer.diarize_file(path, args.num_speakers)
        if reference is not None:
            score = diarization_error_rate(reference[file_id], results[file_id], collar=args.collar)
            for key in totals:
                totals[key] += score[key]
            found = len({s for _, _, s in results[file_id]})
            true = len({s for _, _, s in reference[file_id]})
            count_errors += found != true
            print(f"{file_id}: DER {100 * score['der']:.2f}% (missed {score['missed']:.2f} s, false alarm "
                  f"{score['false_alarm']:.2f} s, confusion {score['confusion']:.2f} s); speakers {found} "
                  f"(reference {true})", flush=True)
    write_rttm(args.rttm, results)
    if reference is not None and totals["total"] > 0:
        errors = totals["missed"] + totals["false_alarm"] + totals["confusion"]
        share = {key: 100 * totals[key] / totals["total"] for key in ("missed", "false_alarm", "confusion")}
        print(f"all {len(ids)} recordings: DER {100 * errors / totals['total']:.2f}% "
              f"(collar {args.collar} s: missed {share['missed']:.2f}%, false alarm "
              f"{share['false_alarm']:.2f}%, confusion "
              f"{share['confusion']:.2f}%); speaker count wrong in {count_errors} of {len(ids)}", flush=True)
    print(args.rttm, flush=True)
    return 0
