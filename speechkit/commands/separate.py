"""``speechkit separate``: split recordings into one file per talker with a pretrained separation model.

Example::

    speechkit separate results/separator-model meeting.wav call.flac --out separated/
    separated/meeting_s1.wav
    separated/meeting_s2.wav
    ...

Inputs sharing a file name keep the folders that tell them apart: ``d1/mix.wav d2/mix.wav`` give
``separated/d1/mix_s1.wav`` and ``separated/d2/mix_s1.wav``.

Files are read at any rate, resampled to the model's, separated in batches of ``--batch-size`` (the result
does not depend on the batch), and written as 16-bit WAV at the model's rate.
"""
from __future__ import annotations

import argparse
import os

from speechkit.commands.model_source import add_model_source_arguments, from_hparams_options, model_source
from speechkit.terminal import Progress, add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_source_arguments(parser)
    parser.add_argument("audio", nargs="+", help="Mixtures (any format soundfile reads).")
    parser.add_argument("--out", required=True, help="Folder for <name>_s1.wav, <name>_s2.wav, ...")
    parser.add_argument("--batch-size", type=int, default=4, help="Files per forward pass.")
    add_progress_flags(parser)


def output_names(paths: list) -> list:
    """One output name per input (relative to ``--out``, before ``_s1.wav``): the file name without its
    extension, or, for inputs sharing a file name, the path below the folder they share (``d1/mix.wav`` and
    ``d2/mix.wav`` give ``d1/mix`` and ``d2/mix``), so no output overwrites another.

    Raises:
        DataError: two inputs still give one name (a file given twice, ``x.wav`` and ``x.flac`` in one
            folder), naming both.

    Example:
        >>> output_names(["d1/mix.wav", "d2/mix.wav", "call.flac"])
        ['d1/mix', 'd2/mix', 'call']
    """
    from speechkit.errors import DataError

    stems = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    sharing: dict = {}
    for index, stem in enumerate(stems):
        sharing.setdefault(stem, []).append(index)
    names = list(stems)
    for stem, indices in sharing.items():
        if len(indices) < 2:
            continue
        folders = [os.path.dirname(os.path.abspath(paths[i])) for i in indices]
        common = os.path.commonpath(folders)
        for index, folder in zip(indices, folders):
            below = os.path.relpath(folder, common)
            names[index] = stem if below == "." else f"{below.replace(os.sep, '/')}/{stem}"
    first: dict = {}
    for index, name in enumerate(names):
        if name in first:
            raise DataError(f"{paths[first[name]]} and {paths[index]} would both be written as "
                            f"{name}_s1.wav, ...: give each file once, or rename one")
        first[name] = index
    return names


def run(args: argparse.Namespace) -> int:
    import torch

    from speechkit.data import audio
    from speechkit.errors import AudioError
    from speechkit.pretrained.separation import SeparationModel

    stems = output_names(args.audio)  # before anything is fetched or written: a collision stops the command
    model = SeparationModel.from_hparams(model_source(args), run_opts={"device": args.device},
                                         **from_hparams_options(args))
    os.makedirs(args.out, exist_ok=True)
    with Progress("separate", len(args.audio), unit="file", enabled=not args.no_progress) as bar:
        for start in range(0, len(args.audio), max(1, args.batch_size)):
            paths = args.audio[start:start + args.batch_size]
            wavs = [model.load_audio(path) for path in paths]
            for path, wav in zip(paths, wavs):
                if wav.shape[0] == 0:
                    raise AudioError(f"{path} holds no samples: there is nothing to separate")
            lengths = torch.tensor([w.shape[0] for w in wavs], dtype=torch.int64)
            estimates = model.separate_batch(torch.nn.utils.rnn.pad_sequence(wavs, batch_first=True), lengths)
            for offset, n in enumerate(lengths.tolist()):
                sources = estimates[offset, :, :n].cpu()
                peak = float(sources.abs().max())
                if peak > 0.99:  # estimates carry no absolute level: keep them below full scale
                    sources = sources * (0.99 / peak)
                for k in range(sources.shape[0]):
                    target = os.path.join(args.out, f"{stems[start + offset]}_s{k + 1}.wav")
                    audio.write(target, sources[k], model.sample_rate)
                    bar.write(target)
            bar.update(len(paths))
    return 0
