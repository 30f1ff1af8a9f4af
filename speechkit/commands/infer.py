"""``speechkit infer``: run a model over a manifest as a sharded, resumable job; ``--status``; ``--merge``.

Examples::

    speechkit infer models/asr archive.json --output out/archive                     # one process
    speechkit infer models/asr archive.json --output out/archive --shard 3 --num-shards 8
    speechkit infer models/separator mixtures.json --output out/sep --task separate
    speechkit infer models/w2v-features corpus.json --output out/feats --task extract --layer 6
    torchrun --nproc_per_node=4 -m speechkit infer models/asr archive.json --output out/archive
    sbatch --array=0-63%16 tools/slurm/infer_array.sbatch models/asr archive.json out/archive
    speechkit infer --status out/archive
    speechkit infer --merge out/archive

Exit codes: 0 when the shard is done, 75 when it stopped on SIGTERM/SIGUSR1 (rerun the same command), 1 on
an error (named on stderr).
"""
from __future__ import annotations

import argparse
import inspect
import json
import logging

from speechkit.argtypes import name_value
from speechkit.commands.model_source import add_model_source_arguments, from_hparams_options, model_source
from speechkit.terminal import add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_source_arguments(parser, model="optional", device_default=None)
    parser.add_argument("manifest", nargs="?", help="Manifest (JSON, JSON Lines or CSV) with 'duration' and "
                        "the audio field.")
    parser.add_argument("--output", "-o", help="The job folder (plan, ledgers, outputs, results).")
    parser.add_argument("--status", metavar="OUT", help="Print the progress of the job in OUT and exit.")
    parser.add_argument("--merge", metavar="OUT", help="Check that every item of the job in OUT is done "
                        "exactly once, write the results, and exit.")
    parser.add_argument("--task", default="transcribe", help="What to run: transcribe (default), encode, "
                        "separate, extract or generate.")
    parser.add_argument("--shard", type=int, default=None, help="This process's shard (default: from "
                        "torchrun, srun or a SLURM array).")
    parser.add_argument("--num-shards", type=int, default=None, help="Number of shards (with --shard, or to "
                        "override the launcher's count).")
    parser.add_argument("--max-batch-seconds", type=float, default=60.0,
                        help="Padded audio seconds per batch (items x longest item; default 60).")
    parser.add_argument("--max-batch-size", type=int, default=None, help="At most this many items a batch.")
    parser.add_argument("--flush-every", type=int, default=100, help="Append the ledger every N items...")
    parser.add_argument("--flush-seconds", type=float, default=30.0, help="...or every S seconds.")
    parser.add_argument("--audio-field", default=None, help="Manifest field of the input (default: wav; "
                        "separate: wav, else mix_wav as `speechkit mixtures` writes; generate: mel, the mel "
                        "array's .npy).")
    parser.add_argument("--text-field", default=None, help="Manifest field of the reference text "
                        "(transcribe: the merge reports a WER when every item has one; default: text, the "
                        "field speechkit's manifests write, else words).")
    parser.add_argument("--layer", default=None, help="extract: the wav2vec 2.0 layer, a block index (0: "
                        "the Transformer's input), 'all' (every one, stacked) or 'output' (default).")
    parser.add_argument("--padded-batches", action="store_true", help="separate, extract, generate: run "
                        "each batch padded together (faster; outputs equal to float rounding, not byte for "
                        "byte, across shard counts) instead of each item alone.")
    parser.add_argument("--replacement", action="append", default=[], type=name_value, metavar="NAME=VALUE",
                        help="Replace $NAME in manifest paths (e.g. data_root=/corpora/x).")
    parser.add_argument("--verify", action="store_true", help="Check finished outputs' checksums, not only "
                        "their sizes (slower).")
    parser.add_argument("--no-merge", action="store_true", help="Do not merge when the last shard finishes.")
    add_progress_flags(parser)
    parser.add_argument("--json", action="store_true", help="--status/--merge: print JSON.")


def run(args: argparse.Namespace) -> int:
    from speechkit.errors import JobError

    if args.status:
        from speechkit.jobs.status import format_status, job_status

        status = job_status(args.status)
        print(json.dumps(status, indent=1) if args.json else format_status(status))
        return 0
    if args.merge:
        from speechkit.jobs.merge import merge_job

        summary = merge_job(args.merge, verify=args.verify)
        print(json.dumps(summary, sort_keys=True) if args.json else _describe(summary))
        return 0
    if not (args.source and args.manifest and args.output):
        raise JobError("give a model folder, a manifest and --output OUT (or --status OUT / --merge OUT)")
    from speechkit.jobs.registry import task_classes
    from speechkit.jobs.runner import JobConfig, run_job

    tasks = task_classes()
    accepted = inspect.signature(tasks[args.task]).parameters if args.task in tasks else {}
    for flag, name, value in (("--layer", "layer", args.layer), ("--padded-batches", "padded_batches",
                                                                   args.padded_batches or None)):
        if value is not None and name not in accepted:
            raise JobError(f"{flag} is not an option of the task '{args.task}'")
    given = (("audio_field", args.audio_field), ("text_field", args.text_field), ("layer", args.layer),
             ("padded_batches", args.padded_batches))
    options = {name: value for name, value in given if name in accepted and value is not None}
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    config = JobConfig(model_source(args), args.manifest, args.output, task=args.task, task_options=options,
                       shard=args.shard, num_shards=args.num_shards, max_batch_seconds=args.max_batch_seconds,
                       max_batch_size=args.max_batch_size, flush_every=args.flush_every,
                       flush_seconds=args.flush_seconds, device=args.device,
                       replacements=dict(args.replacement),
                       verify=args.verify, progress=not args.no_progress, merge=not args.no_merge,
                       from_hparams_options=from_hparams_options(args))
    result = run_job(config)
    if result.merged is not None:
        print(_describe(result.merged), flush=True)
    return result.exit_code


def _describe(summary: dict) -> str:
    text = f"merged {summary['items']} items ({summary['task']}, {summary['shards']} shards)"
    if "WER" in summary:
        text += (f": WER {summary['WER']:.2f}% ({summary['num_edits']} edits / "
                 f"{summary['num_scored_tokens']} words)")
    return text
