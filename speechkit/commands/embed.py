"""``speechkit embed``: speaker embeddings of a manifest's audio (a ``SpeakerRecognition`` model), or a
vocoder's mel "embeddings" and blends between two inputs (a ``Vocoder`` model); the model folder's
``interface`` decides.

Speaker model: ``speechkit embed results/speaker-model data/test.json --output emb/`` writes ``emb/<id>.npy``
(one ``(dim,)`` vector per row) and ``emb/manifest.json`` (docs/speaker.md).

Vocoder:

Example::

    speechkit embed results/vocoder-model data/test.json --output emb/ --interpolate utt1 utt2 --steps 5
    speechkit infer results/vocoder-model emb/manifest.json --output gen/ --task generate

writes ``emb/<id>.npy`` for every row, ``emb/utt1~utt2~0.npy`` ... ``~4.npy`` (alpha 0, 0.25, ..., 1) and
``emb/manifest.json``, which the ``generate`` job turns into one WAV per array (docs/vocoder.md).
"""
from __future__ import annotations

import argparse

from speechkit.argtypes import name_value
from speechkit.commands.model_source import add_model_source_arguments, from_hparams_options, model_source
from speechkit.terminal import Progress, add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_source_arguments(parser)
    parser.add_argument("manifest", help="Manifest (JSON, JSON Lines or CSV) of the input audio.")
    parser.add_argument("--output", "-o", required=True, help="Folder for the .npy arrays and manifest.json.")
    parser.add_argument("--interpolate", nargs=2, action="append", default=[], metavar=("FIRST", "SECOND"),
                        help="Vocoder: blend the mels of these two ids (repeat for more pairs).")
    parser.add_argument("--batch-size", type=int, default=8, help="Speaker model: files per forward pass.")
    parser.add_argument("--steps", type=int, default=5, help="Blends per pair, ends included (default 5).")
    parser.add_argument("--ids", nargs="+", default=None, help="Embed only these ids (the pairs' ids are "
                        "always embedded).")
    parser.add_argument("--audio-field", default="wav", help="Manifest field of the input audio.")
    parser.add_argument("--replacement", action="append", default=[], type=name_value, metavar="NAME=VALUE",
                        help="Replace $NAME in the manifest's paths (e.g. data_root=data/corpus).")
    add_progress_flags(parser)


def run(args: argparse.Namespace) -> int:
    from speechkit.data.manifest import load_manifest
    from speechkit.errors import ManifestError
    from speechkit.pretrained.interfaces import Pretrained
    from speechkit.pretrained.mel_embeddings import write_embeddings
    from speechkit.pretrained.speaker import SpeakerRecognition
    from speechkit.pretrained.vocoder import Vocoder

    rows = load_manifest(args.manifest, replacements=dict(args.replacement))
    if args.ids is not None:
        wanted = set(args.ids) | {i for pair in args.interpolate for i in pair}
        unknown = sorted(wanted - set(rows))
        if unknown:
            raise ManifestError(f"{args.manifest}: no item(s) {', '.join(unknown)}")
        rows = {i: rows[i] for i in sorted(wanted)}
    model = Pretrained.from_hparams(model_source(args), run_opts={"device": args.device},
                                    **from_hparams_options(args))
    if isinstance(model, SpeakerRecognition):
        if args.interpolate:
            raise ManifestError("--interpolate blends vocoder mels; a speaker model's embeddings are not "
                                "audio")
        from speechkit.pretrained.speaker_embeddings import write_speaker_embeddings

        with Progress("embed", unit="file", enabled=not args.no_progress) as bar:
            path = write_speaker_embeddings(model, rows, args.output, args.audio_field, args.batch_size,
                                            progress=bar.report)
        print(path, flush=True)
        return 0
    if not isinstance(model, Vocoder):
        raise ManifestError(f"{args.source}: speechkit embed takes a SpeakerRecognition or Vocoder model "
                            f"folder, not a {type(model).__name__}")
    vocoder = model
    with Progress("embed", unit="array", enabled=not args.no_progress) as bar:
        path = write_embeddings(vocoder, rows, args.output, [tuple(p) for p in args.interpolate], args.steps,
                                args.audio_field, progress=bar.report)
    print(path, flush=True)
    return 0
