"""``speechkit evaluate MODEL MANIFEST``: score a pretrained model on a test manifest (WER), on one process or
sharded over torchrun/srun workers.

Example::

    speechkit evaluate org/asr-ctc test.json --output results/eval
    torchrun --nproc_per_node=4 -m speechkit evaluate org/asr-ctc test.json --output results/eval

The main process prints one JSON line (``{"WER": ..., "utterances": ..., "world_size": ...}``) and writes
``wer.txt`` and ``summary.json`` into ``--output``; the scoring is
:func:`speechkit.pretrained.evaluate.evaluate`'s.
"""
from __future__ import annotations

import argparse
import json

from speechkit.argtypes import name_value
from speechkit.commands.model_source import add_model_source_arguments, from_hparams_options, model_source
from speechkit.pretrained.evaluate import TEXT_NORMALIZERS, evaluate
from speechkit.terminal import add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_source_arguments(parser, device_default=None)
    parser.add_argument("manifest", help="Test manifest (JSON, JSON Lines or CSV): audio and text fields.")
    parser.add_argument("--output", default=None, help="Folder for wer.txt and summary.json (main process).")
    parser.add_argument("--audio-field", default="wav", help="Manifest field holding the audio path.")
    parser.add_argument("--text-field", default=None,
                        help="Manifest field holding the reference text (default: 'text', or 'words' when "
                             "the manifest has that instead).")
    parser.add_argument("--text-normalizer", default="model", choices=TEXT_NORMALIZERS,
                        help="How references and hypotheses are normalised before scoring: the model "
                             "folder's text_normalizer (none if it declares none), none, or upper/lower "
                             "case with punctuation removed (docs/data.md, 'How text is normalised').")
    parser.add_argument("--replacement", action="append", default=[], type=name_value, metavar="NAME=VALUE",
                        help="Replace $NAME in manifest paths (e.g. data_root=/corpora/x).")
    parser.add_argument("--batch-size", type=int, default=8, help="Utterances per forward pass.")
    parser.add_argument("--group-by", default=None, metavar="FIELD",
                        help="Also score each value of this manifest field apart (e.g. spk: a WER per "
                             "speaker), under 'groups' in the summary.")
    add_progress_flags(parser)


def run(args: argparse.Namespace) -> int:
    summary = evaluate(model_source(args), args.manifest, output=args.output, audio_field=args.audio_field,
                       text_field=args.text_field, normalization=args.text_normalizer,
                       replacements=dict(args.replacement), batch_size=args.batch_size, device=args.device,
                       progress=not args.no_progress, group_by=args.group_by,
                       from_hparams_options=from_hparams_options(args))
    if summary is not None:
        print(json.dumps(summary, sort_keys=True), flush=True)
    return 0
