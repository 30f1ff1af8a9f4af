"""The ``generate`` task of batch jobs: audio from mel spectrograms ("embeddings") with a vocoder.

Each manifest row names a ``.npy`` file holding one ``(frames, n_mels)`` float array (as
:meth:`speechkit.pretrained.Vocoder.mel_of_file` gives, or an edit or interpolation of such arrays; see
``speechkit embed`` in docs/vocoder.md) and a ``duration`` in seconds (for balancing the shards). Each item
becomes one mono 32-bit float WAV at the model's rate, ``frames * hop_length`` samples long, written
atomically through the job's output layer. Items run alone (a batch of one) unless ``padded_batches``, so the
bytes do not depend on the shard count or the batches (docs/jobs.md).

Example::

    speechkit infer results/vocoder-model embeddings/manifest.json --output out/gen --task generate
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from speechkit.errors import ManifestError
from speechkit.jobs.audio_tasks import Separated, _PerItemTask, write_float_wav
from speechkit.jobs.registry import register_task


def read_mel(path, n_mels: int, where: str) -> torch.Tensor:
    """A ``(frames, n_mels)`` float32 tensor from a ``.npy`` file, refusing anything else (pickles included).

    Raises:
        ManifestError: naming ``where`` and the file: missing, unreadable, or of the wrong shape or type.
    """
    try:
        with open(path, "rb") as handle:
            array = np.load(handle, allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:
        raise ManifestError(f"{where}: cannot read the mel array {path}: {error}") from None
    if not isinstance(array, np.ndarray) or array.ndim != 2 or array.shape[1] != n_mels \
            or array.shape[0] < 1 or not np.issubdtype(array.dtype, np.floating):
        raise ManifestError(f"{where}: {path} holds a {getattr(array, 'dtype', '?')} array of shape "
                            f"{getattr(array, 'shape', '?')}; the vocoder needs (frames >= 1, {n_mels}) "
                            "floats")
    if not np.isfinite(array).all():
        raise ManifestError(f"{where}: {path} holds NaN or infinite values")
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))


@register_task
class GenerateTask(_PerItemTask):
    """Vocoder: one float32 WAV per item (``outputs/<xx>/<id>.wav``) from the mel array in ``audio_field``
    (default ``mel``). The merge writes ``outputs.json``, a manifest sorted by id: ``{id: {"wav": path,
    "mel": input, "duration": s, "sample_rate": r}}``, ready for another job (e.g. ``transcribe``)."""

    name = "generate"
    methods = ("generate",)
    suffix = ".wav"

    def __init__(self, audio_field: str = "mel", padded_batches: bool = False):
        super().__init__(audio_field, padded_batches)

    @property
    def keep_fields(self) -> tuple:
        return (self.audio_field,)

    def load(self, model, item_id: str, row: dict) -> torch.Tensor:
        return read_mel(row[self.audio_field], model.n_mels, f"item '{item_id}' ({self.audio_field})")

    def check_row(self, item_id: str, row: dict, where: str) -> None:
        if self.audio_field not in row:
            raise ManifestError(f"{where}: item '{item_id}' has no field '{self.audio_field}' (the mel "
                                "array; choose the field with --audio-field)")

    def run(self, model, inputs: list) -> list:
        results = []
        for group in self.groups(inputs):
            lengths = torch.tensor([mel.shape[0] for mel in group], dtype=torch.int64)
            mels = torch.nn.utils.rnn.pad_sequence(group, batch_first=True)
            wavs, samples = model.generate(mels, lengths)
            wavs = wavs.detach().to("cpu", torch.float32)
            results += [Separated(np.ascontiguousarray(wavs[i, :n].numpy())[None], int(model.sample_rate))
                        for i, n in enumerate(samples.tolist())]
        return results

    def record(self, result: Separated) -> dict:
        return {"samples": int(result.sources.shape[1]), "sample_rate": result.sample_rate}

    def write(self, path: Path, result: Separated) -> None:
        write_float_wav(path, result.sources[0], result.sample_rate)

    def merge(self, folder: Path, records: dict, fields: dict) -> dict:
        from speechkit.data.manifest import write_json_manifest

        root = folder.resolve()
        manifest = {}
        for item_id, record in records.items():
            rate = record["sample_rate"]
            entry = {"wav": str(root / record["output"]), "duration": record["samples"] / rate,
                     "sample_rate": rate}
            source = fields.get(item_id, {}).get(self.audio_field)
            if source is not None:
                entry["mel"] = source
            manifest[item_id] = entry
        write_json_manifest(manifest, folder / "outputs.json")
        return {"items": len(records), "manifest": str(folder / "outputs.json")}
