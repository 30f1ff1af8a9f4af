"""Tasks: what a job does with a batch of items, one small adapter per interface method.

A task says how to read an item's input from its manifest row, how to call the model's interface on a batch,
what small record of each result goes into the ledger, how to write one output file per item (if it makes
files), and how to merge the finished job into final results. The runner knows nothing else about models, so
a new interface method (``separate``, ``extract``, ``generate``) becomes a job by registering a task::

    @register_task
    class SeparateTask(Task):
        name, methods, suffix = "separate", ("separate_batch",), ".flac"
        def run(self, model, inputs): ...
        def write(self, path, result): ...

Shipped: ``transcribe`` (hypotheses in the ledger, a WER at merge when the manifest has references) and
``encode`` (each item's encoder output, e.g. CTC log-probabilities, as a ``(frames, dim)`` float32 ``.npy``)
here, ``separate`` and ``extract`` in :mod:`speechkit.jobs.audio_tasks`, ``generate`` (a vocoder's audio from
mel arrays) in :mod:`speechkit.jobs.generate_task`. Each registers itself in
:mod:`speechkit.jobs.registry`, which jobs look tasks up in.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar, Optional

import numpy as np
import torch

from speechkit.errors import JobError, ManifestError
from speechkit.jobs.registry import register_task


class Task:
    """Base of the tasks: reads ``audio_field`` of each row with the model's ``load_audio``.

    Args:
        audio_field: manifest field holding the input audio path.
        keep_fields: manifest fields the merge needs (kept in the job's plan, so merging needs no manifest).
    """

    name: ClassVar[str] = ""
    #: Interface methods the model must have.
    methods: ClassVar[tuple] = ()
    #: Extension of the output file of each item; None: the result lives in the ledger record.
    suffix: ClassVar[Optional[str]] = None

    def __init__(self, audio_field: str = "wav"):
        self.audio_field = audio_field

    @property
    def options(self) -> dict:
        """Options recorded with the job: a rerun with other options is refused rather than mixed in."""
        return {"audio_field": self.audio_field}

    @property
    def keep_fields(self) -> tuple:
        return ()

    def check_row(self, item_id: str, row: dict, where: str) -> None:
        if self.audio_field not in row:
            raise ManifestError(f"{where}: item '{item_id}' has no field '{self.audio_field}' (the audio; "
                                "choose the field with --audio-field)")

    def check_model(self, model, where: str) -> None:
        missing = [method for method in self.methods if not callable(getattr(model, method, None))]
        if missing:
            raise JobError(f"{where}: the model's interface {type(model).__name__} has no "
                           f"{', '.join(missing)}, which the task '{self.name}' calls")

    def input_field(self, row: dict) -> Optional[str]:
        """The field of ``row`` that holds the item's input (``audio_field``; a task may look for it)."""
        return self.audio_field

    def load(self, model, item_id: str, row: dict) -> torch.Tensor:
        """The model's input for one item: (time,) float32 at the model's rate."""
        return model.load_audio(row[self.input_field(row)])

    def run(self, model, inputs: list) -> list:
        """Results for a batch of inputs, one per input, in order."""
        raise NotImplementedError

    def record(self, result) -> dict:
        """The small JSON-able part of a result kept in the ledger (``{}`` when the result is a file)."""
        return {}

    def parts(self, result) -> list:
        """``(suffix, part)`` for each output file of one item, each written by :meth:`write`: by default one
        file ``<id><suffix>`` holding the whole result. A suffix starting with ``/`` puts the item's files
        in a folder of its own (see :func:`speechkit.jobs.outputs.output_name`)."""
        return [(self.suffix, result)]

    def write(self, path: Path, result) -> None:
        """Write one output file (only tasks with a ``suffix``) to ``path``, a temporary name: a writer
        choosing the format from the extension must be told the format."""
        raise NotImplementedError

    def merge(self, folder: Path, records: dict, fields: dict) -> dict:
        """Write the final results of a complete job from every item's ledger record (ordered by id) and the
        kept manifest fields; returns a summary (JSON-able)."""
        raise NotImplementedError


def pad(inputs: list) -> tuple:
    """``(batch, lengths)``: (batch, time) zero-padded float32 and (batch,) int64 valid samples."""
    lengths = torch.tensor([x.shape[0] for x in inputs], dtype=torch.int64)
    return torch.nn.utils.rnn.pad_sequence(inputs, batch_first=True), lengths


@register_task
class TranscribeTask(Task):
    """ASR: each item's hypothesis goes into the ledger. The merge writes ``transcripts.txt`` (``id<TAB>text``
    lines) and ``results.json`` sorted by id, and, when every row has ``text_field`` (by default ``text``, the
    field speechkit's manifests write, else ``words``), ``wer.txt`` and the WER (the same as one process over
    the whole manifest: the models are batch-invariant)."""

    name = "transcribe"
    methods = ("transcribe_batch", "load_audio")

    #: Reference fields looked for, in order, when no text_field is given (as `speechkit evaluate` does).
    default_text_fields = ("text", "words")

    def __init__(self, audio_field: str = "wav", text_field: Optional[str] = None):
        super().__init__(audio_field)
        self.text_field = text_field

    @property
    def options(self) -> dict:
        return {**super().options, "text_field": self.text_field}

    @property
    def keep_fields(self) -> tuple:
        return (self.text_field,) if self.text_field else self.default_text_fields

    def run(self, model, inputs: list) -> list:
        texts, _ = model.transcribe_batch(*pad(inputs))
        return list(texts)

    def record(self, result) -> dict:
        return {"text": result}

    def merge(self, folder: Path, records: dict, fields: dict) -> dict:
        from speechkit.jobs.outputs import write_atomic

        lines = "".join(f"{item_id}\t{records[item_id]['text']}\n" for item_id in records)
        write_atomic(folder / "transcripts.txt", lambda path: path.write_text(lines, encoding="utf-8"))
        results = {item_id: {"text": record["text"]} for item_id, record in records.items()}
        write_atomic(folder / "results.json", lambda path: path.write_text(
            json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"))
        summary = {"items": len(records), "transcripts": str(folder / "transcripts.txt")}
        def references_in(field):
            return {i: fields.get(i, {}).get(field) for i in records}

        candidates = [self.text_field] if self.text_field else self.default_text_fields
        found = [references_in(f) for f in candidates
                 if all(isinstance(text, str) for text in references_in(f).values())]
        references = found[0] if found else {}
        if records and found:
            from speechkit.metrics import ErrorRateStats

            stats = ErrorRateStats()
            ids = list(records)
            stats.append(ids, [records[i]["text"] for i in ids], [references[i] for i in ids])
            scores = stats.summarize()
            write_atomic(folder / "wer.txt", stats.write_stats)
            summary.update(WER=scores["WER"], num_edits=scores["num_edits"],
                           num_scored_tokens=scores["num_scored_tokens"], wer_report=str(folder / "wer.txt"))
        return summary


@register_task
class EncodeTask(Task):
    """The model's encoder output of each item (for an ASR model: per-frame scores, e.g. CTC emissions for an
    external decoder) as a ``(frames, dim)`` float32 ``.npy`` file. The merge writes ``outputs.json``, a
    manifest ``{id: {"file": path, "frames": n}}`` sorted by id."""

    name = "encode"
    methods = ("encode_batch", "load_audio")
    suffix = ".npy"

    def run(self, model, inputs: list) -> list:
        outputs, lengths = model.encode_batch(*pad(inputs))
        return [outputs[i, :int(n)].detach().to("cpu", torch.float32).numpy() for i, n in enumerate(lengths)]

    def record(self, result) -> dict:
        return {"frames": int(result.shape[0])}

    def write(self, path: Path, result) -> None:
        with open(path, "wb") as handle:  # a file object: np.save would add ".npy" to the temporary name
            np.save(handle, np.ascontiguousarray(result), allow_pickle=False)

    def merge(self, folder: Path, records: dict, fields: dict) -> dict:
        from speechkit.data.manifest import write_json_manifest

        manifest = {item_id: {"file": str(folder.resolve() / record["output"]), "frames": record["frames"]}
                    for item_id, record in records.items()}
        write_json_manifest(manifest, folder / "outputs.json")
        return {"items": len(records), "manifest": str(folder / "outputs.json")}

