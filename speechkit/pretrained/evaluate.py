"""Evaluate a pretrained model on a test manifest through its interface, on one process or many.

Examples::

    python -m speechkit.pretrained.evaluate org/asr-ctc test.json --output results/eval
    torchrun --nproc_per_node=4 -m speechkit.pretrained.evaluate org/asr-ctc test.json --output results/eval
    srun python -m speechkit.pretrained.evaluate org/asr-ctc test.json --output results/eval

Each process transcribes a disjoint shard of the manifest (utterances sorted by duration and dealt
round-robin, so every rank gets about the same amount of audio); nothing is exchanged until the end, where
:class:`speechkit.metrics.ErrorRateStats` gathers the per-utterance results keyed by id. Because the models
are batch-invariant, the WER is exactly the single-process WER whatever the number of processes or the batch
size.
The main process prints one JSON line (``{"WER": ..., "utterances": ..., "world_size": ...}``) and writes
``wer.txt`` (per-utterance alignments) and ``summary.json`` into ``--output``.

The reference text is the manifest's ``text`` field, as in every manifest speechkit writes (``words`` when a
manifest has that instead; ``--text-field`` names another). References and hypotheses are scored after the
model folder's ``text_normalizer`` when its hyperparams.yaml declares one (``--text-normalizer`` chooses
another), and ``wer.txt`` says how the text was normalised.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Optional

from speechkit.argtypes import name_value
from speechkit.terminal import Progress, add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="Model folder: local path, Hub repo id or http(s) URL.")
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
    parser.add_argument("--savedir", default=None, help="Where the model's files appear.")
    parser.add_argument("--revision", default=None, help="Hub branch, tag or commit.")
    parser.add_argument("--device", default=None,
                        help="Device (default: cuda:<local rank> with CUDA, else cpu).")
    parser.add_argument("--offline", action="store_true", help="Serve the model from the cache only.")
    parser.add_argument("--refresh", action="store_true",
                        help="Download the model's files anew instead of revalidating the cached copies.")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="Let a remote hyperparams.yaml build any object (not only the allowlist's).")
    parser.add_argument("--allow", action="append", default=[], metavar="NAME",
                        help="An exact dotted name a remote hyperparams.yaml may build besides the allowlist "
                             "(repeatable), e.g. --allow mypackage.models.MyEncoder.")
    add_progress_flags(parser)


#: Choices of --text-normalizer.
TEXT_NORMALIZERS = ("model", "none", "upper", "lower")
#: Reference fields looked for, in order, when --text-field is not given.
DEFAULT_TEXT_FIELDS = ("text", "words")


def reference_field(data: dict, requested: Optional[str], manifest) -> str:
    """The manifest field holding the references: ``requested``, else the first of ``DEFAULT_TEXT_FIELDS``
    every row has. Raises a ``ManifestError`` naming the fields the rows do have.

    Example:
        >>> reference_field({"u1": {"wav": "a.flac", "text": "HI"}}, None, "test.json")
        'text'
    """
    from speechkit.errors import ManifestError

    present = sorted({field for row in data.values() for field in row})
    candidates = (requested,) if requested else DEFAULT_TEXT_FIELDS
    for field in candidates:
        missing = [utt_id for utt_id, row in data.items() if field not in row]
        if not missing:
            return field
        if requested:
            raise ManifestError(f"{manifest}: utterance '{missing[0]}' has no field '{field}' "
                                f"(--text-field); the manifest's fields are {', '.join(present)}")
    looked_for = " or ".join(DEFAULT_TEXT_FIELDS)
    raise ManifestError(f"{manifest}: no reference text field: looked for {looked_for} in every row; the "
                        f"manifest's fields are {', '.join(present)} (name one with --text-field)")


def text_normalizer(choice: str, model_hparams: dict):
    """The normaliser ``--text-normalizer`` chooses (None: text scored as given)."""
    from speechkit.data.text_policy import TextNormalizer

    if choice == "model":
        return model_hparams.get("text_normalizer")
    if choice == "none":
        return None
    return TextNormalizer(case=choice)


def run(args: argparse.Namespace) -> int:
    summary = evaluate(args)
    if summary is not None:
        print(json.dumps(summary, sort_keys=True), flush=True)
    return 0


def evaluate(args: argparse.Namespace) -> Optional[dict]:
    """Run the evaluation; returns the summary on the main process, None on the others."""
    import torch

    from speechkit import distributed as dist
    from speechkit.data.manifest import load_manifest
    from speechkit.data.sharding import shard_round_robin
    from speechkit.errors import SpeechkitError
    from speechkit.metrics import ErrorRateStats
    from speechkit.pretrained.interfaces import Pretrained
    from speechkit.run_options import RunOptions

    ctx = dist.init(RunOptions(device=args.device))
    replacements = dict(args.replacement)
    data = load_manifest(args.manifest, replacements=replacements)
    text_field = reference_field(data, args.text_field, args.manifest)
    for utt_id, row in data.items():
        if args.audio_field not in row:
            raise SpeechkitError(f"{args.manifest}: utterance '{utt_id}' has no field '{args.audio_field}' "
                                 f"(--audio-field); its fields are {', '.join(sorted(row))}")
    model = Pretrained.from_hparams(args.source, savedir=args.savedir, run_opts={"device": ctx.device},
                                    revision=args.revision, allow_network=not args.offline,
                                    trust_remote_code=args.trust_remote_code, allow=args.allow,
                                    force_download=args.refresh)
    # Longest first, ties by id: a deterministic order whose round-robin shards balance the audio.
    order = sorted(data, key=lambda i: (-float(data[i].get("duration", 0.0)), i))
    shard = shard_round_robin(order, ctx.rank, ctx.world_size)
    normalizer = text_normalizer(getattr(args, "text_normalizer", "model"), model.hparams)
    stats = ErrorRateStats(normalizer=normalizer)
    shown = ctx.is_main and not getattr(args, "no_progress", False)  # rank 0's shard stands for the others'
    with Progress("evaluate", len(shard), unit="utt", enabled=shown) as bar:
        for start in range(0, len(shard), max(1, args.batch_size)):
            ids = shard[start:start + args.batch_size]
            wavs = [model.load_audio(data[i][args.audio_field]) for i in ids]
            lengths = torch.tensor([w.shape[0] for w in wavs], dtype=torch.int64)
            batch = torch.nn.utils.rnn.pad_sequence(wavs, batch_first=True)
            texts, _ = model.transcribe_batch(batch, lengths)
            stats.append(ids, list(texts), [str(data[i][text_field]) for i in ids])
            bar.update(len(ids))
    result = stats.summarize()  # gathers every rank's utterances, keyed by id
    if not ctx.is_main:
        return None
    summary = {"utterances": len(data), "world_size": ctx.world_size, "shard_sizes": _shard_sizes(order, ctx)}
    summary.update(result if isinstance(result, dict) else {"WER": result})
    if args.output:
        out = pathlib.Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        stats.write_stats(out / "wer.txt")
        (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
    return summary


def _shard_sizes(order: list, ctx) -> list:
    from speechkit.data.sharding import shard_round_robin

    return [len(shard_round_robin(order, r, ctx.world_size)) for r in range(ctx.world_size)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speechkit.pretrained.evaluate",
                                     description=__doc__.split("\n")[0])
    add_arguments(parser)
    from speechkit.errors import SpeechkitError

    try:
        return run(parser.parse_args(argv))
    except SpeechkitError as error:
        print(f"evaluate: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
