"""``speechkit corpus OUTPUT_DIR``: build the built-in synthetic speech corpus.

Example::

    speechkit corpus data/corpus --size demo            # about 1,050 utterances, well under a minute
    speechkit corpus data/big --size medium --num-workers 8 --noise-prob 0.3
    speechkit corpus data/mixed --recordings my_recordings/ --test-voices kal,kal-lo,kal-hi,recorded-anna
    speechkit corpus data/digits --text digits --digit-string-length 3 6 --num-test 0 --num-valid 0
"""
from __future__ import annotations

import argparse
import os

from speechkit.argtypes import OrderedPair, number
from speechkit.corpus.generator import SETTING_BOUNDS, SIZES, TEXT_KINDS, CorpusConfig, build_corpus
from speechkit.terminal import Progress, add_progress_flags


def _checked(name: str, kind: type = float):
    """argparse ``type=`` of a setting within its bounds (:data:`SETTING_BOUNDS`): a bad value exits with
    status 2 and a message naming the flag, before anything is built."""
    return number(kind, *SETTING_BOUNDS[name])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = CorpusConfig("")
    parser.add_argument("output_dir", help="folder to write FLAC files and train/valid/test.json into")
    parser.add_argument("--size", choices=sorted(SIZES), default="demo",
                        help="named size: " + ", ".join(f"{k}={v[0]}/{v[1]}/{v[2]}" for k, v in SIZES.items())
                        + " train/valid/test utterances (default: demo)")
    # An empty training set from the command line is a slip (the library allows one: test-only corpora).
    parser.add_argument("--num-train", type=number(int, 1), help="train utterances (overrides --size)")
    for split in ("valid", "test"):
        parser.add_argument(f"--num-{split}", type=_checked(f"num_{split}", int),
                            help=f"{split} utterances (overrides --size)")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--num-sentences", type=_checked("num_sentences", int),
                        help="distinct sentences (default: max(4000, total/3))")
    parser.add_argument("--text", choices=TEXT_KINDS, default=defaults.text,
                        help="what the voices read: grammar (everyday sentences) or digits (connected digit "
                        "strings, ZERO to NINE) (default: %(default)s)")
    parser.add_argument("--digit-share", type=_checked("digit_share"), default=defaults.digit_share,
                        metavar="SHARE",
                        help="with --text grammar: the share of sentences (every split alike) that are "
                        "connected digit strings instead, 0-1 (default: %(default)s)")
    parser.add_argument("--digit-string-length", type=_checked("digit_string_length", int), nargs=2,
                        action=OrderedPair, default=defaults.digit_string_length, metavar=("MIN", "MAX"),
                        help="digits per string with --text digits or --digit-share, within 1-20 "
                        "(default: %(default)s)")
    parser.add_argument("--voices", help="comma-separated voices to use (default: the 15 default voices); "
                        "more: the -lower/-higher warps and the espeak-<accent>-<variant> voices, see "
                        "speechkit/corpus/README.md")
    parser.add_argument("--test-voices", default=",".join(defaults.test_voices),
                        help="comma-separated voices held out for test (default: %(default)s)")
    parser.add_argument("--valid-voices", default=",".join(defaults.valid_voices),
                        help="comma-separated voices held out for valid; empty: valid uses training voices "
                        "(default: %(default)s)")
    parser.add_argument("--speed-range", type=_checked("speed_range"), nargs=2, action=OrderedPair,
                        default=defaults.speed_range,
                        metavar=("MIN", "MAX"),
                        help="speaking-rate range, within 0.25-4 (default: %(default)s)")
    parser.add_argument("--loudness-range", type=_checked("loudness_range"), nargs=2, action=OrderedPair,
                        default=defaults.loudness_range,
                        metavar=("MIN", "MAX"),
                        help="speech level range in dBFS, within -60-0 (default: %(default)s)")
    parser.add_argument("--noise-prob", type=_checked("noise_prob"), default=defaults.noise_prob,
                        help="share of utterances with added noise, 0-1 (default: %(default)s)")
    parser.add_argument("--snr-range", type=_checked("snr_range"), nargs=2, action=OrderedPair,
                        default=defaults.snr_range,
                        metavar=("MIN", "MAX"),
                        help="signal-to-noise ratio range in dB, within -30-100 (default: %(default)s)")
    parser.add_argument("--held-out-engine", choices=["espeak", "festival", "flite", "recorded"],
                        default=None,
                        help="train and validate on no voice of this speech engine; its voices speak "
                             "test_engine.json (the test sentences): a kind of voice never heard; "
                             "'recorded': every recording of --recordings is test_engine.json")
    parser.add_argument("--recordings", default=None,
                        help="real recordings to mix in: a folder (audio files with same-name .txt "
                             "transcripts, one sub-folder per speaker) or a manifest (wav, text, spk); "
                             "speaker S is voice recorded-S in --test-voices/--valid-voices (default: train)")
    parser.add_argument("--num-workers", type=_checked("num_workers", int), default=os.cpu_count() or 1,
                        help="synthesis processes (default: number of cores)")
    parser.add_argument("--overwrite", action="store_true", help="rebuild even if the folder holds a corpus")
    parser.add_argument("--conversations", type=int, default=0, metavar="N",
                        help="also write N conversations of the test split's speakers, with reference RTTM, "
                             "into OUTPUT_DIR/conversations (diarization material; see docs/speaker.md); a "
                             "folder that holds a corpus already is used as it is")
    parser.add_argument("--conversation-speakers", type=int, nargs=2, default=(2, 3), metavar=("MIN", "MAX"),
                        help="speakers per conversation (default: 2 3; at most 4 makes sense)")
    parser.add_argument("--overlap-probability", type=float, default=0.3,
                        help="chance a turn starts before the previous one ends (default 0.3: about 10%% of "
                             "the speech overlapped; 0: none)")
    add_progress_flags(parser)


def _names(text):
    return [name for name in (text or "").split(",") if name]


def config_from_args(args: argparse.Namespace) -> CorpusConfig:
    train, valid, test = SIZES[args.size]
    return CorpusConfig(
        output_dir=args.output_dir,
        num_train=train if args.num_train is None else args.num_train,
        num_valid=valid if args.num_valid is None else args.num_valid,
        num_test=test if args.num_test is None else args.num_test,
        seed=args.seed,
        num_sentences=args.num_sentences,
        text=args.text,
        digit_share=args.digit_share,
        digit_string_length=tuple(args.digit_string_length),
        voices=_names(args.voices) or None,
        test_voices=_names(args.test_voices),
        valid_voices=_names(args.valid_voices),
        speed_range=tuple(args.speed_range),
        loudness_range=tuple(args.loudness_range),
        noise_prob=args.noise_prob,
        snr_range=tuple(args.snr_range),
        held_out_engine=args.held_out_engine,
        recordings=args.recordings,
        num_workers=args.num_workers,
    )


def run(args: argparse.Namespace) -> int:
    existing = os.path.isfile(os.path.join(args.output_dir, "corpus.json")) and not args.overwrite
    if not (args.conversations and existing):  # conversations of a built corpus use it as it is
        with Progress("corpus", unit="utt", enabled=not args.no_progress) as bar:
            build_corpus(config_from_args(args), overwrite=args.overwrite, log=bar.write, progress=bar.report)
    if args.conversations:
        from speechkit.corpus.conversations import load_speaker_rows, write_conversations

        rows = load_speaker_rows(os.path.join(args.output_dir, "test.json"), args.output_dir)
        path = write_conversations(rows, os.path.join(args.output_dir, "conversations"), args.conversations,
                                   tuple(args.conversation_speakers),
                                   overlap_probability=args.overlap_probability, seed=args.seed)
        print(path, flush=True)
    return 0
