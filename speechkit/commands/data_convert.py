"""``speechkit data convert MANIFEST... --dest DIR --sample-rate R [--channels mix|N]``: the audio once as
FLAC at the model's rate and channels, and a manifest of the copies (:mod:`speechkit.data.convert`).

Example::

    speechkit data convert data/cv/train.json data/cv/valid.json data/cv/test.json \\
        --replacement data_root=data/cv --dest data/cv16k --sample-rate 16000
    python train.py hparams/train.yaml --data_folder data/cv16k
"""
from __future__ import annotations

import argparse
import os
import time

from speechkit.argtypes import name_value, number
from speechkit.terminal import Progress, add_progress_flags


def channels(text: str):
    """argparse ``type=`` of ``--channels``: ``mix`` or a channel index >= 0."""
    if text == "mix":
        return text
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 'mix' or a channel index >= 0, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifests", nargs="+", metavar="MANIFEST", help="manifests (.json, .jsonl, .csv)")
    parser.add_argument("--dest", required=True,
                        help="folder for the copies (audio/<name>/) and the manifests (<name>.json)")
    parser.add_argument("--sample-rate", type=number(int, 1), required=True,
                        help="the model's rate in Hz (the recipe's sample_rate)")
    parser.add_argument("--channels", type=channels, default="mix",
                        help="'mix' averages the channels; N keeps channel N alone")
    parser.add_argument("--field", action="append", default=None, metavar="NAME",
                        help="audio field to convert (repeat for several; default: wav, audio, flac, file, "
                             "path and *_wav fields)")
    parser.add_argument("--replacement", action="append", type=name_value, default=[], metavar="NAME=VALUE",
                        help="value of a $NAME placeholder in the manifests' paths (repeatable)")
    parser.add_argument("--subtype", choices=("PCM_16", "PCM_24"), default="PCM_16",
                        help="FLAC sample format")
    parser.add_argument("--workers", type=number(int, 1), default=min(8, os.cpu_count() or 1),
                        help="processes converting files")
    add_progress_flags(parser)


def run(args: argparse.Namespace) -> int:
    from speechkit.data.audio_policy import AudioPolicy
    from speechkit.data.convert import convert_manifest

    policy = AudioPolicy(args.sample_rate, args.channels)
    names = [os.path.splitext(os.path.basename(path))[0] for path in args.manifests]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        from speechkit.errors import ManifestError

        shared = os.path.join(args.dest, twice[0] + ".json")
        raise ManifestError(f"two manifests are named {twice[0]!r}; their copies would share {shared}: "
                            "convert them into separate --dest folders")
    for path in args.manifests:
        started = time.perf_counter()
        with Progress(f"convert {os.path.basename(path)}", unit="file", enabled=not args.no_progress) as bar:
            report = convert_manifest(path, args.dest, policy, fields=args.field,
                                      replacements=dict(args.replacement), subtype=args.subtype,
                                      num_workers=args.workers, progress=bar.report)
        clipped = f"; {report.clipped} samples clipped to full scale" if report.clipped else ""
        print(f"{report.manifest}: {report.converted} file(s) converted, {report.kept} kept from an earlier "
              f"run, {report.seconds / 3600:.2f} h of audio at {policy.describe()} in "
              f"{time.perf_counter() - started:.1f} s{clipped}")
    print(f"train on them with --data_folder {args.dest} (the manifests name the copies as $data_root/...)")
    return 0
