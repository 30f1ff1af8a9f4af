"""Evaluate a pretrained model on a test manifest through its interface, on one process or many: the library
side of ``speechkit evaluate`` (:mod:`speechkit.commands.evaluate`).

Examples::

    speechkit evaluate org/asr-ctc test.json --output results/eval
    torchrun --nproc_per_node=4 -m speechkit evaluate org/asr-ctc test.json --output results/eval
    srun python -m speechkit evaluate org/asr-ctc test.json --output results/eval

Each process transcribes a disjoint shard of the manifest (utterances sorted by duration and dealt
round-robin, so every rank gets about the same amount of audio); nothing is exchanged until the end, where
:class:`speechkit.metrics.ErrorRateStats` gathers the per-utterance results keyed by id. Because the models
are batch-invariant, the WER is exactly the single-process WER whatever the number of processes or the batch
size. The main process gets the summary (``{"WER": ..., "utterances": ..., "world_size": ...}``) and writes
``wer.txt`` (per-utterance alignments) and ``summary.json`` into ``output``. With ``group_by`` (a manifest
field such as ``spk``), the summary also holds the figures of each value of that field under ``groups``
(a WER per speaker, per accent, per recording condition).

The reference text is the manifest's ``text`` field, as in every manifest speechkit writes (``words`` when a
manifest has that instead; ``text_field`` names another). References and hypotheses are scored after the
model folder's ``text_normalizer`` when its hyperparams.yaml declares one (``normalization`` chooses
another), and ``wer.txt`` says how the text was normalised.

``python -m speechkit.pretrained.evaluate ...``, the command's former spelling, still runs ``speechkit
evaluate``.
"""
from __future__ import annotations

import json
import pathlib
import sys
from typing import Optional

from speechkit.terminal import Progress

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


def group_summaries(scores: dict, data: dict, field: str) -> dict:
    """The summary of each value of the manifest ``field`` (e.g. ``spk``) over per-utterance ``scores``
    (``{id: score}`` as :meth:`ErrorRateStats.merged_scores` gives them), values sorted.

    Example:
        >>> from speechkit.metrics.error_rate import score_utterance
        >>> scores = {"a": score_utterance(["ONE", "TWO"], ["ONE", "TOO"]),
        ...           "b": score_utterance(["SIX"], ["SIX"])}
        >>> groups = group_summaries(scores, {"a": {"spk": "kim"}, "b": {"spk": "lee"}}, "spk")
        >>> groups["kim"]["WER"], groups["lee"]["WER"]
        (50.0, 0.0)
    """
    from speechkit.metrics.error_rate import summarize_scores

    members: dict = {}
    for utt_id, score in scores.items():
        members.setdefault(str(data[utt_id][field]), {})[utt_id] = score
    return {value: summarize_scores(members[value]) for value in sorted(members)}


def text_normalizer(choice: str, model_hparams: dict):
    """The normaliser ``--text-normalizer`` chooses (None: text scored as given)."""
    from speechkit.data.text_policy import TextNormalizer

    if choice == "model":
        return model_hparams.get("text_normalizer")
    if choice == "none":
        return None
    return TextNormalizer(case=choice)


def evaluate(source, manifest, *, output=None, audio_field: str = "wav", text_field: Optional[str] = None,
             normalization: str = "model", replacements: Optional[dict] = None, batch_size: int = 8,
             device: Optional[str] = None, progress: bool = True, group_by: Optional[str] = None,
             from_hparams_options: Optional[dict] = None) -> Optional[dict]:
    """Score the model folder ``source`` on ``manifest``, this process's shard of it; returns the summary on
    the main process (and writes ``wer.txt`` and ``summary.json`` into ``output`` when given), None on the
    others.

    Args:
        source: the model folder (local path, Hub repo id, URL or a ``FetchSource``).
        manifest: JSON, JSON Lines or CSV manifest with the audio and reference text fields.
        output: folder for ``wer.txt`` and ``summary.json`` (None: nothing written).
        audio_field, text_field: the manifest's fields (``text_field`` None: see :func:`reference_field`).
        normalization: one of :data:`TEXT_NORMALIZERS` (see :func:`text_normalizer`).
        replacements: ``$NAME`` placeholders of the manifest's paths and their values.
        batch_size: utterances per forward pass (the WER does not depend on it).
        device: this process's device (None: ``cuda:<local rank>`` with CUDA, else cpu).
        progress: show a progress bar on the main process.
        group_by: a manifest field (``spk``): the summary's ``groups`` holds each of its values' figures.
        from_hparams_options: further keyword arguments of :meth:`Pretrained.from_hparams` (``savedir``,
            ``revision``, ``allow_network``, ``trust_remote_code``, ``allow``, ``force_download``, ...).

    Example:
        >>> summary = evaluate("models/asr", "test.json", output="results/eval")  # doctest: +SKIP
        >>> summary["WER"]                                                      # doctest: +SKIP
        4.12
    """
    import torch

    from speechkit import distributed as dist
    from speechkit.data.manifest import load_manifest
    from speechkit.data.sharding import shard_round_robin
    from speechkit.errors import SpeechkitError
    from speechkit.metrics import ErrorRateStats
    from speechkit.pretrained.interfaces import Pretrained
    from speechkit.run_options import RunOptions

    ctx = dist.init(RunOptions(device=device))
    data = load_manifest(manifest, replacements=dict(replacements or {}))
    text_field = reference_field(data, text_field, manifest)
    for utt_id, row in data.items():
        if audio_field not in row:
            raise SpeechkitError(f"{manifest}: utterance '{utt_id}' has no field '{audio_field}' "
                                 f"(--audio-field); its fields are {', '.join(sorted(row))}")
        if group_by is not None and group_by not in row:
            raise SpeechkitError(f"{manifest}: utterance '{utt_id}' has no field '{group_by}' "
                                 f"(--group-by); its fields are {', '.join(sorted(row))}")
    model = Pretrained.from_hparams(source, run_opts={"device": ctx.device}, **(from_hparams_options or {}))
    # Longest first, ties by id: a deterministic order whose round-robin shards balance the audio.
    order = sorted(data, key=lambda i: (-float(data[i].get("duration", 0.0)), i))
    shard = shard_round_robin(order, ctx.rank, ctx.world_size)
    # A Whisper folder (a WhisperASR) has no hyperparams, so declares no normaliser: "model" scores as given.
    normalizer = text_normalizer(normalization, getattr(model, "hparams", {}))
    stats = ErrorRateStats(normalizer=normalizer)
    shown = ctx.is_main and progress  # rank 0's shard stands for the others'
    with Progress("evaluate", len(shard), unit="utt", enabled=shown) as bar:
        for start in range(0, len(shard), max(1, batch_size)):
            ids = shard[start:start + batch_size]
            wavs = [model.load_audio(data[i][audio_field]) for i in ids]
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
    if group_by is not None:
        summary["groups"] = group_summaries(stats.merged_scores(), data, group_by)
    if output:
        out = pathlib.Path(output)
        out.mkdir(parents=True, exist_ok=True)
        stats.write_stats(out / "wer.txt")
        (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
    return summary


def _shard_sizes(order: list, ctx) -> list:
    from speechkit.data.sharding import shard_round_robin

    return [len(shard_round_robin(order, r, ctx.world_size)) for r in range(ctx.world_size)]


if __name__ == "__main__":  # the former spelling of ``speechkit evaluate``, kept for scripts that use it
    from speechkit.cli import main

    sys.exit(main(["evaluate", *sys.argv[1:]]))
