"""The ``separate`` and ``extract`` tasks of batch jobs: audio files per source, wav2vec 2.0 feature arrays.

Both run each item alone (a batch of one, no padding) unless ``padded_batches``. The interfaces are
batch-invariant only to float rounding (padding changes the order of a convolution's or an attention's sums,
~1e-7), and by default a job's outputs are byte-for-byte independent of the shard count and the batches
(docs/jobs.md), equal to calling the interface on the file: the batch sets how much audio is read ahead, not
what the model sees together. ``padded_batches=True`` runs each batch padded together instead: faster (the
model sees several items per call), with outputs equal to float rounding only.

Example::

    speechkit infer models/separator mixtures.json --output out/sep --task separate
    speechkit infer models/w2v-features corpus.json --output out/feats --task extract --layer 6
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple, Optional, Union

import numpy as np
import torch

from speechkit.errors import AudioError, JobError, ManifestError
from speechkit.jobs.registry import register_task
from speechkit.jobs.tasks import Task, pad


class Separated(NamedTuple):
    """One item's separated sources: ``(speakers, time)`` float32 at ``sample_rate``."""

    sources: np.ndarray
    sample_rate: int


class _PerItemTask(Task):
    """A task running each item alone, or each batch padded together with ``padded_batches``."""

    def __init__(self, audio_field: str = "wav", padded_batches: bool = False):
        super().__init__(audio_field)
        if not isinstance(padded_batches, bool):
            raise JobError(f"padded_batches must be true or false, got {padded_batches!r}")
        self.padded_batches = padded_batches

    @property
    def options(self) -> dict:
        return {**super().options, "padded_batches": self.padded_batches}

    def load(self, model, item_id: str, row: dict) -> torch.Tensor:
        path = row[self.input_field(row)]
        wav = model.load_audio(path)
        if wav.shape[0] == 0:  # a model's convolutions cannot take an empty input: say which item it is
            raise AudioError(f"item '{item_id}': {path} holds no samples; drop it from the "
                             f"manifest (the task '{self.name}' needs audio)")
        return wav

    def groups(self, inputs: list) -> list:
        """The inputs run in one call of the model each: one group per item, or the whole batch."""
        return [inputs] if self.padded_batches else [[wav] for wav in inputs]


@register_task
class SeparateTask(_PerItemTask):
    """Separation: one float32 WAV file per source of each item, at the model's rate, trimmed to the input's
    length (``outputs/<xx>/<id>/source1.wav``, ``source2.wav``, ...). The merge writes ``outputs.json``, a
    manifest sorted by id: ``{id: {"source1": path, ..., "mixture": input, "duration": s,
    "sample_rate": r}}``.
    """

    name = "separate"
    methods = ("separate_batch", "load_audio")
    suffix = ".wav"
    #: The input fields tried in order when no ``audio_field`` is given: ``wav``, then ``mix_wav`` (the
    #: mixture of a manifest ``speechkit mixtures`` writes, next to its ``s1_wav``, ``s2_wav``, ...).
    MIXTURE_FIELDS = ("wav", "mix_wav")

    def __init__(self, audio_field: Optional[str] = None, padded_batches: bool = False):
        super().__init__(audio_field, padded_batches)

    def input_field(self, row: dict) -> Optional[str]:
        """The field of ``row`` holding the mixture: ``audio_field`` when given, else the first of
        :data:`MIXTURE_FIELDS` the row has (None when it has none)."""
        if self.audio_field is not None:
            return self.audio_field if self.audio_field in row else None
        return next((name for name in self.MIXTURE_FIELDS if name in row), None)

    def check_row(self, item_id: str, row: dict, where: str) -> None:
        if self.input_field(row) is None:
            wanted = f"'{self.audio_field}'" if self.audio_field else " or ".join(
                f"'{name}'" for name in self.MIXTURE_FIELDS)
            raise ManifestError(f"{where}: item '{item_id}' has no field {wanted} (the mixture; choose the "
                                "field with --audio-field)")

    @property
    def keep_fields(self) -> tuple:
        # the mixture's path, listed next to its sources in the merged manifest
        return (self.audio_field,) if self.audio_field else self.MIXTURE_FIELDS

    def run(self, model, inputs: list) -> list:
        results = []
        for group in self.groups(inputs):
            wavs, lengths = pad(group)
            estimates = model.separate_batch(wavs, lengths).detach().to("cpu", torch.float32)
            results += [Separated(np.ascontiguousarray(estimates[i, :, :n].numpy()), int(model.sample_rate))
                        for i, n in enumerate(lengths.tolist())]
        return results

    def record(self, result: Separated) -> dict:
        return {"sources": int(result.sources.shape[0]), "samples": int(result.sources.shape[1]),
                "sample_rate": result.sample_rate}

    def parts(self, result: Separated) -> list:
        return [(f"/source{k + 1}{self.suffix}", (source, result.sample_rate))
                for k, source in enumerate(result.sources)]

    def write(self, path: Path, part: tuple) -> None:
        source, rate = part
        write_float_wav(path, source, rate)

    def merge(self, folder: Path, records: dict, fields: dict) -> dict:
        from speechkit.data.manifest import write_json_manifest
        from speechkit.jobs.outputs import record_files

        root = folder.resolve()
        manifest = {}
        for item_id, record in records.items():
            entry = {f"source{k + 1}": str(root / file["output"])
                     for k, file in enumerate(record_files(record))}
            kept = fields.get(item_id, {})
            mixture = next((kept[name] for name in self.keep_fields if name in kept), None)
            if mixture is not None:
                entry["mixture"] = mixture
            rate = record["sample_rate"]
            entry.update(duration=record["samples"] / rate, sample_rate=rate)
            manifest[item_id] = entry
        write_json_manifest(manifest, folder / "outputs.json")
        return {"items": len(records), "manifest": str(folder / "outputs.json")}


def write_float_wav(path: Path, samples: np.ndarray, sample_rate: int) -> None:
    """Write (time,) samples as a mono 32-bit float WAV (format 3, with the ``fact`` chunk it requires).

    Float keeps the model's samples exactly (16 bits would round them, and clip a source beyond +-1). Written
    here rather than by libsndfile, whose float WAV carries a PEAK chunk with the time of writing: the same
    sources would give other bytes on every run, and the job's outputs must not depend on when they ran.
    """
    data = np.ascontiguousarray(samples, dtype="<f4").tobytes()
    if len(data) > 0xFFFFFFFF - 48:  # the RIFF sizes are 32-bit
        raise JobError(f"{path}: {len(samples)} samples do not fit in a WAV file (4 GiB at most); cut the "
                       "input into shorter segments")
    header = b"".join([
        b"RIFF", struct.pack("<I", 4 + (8 + 16) + (8 + 4) + (8 + len(data))), b"WAVE",
        b"fmt ", struct.pack("<IHHIIHH", 16, 3, 1, sample_rate, 4 * sample_rate, 4, 32),
        b"fact", struct.pack("<II", 4, len(samples)),
        b"data", struct.pack("<I", len(data))])
    with open(path, "wb") as handle:
        handle.write(header + data)


def parse_layer(layer: Union[int, str, None]) -> Union[int, str, None]:
    """A ``layer`` for :meth:`Wav2Vec2Features.extract_batch` from an option: None or ``"output"`` (the
    encoder's output), ``"all"``, or a block index (an int or its digits, as given on the command line).

    Example:
        >>> parse_layer("6"), parse_layer("all"), parse_layer("output")
        (6, 'all', None)
    """
    if layer is None or layer == "output":
        return None
    if layer == "all":
        return "all"
    if isinstance(layer, str) and layer.strip().isdecimal():
        return int(layer)
    if isinstance(layer, int) and not isinstance(layer, bool) and layer >= 0:
        return layer
    raise JobError(f"--layer must be a block index (0, 1, ...), 'all' or 'output', got {layer!r}")


@register_task
class ExtractTask(_PerItemTask):
    """wav2vec 2.0 features of one layer (see :func:`parse_layer`) as one ``.npy`` per item: ``(frames, dim)``
    float32, or ``(num_layers + 1, frames, dim)`` for ``layer="all"``. The merge writes ``outputs.json``, a
    manifest sorted by id: ``{id: {"file": path, "frames": n, "shape": [...]}}``.

    One file per item, as ``encode``: each is written atomically and checked by size (or checksum) before a
    rerun skips it, so a kill never damages finished items, which appending to a shard-wide array could.

    Args:
        audio_field: manifest field of the input audio.
        layer: None (the encoder's output), ``"all"``, or a Transformer block (0: its input).
        padded_batches: run each batch padded together (faster; equal to float rounding only).
    """

    name = "extract"
    methods = ("extract_batch", "load_audio")
    suffix = ".npy"

    def __init__(self, audio_field: str = "wav", layer: Union[int, str, None] = None,
                 padded_batches: bool = False):
        super().__init__(audio_field, padded_batches)
        self.layer = parse_layer(layer)

    @property
    def options(self) -> dict:
        return {**super().options, "layer": self.layer}

    def check_model(self, model, where: str) -> None:
        super().check_model(model, where)
        num_layers = getattr(model, "num_layers", None)
        if isinstance(self.layer, int) and num_layers is not None and self.layer > num_layers:
            raise JobError(f"{where}: --layer {self.layer} is past the model's last block: it has "
                           f"{num_layers} (layers 0 to {num_layers}, 'all' or 'output')")

    def run(self, model, inputs: list) -> list:
        results = []
        for group in self.groups(inputs):
            features, lengths = model.extract_batch(*pad(group), layer=self.layer)
            features = features.detach().to("cpu", torch.float32)
            for i, frames in enumerate(lengths.tolist()):
                item = features[:, i, :frames] if self.layer == "all" else features[i, :frames]
                results.append(np.ascontiguousarray(item.numpy()))
        return results

    def record(self, result: np.ndarray) -> dict:
        return {"frames": int(result.shape[-2]), "shape": list(result.shape)}

    def write(self, path: Path, result: np.ndarray) -> None:
        with open(path, "wb") as handle:  # a file object: np.save would add ".npy" to the temporary name
            np.save(handle, result, allow_pickle=False)

    def merge(self, folder: Path, records: dict, fields: dict) -> dict:
        from speechkit.data.manifest import write_json_manifest

        root = folder.resolve()
        manifest = {item_id: {"file": str(root / record["output"]), "frames": record["frames"],
                              "shape": record["shape"]} for item_id, record in records.items()}
        write_json_manifest(manifest, folder / "outputs.json")
        return {"items": len(records), "layer": self.layer, "manifest": str(folder / "outputs.json")}
