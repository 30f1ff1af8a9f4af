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
    parser.add_argument("--text-field", default="words", help="Manifest field holding the reference text.")
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
    for utt_id, row in data.items():
        for field in (args.audio_field, args.text_field):
            if field not in row:
                raise SpeechkitError(f"{args.manifest}: utterance '{utt_id}' has no field '{field}'")
    model = Pretrained.from_hparams(args.source, savedir=args.savedir, run_opts={"device": ctx.device},
                                    revision=args.revision, allow_network=not args.offline,
                                    trust_remote_code=args.trust_remote_code, allow=args.allow,
                                    force_download=args.refresh)
    # Longest first, ties by id: a deterministic order whose round-robin shards balance the audio.
    order = sorted(data, key=lambda i: (-float(data[i].get("duration", 0.0)), i))
    shard = shard_round_robin(order, ctx.rank, ctx.world_size)
    stats = ErrorRateStats()
    shown = ctx.is_main and not getattr(args, "no_progress", False)  # rank 0's shard stands for the others'
    with Progress("evaluate", len(shard), unit="utt", enabled=shown) as bar:
        for start in range(0, len(shard), max(1, args.batch_size)):
            ids = shard[start:start + args.batch_size]
            wavs = [model.load_audio(data[i][args.audio_field]) for i in ids]
            lengths = torch.tensor([w.shape[0] for w in wavs], dtype=torch.int64)
            batch = torch.nn.utils.rnn.pad_sequence(wavs, batch_first=True)
            texts, _ = model.transcribe_batch(batch, lengths)
            references = [str(data[i][args.text_field]).split() for i in ids]
            stats.append(ids, [t.split() for t in texts], references)
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
