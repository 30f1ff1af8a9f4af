"""speechkit.data: audio I/O, manifests, datasets with dynamic items, padded batches, samplers and loaders.

The main names are importable from here (each module is imported on first use)::

    from speechkit.data import AudioPolicy, DynamicItemDataset, PaddedBatch, takes, provides
    dataset = DynamicItemDataset.from_json("train.json", replacements={"data_root": "/corpora/libri"})
    dataset.add_dynamic_item(AudioPolicy(16000), takes=["wav"], provides=["sig"])  # docs/data.md
"""
from __future__ import annotations

from speechkit.lazy_exports import lazy_exports

# name -> module; imported lazily so that `import speechkit.data` does not pull in torch or soundfile.
_LAZY = {
    "DynamicItemDataset": "speechkit.data.dataset",
    "add_dynamic_item": "speechkit.data.dataset",
    "set_output_keys": "speechkit.data.dataset",
    "takes": "speechkit.data.pipeline",
    "provides": "speechkit.data.pipeline",
    "DynamicItem": "speechkit.data.pipeline",
    "DataPipeline": "speechkit.data.pipeline",
    "PaddedBatch": "speechkit.data.batch",
    "PaddedData": "speechkit.data.batch",
    "pad_sequences": "speechkit.data.batch",
    "read_audio": ("speechkit.data.audio", "read"),
    "write_audio": ("speechkit.data.audio", "write"),
    "audio_info": ("speechkit.data.audio", "info"),
    "Resample": "speechkit.data.resample",
    "AudioPolicy": "speechkit.data.audio_policy",
    "load_manifest": "speechkit.data.manifest",
    "load_json_manifest": "speechkit.data.manifest",
    "load_csv_manifest": "speechkit.data.manifest",
    "build_manifest": "speechkit.data.manifest",
    "split_manifest": "speechkit.data.manifest",
    "write_json_manifest": "speechkit.data.manifest",
    "load_fairseq_manifest": "speechkit.data.fairseq_manifest",
    "write_fairseq_manifest": "speechkit.data.fairseq_manifest",
    "prepare_librispeech": "speechkit.data.librispeech",
    "LabelEncoder": "speechkit.data.encoders",
    "CTCLabelEncoder": "speechkit.data.encoders",
    "make_dataloader": "speechkit.data.loader",
    "DynamicBatchSampler": "speechkit.data.samplers",
}

_SUBMODULES = {"audio", "audio_policy", "convert", "resample", "dataset", "pipeline", "batch", "manifest",
               "fairseq_manifest", "librispeech", "encoders", "samplers", "loader"}

__getattr__ = lazy_exports(__name__, _LAZY, _SUBMODULES)


__all__ = sorted(_LAZY)
