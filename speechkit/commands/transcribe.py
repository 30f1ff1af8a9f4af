"""``speechkit transcribe``: transcribe audio files with a pretrained model from any source.

Example::

    speechkit transcribe org/asr-ctc a.flac b.wav --device cuda:0
    a.flac	HELLO WORLD
    b.wav	GOOD MORNING

The model folder's ``interface`` key picks the interface (``EncoderASR`` by default). Files are transcribed
in batches of ``--batch-size``; results do not depend on the batch size (the models are batch-invariant).
``--backend onnx`` runs the graphs of a folder written by ``speechkit export --format onnx``. ``--stream``
feeds each file in chunks of ``--chunk-ms`` to a streaming model and prints each partial transcript as it
changes (``a.flac [partial]<TAB>HEL``), then the final line (docs/deploy.md).
"""
from __future__ import annotations

import argparse

from speechkit.argtypes import number
from speechkit.commands.model_source import add_model_source_arguments, from_hparams_options, model_source
from speechkit.terminal import Progress, add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_source_arguments(parser)
    parser.add_argument("audio", nargs="+", help="Audio files (any format soundfile reads).")
    parser.add_argument("--batch-size", type=int, default=8, help="Files per forward pass.")
    add_progress_flags(parser)
    parser.add_argument("--stream", action="store_true",
                        help="Transcribe as a live stream: chunk by chunk, printing partial transcripts.")
    parser.add_argument("--chunk-ms", type=number(float, 0.0, above=True), default=320.0,
                        help="Chunk length for --stream (ms).")
    parser.add_argument("--whisper", action="store_true",
                        help="The source is a Hugging Face Whisper folder (detected by its config.json when "
                             "it has no hyperparams.yaml; this skips asking for one).")
    parser.add_argument("--language", default=None, help="Whisper: language code or name (default: detect).")
    parser.add_argument("--task", choices=["transcribe", "translate"], default=None,
                        help="Whisper: the task.")
    parser.add_argument("--beam-size", type=number(int, 1), default=1, help="Whisper: beams (1: greedy).")
    parser.add_argument("--timestamps", action="store_true", help="Whisper: predict timestamps.")


def run(args: argparse.Namespace) -> int:
    import torch

    from speechkit.pretrained.interfaces import Pretrained
    from speechkit.pretrained.whisper_asr import WhisperASR

    loader = WhisperASR if args.whisper else Pretrained  # Pretrained recognises a Whisper folder too
    model = loader.from_hparams(model_source(args), run_opts={"device": args.device},
                                **from_hparams_options(args))
    if isinstance(model, WhisperASR):  # a transformers Whisper folder, not a speechkit one
        for path in args.audio:
            text = model.transcribe_file(path, language=args.language, task=args.task,
                                         beam_size=args.beam_size, timestamps=args.timestamps)
            print(f"{path}\t{text}", flush=True)
        return 0
    if args.stream:
        return _stream_files(model, args)
    with Progress("transcribe", len(args.audio), unit="file", enabled=not args.no_progress) as bar:
        for start in range(0, len(args.audio), max(1, args.batch_size)):
            paths = args.audio[start:start + args.batch_size]
            wavs = [model.load_audio(path) for path in paths]
            lengths = torch.tensor([w.shape[0] for w in wavs], dtype=torch.int64)
            batch = torch.nn.utils.rnn.pad_sequence(wavs, batch_first=True)
            texts, _ = model.transcribe_batch(batch, lengths)
            for path, text in zip(paths, texts):
                bar.write(f"{path}\t{text}")
            bar.update(len(paths))
    return 0


def _stream_files(model, args) -> int:
    from speechkit.errors import SpeechkitError

    if args.chunk_ms <= 0:
        raise SpeechkitError(f"--chunk-ms must be positive, got {args.chunk_ms}")
    chunk = max(1, int(round(args.chunk_ms * model.sample_rate / 1000)))
    for path in args.audio:
        stream, shown = model.stream(), ""
        for piece in model.load_audio(path).split(chunk):
            partial = stream.accept(piece)
            if partial != shown:
                print(f"{path} [partial]\t{partial}", flush=True)
                shown = partial
        print(f"{path}\t{stream.finish()}", flush=True)
    return 0
