"""``speechkit <command>``: the command-line face of the toolkit.

Each command lives in its own module of :mod:`speechkit.commands`, imported only when that command runs (so
``speechkit --help`` stays fast and a command's heavy imports never slow another). A command module defines::

    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace) -> int | None: ...
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional

from speechkit.errors import SpeechkitError

#: command name -> (module, one-line help)
COMMANDS = {
    "new-recipe": ("speechkit.commands.new_recipe",
        "Copy a recipe template to a new folder, ready to run."),
    "corpus": ("speechkit.commands.corpus",
        "Generate the built-in synthetic speech corpus (FLAC + manifests)."),
    "manifest": ("speechkit.commands.manifest",
        "Walk an audio tree and write train/valid manifests."),
    "trim-silence": ("speechkit.commands.trim_silence",
        "Point a manifest's audio at the speech, without edge silence."),
    "prepare-librispeech": ("speechkit.commands.prepare_librispeech",
        "Write manifests for a LibriSpeech-layout tree."),
    "fetch": ("speechkit.commands.fetch",
        "Fetch pretrained files (local path, Hub or URL)."),
    "export": ("speechkit.commands.export",
        "Turn a recipe's best checkpoint into a model folder."),
    "average-checkpoints": ("speechkit.commands.average_checkpoints",
        "Average the weights of the best checkpoints."),
    "plot-log": ("speechkit.commands.plot_log",
        "Draw a train_log.txt's loss and metric curves into a PNG."),
    "transcribe": ("speechkit.commands.transcribe",
        "Transcribe audio files with a pretrained model."),
    "separate": ("speechkit.commands.separate",
        "Split recordings into one file per talker."),
    "embed": ("speechkit.commands.embed",
        "Write speaker embeddings of audio files (speaker model), or a vocoder's mel embeddings "
        "and blends between two of them, for 'infer --task generate'."),
    "verify": ("speechkit.commands.verify",
        "Say whether two recordings share a speaker (speaker model)."),
    "diarize": ("speechkit.commands.diarize",
        "Say who spoke when in recordings (speaker model); write RTTM."),
    "mixtures": ("speechkit.commands.mixtures",
        "Write speech mixtures (mix/, s1/, s2/) from a manifest."),
    "infer": ("speechkit.commands.infer",
        "Run a model over a manifest as a sharded job that survives preemption (--status, "
        "--merge)."),
    "serve": ("speechkit.commands.serve",
        "Serve model folders over HTTP and WebSocket, with a web page to try them."),
    "data": ("speechkit.commands.data",
        "Bring your own recordings in: import a corpus layout, check manifests, convert audio "
        "(import | check | convert)."),
    "evaluate": ("speechkit.commands.evaluate",
        "Score a pretrained model on a test manifest (WER), sharded over torchrun/srun workers."),
}


#: command name -> one typical use, shown at the end of its --help.
EXAMPLES = {
    "new-recipe": "speechkit new-recipe speech_recognition my_asr   # then: cd my_asr/ASR && python "
                  "train.py hparams/train.yaml",
    "corpus": "speechkit corpus data/corpus --size demo",
    "manifest": "speechkit manifest /corpora/my-audio --ext flac --dest manifests --valid-percent 0.05",
    "trim-silence": "speechkit trim-silence data/corpus/train.json results/train.json --replace "
                    "data_root=data/corpus --margin 0.1",
    "prepare-librispeech": "speechkit prepare-librispeech /corpora/LibriSpeech --dest manifests",
    "fetch": "speechkit fetch org/asr-ctc --savedir models/asr-ctc",
    "export": "speechkit export --checkpoints results/asr/1234/save --hparams hparams/inference.yaml "
              "--min-key WER --output models/asr",
    "average-checkpoints": "speechkit average-checkpoints results/asr/1234/save --num 5 --min-key WER "
                           "--output results/asr/1234/avg5",
    "plot-log": "speechkit plot-log results/asr/1234/train_log.txt",
    "transcribe": "speechkit transcribe models/asr recording.flac",
    "separate": "speechkit separate models/separator meeting.wav --out separated/",
    "embed": "speechkit embed models/vocoder data/test.json --output results/embeddings",
    "mixtures": "speechkit mixtures data/corpus/test.json data/mix --split test --num-mixtures 3000",
    "infer": "speechkit infer models/asr archive.json --output out/archive",
    "serve": "speechkit serve models/asr --port 8000",
    "data": "speechkit data check data/cv/train.json data/cv/test.json",
    "evaluate": "speechkit evaluate models/asr test.json --output results/eval",
    "verify": "speechkit verify a.wav b.wav --model models/speaker",
    "diarize": "speechkit diarize meeting.wav --model models/speaker --rttm meeting.rttm",
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Each option's default at the end of its help line (unless the help already speaks of its default, or
    there is none to show: None, off, empty); the description and the example kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text.lower() or default in (None, False, "", [], ()) or default is argparse.SUPPRESS
                or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


def version() -> str:
    """``speechkit X.Y.Z`` (the installed distribution's version, else the package's)."""
    try:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as installed
        number = installed("speechkit")
    except (ImportError, PackageNotFoundError):
        from speechkit import __version__ as number
    return f"speechkit {number}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="speechkit", description="speechkit: train, evaluate and serve speech models from YAML recipes.",
        formatter_class=HelpFormatter,
        epilog="Each command has its own --help, with its defaults and an example, e.g.\n"
               "  speechkit new-recipe --help\n\nExample:\n  " + EXAMPLES["new-recipe"])
    parser.add_argument("--version", "-V", action="version", version=version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def build_command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of ``speechkit <name>`` (imports the command's module)."""
    module = importlib.import_module(COMMANDS[name][0])
    example = EXAMPLES.get(name)
    parser = argparse.ArgumentParser(prog=f"speechkit {name}", description=COMMANDS[name][1],
                                     formatter_class=HelpFormatter,
                                     epilog=f"Example:\n  {example}" if example else None)
    module.add_arguments(parser)
    return parser


def main(argv: Optional[list] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv:  # a usage error, as for any missing argument: the help on stderr, status 2
        parser.print_help(sys.stderr)
        return 2
    if argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    if argv[0] in ("-V", "--version"):
        print(version())
        return 0
    if argv[0] not in COMMANDS:
        parser.print_usage(sys.stderr)
        print(f"speechkit: unknown command {argv[0]!r}", file=sys.stderr)
        return 2
    name = argv[0]
    module = importlib.import_module(COMMANDS[name][0])
    args = build_command_parser(name).parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except SpeechkitError as error:
        print(f"speechkit {name}: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
