"""``speechkit embed``: a vocoder's mel "embeddings" of a manifest's audio, and blends between two inputs.

Example::

    speechkit embed results/vocoder-model data/test.json --output emb/ --interpolate utt1 utt2 --steps 5
    speechkit infer results/vocoder-model emb/manifest.json --output gen/ --task generate

writes ``emb/<id>.npy`` for every row, ``emb/utt1~utt2~0.npy`` ... ``~4.npy`` (alpha 0, 0.25, ..., 1) and
``emb/manifest.json``, which the ``generate`` job turns into one WAV per array (docs/vocoder.md).
"""
from __future__ import annotations

import argparse

from speechkit.argtypes import name_value
from speechkit.terminal import Progress, add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="Vocoder model folder: local path, Hub repo id or http(s) URL.")
    parser.add_argument("manifest", help="Manifest (JSON, JSON Lines or CSV) of the input audio.")
    parser.add_argument("--output", "-o", required=True, help="Folder for the .npy arrays and manifest.json.")
    parser.add_argument("--interpolate", nargs=2, action="append", default=[], metavar=("FIRST", "SECOND"),
                        help="Blend the mels of these two ids (repeat for more pairs).")
    parser.add_argument("--steps", type=int, default=5, help="Blends per pair, ends included (default 5).")
    parser.add_argument("--ids", nargs="+", default=None, help="Embed only these ids (the pairs' ids are "
                        "always embedded).")
    parser.add_argument("--audio-field", default="wav", help="Manifest field of the input audio.")
    parser.add_argument("--replacement", action="append", default=[], type=name_value, metavar="NAME=VALUE",
                        help="Replace $NAME in the manifest's paths (e.g. data_root=data/corpus).")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (default: cpu).")
    parser.add_argument("--refresh", action="store_true",
                        help="Download the model's files anew instead of revalidating the cached copies.")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="Let a remote hyperparams.yaml build objects outside the allowlist.")
    add_progress_flags(parser)


def run(args: argparse.Namespace) -> int:
    from speechkit.data.manifest import load_manifest
    from speechkit.errors import ManifestError
    from speechkit.pretrained.mel_embeddings import write_embeddings
    from speechkit.pretrained.vocoder import Vocoder

    rows = load_manifest(args.manifest, replacements=dict(args.replacement))
    if args.ids is not None:
        wanted = set(args.ids) | {i for pair in args.interpolate for i in pair}
        unknown = sorted(wanted - set(rows))
        if unknown:
            raise ManifestError(f"{args.manifest}: no item(s) {', '.join(unknown)}")
        rows = {i: rows[i] for i in sorted(wanted)}
    vocoder = Vocoder.from_hparams(args.source, run_opts={"device": args.device},
                                   trust_remote_code=args.trust_remote_code,
                                   force_download=args.refresh)
    with Progress("embed", unit="array", enabled=not args.no_progress) as bar:
        path = write_embeddings(vocoder, rows, args.output, [tuple(p) for p in args.interpolate], args.steps,
                                args.audio_field, progress=bar.report)
    print(path, flush=True)
    return 0
