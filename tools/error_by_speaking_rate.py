#!/usr/bin/env python3
"""Word errors grouped by speaking rate: is a model losing the fast utterances?

Reads a per-utterance report written by ``ErrorRateStats.write_stats`` (a recipe's ``wer_test.txt``) and the
manifest of the same set, sorts the utterances by characters of transcript per second of audio, splits them
into groups of equal size and prints each group's WER with its insertions, deletions and substitutions.
A CTC model whose frames are too coarse for fast speech shows deletions that grow with the rate.

Run:
    python tools/error_by_speaking_rate.py results/demo/wer_test.txt data/SynthSpeech/test.json --groups 4
"""
from __future__ import annotations

import argparse
import os
import re
import sys

from speechkit.data.manifest import load_manifest
from speechkit.errors import SpeechkitError

# "<id>, %WER 71.43 [ 5 / 7, 0 ins, 1 del, 4 sub ]" (the header of each utterance's alignment; %CER alike)
_HEADER = re.compile(r"^(?P<id>\S+), %[WC]ER [\d.]+ \[ \d+ / (?P<words>\d+), "
                     r"(?P<ins>\d+) ins, (?P<dels>\d+) del, (?P<subs>\d+) sub \]$")


def read_report(path: str) -> dict:
    """id -> (words, insertions, deletions, substitutions) from a ``write_stats`` report."""
    counts = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            match = _HEADER.match(line.rstrip("\n"))
            if match:
                counts[match["id"]] = tuple(int(match[k]) for k in ("words", "ins", "dels", "subs"))
    if not counts:
        raise SystemExit(f"{path}: no per-utterance lines like "
                         f"'<id>, %WER 12.50 [ 1 / 8, 0 ins, 1 del, 0 sub ]'")
    return counts


def speaking_rates(manifest_path: str, ids) -> dict:
    """id -> transcript characters per second of audio, for the ids of the report."""
    try:  # any manifest format speechkit reads; audio files are not needed, only durations and texts
        manifest = load_manifest(manifest_path, {"data_root": os.path.dirname(manifest_path)},
                                 check_files=False, require_duration=True, types={"text": str})
    except (OSError, SpeechkitError) as error:
        raise SystemExit(str(error)) from error
    missing = [i for i in ids if i not in manifest]
    if missing:
        raise SystemExit(f"{manifest_path}: {len(missing)} ids of the report are missing, "
                         f"e.g. {missing[0]!r}")
    return {i: len(manifest[i]["text"]) / float(manifest[i]["duration"]) for i in ids}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", help="per-utterance report (wer_test.txt)")
    parser.add_argument("manifest", help="the set's JSON manifest (duration and text of each id)")
    parser.add_argument("--groups", type=int, default=4, help="groups of equal size, slowest first")
    args = parser.parse_args(argv)
    counts = read_report(args.report)
    rates = speaking_rates(args.manifest, counts)
    ordered = sorted(counts, key=lambda i: rates[i])
    groups = max(1, min(args.groups, len(ordered)))
    header = ("chars/s", "utts", "words", "WER %", "ins", "del", "sub")
    print(" | ".join(f"{name:>{11 if i == 0 else 5}}" for i, name in enumerate(header)))
    for g in range(groups):
        part = ordered[g * len(ordered) // groups:(g + 1) * len(ordered) // groups]
        words, ins, dels, subs = (sum(counts[i][k] for i in part) for k in range(4))
        span = f"{rates[part[0]]:.1f}-{rates[part[-1]]:.1f}"
        wer = 100 * (ins + dels + subs) / max(words, 1)
        print(f"{span:>11} | {len(part):>5} | {words:>5} | {wer:>5.1f} | {ins:>5} | {dels:>5} | {subs:>5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
