"""LibriSpeech manifests for the speech recognition scripts (the standard folder tree, nothing downloaded).

``data_folder`` is the ``LibriSpeech`` folder holding ``train-clean-100/``, ``dev-clean/``, ``test-clean/``
... (``<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac`` and ``*.trans.txt``). The manifests go to
``manifest_folder`` with ``$data_root/...`` audio paths, so they stay valid when the corpus moves.

Example:
    >>> prepare_manifests({"data_folder": "/corpora/LibriSpeech", "manifest_folder": "results/manifests",
    ...                    "train_splits": ["train-clean-100"], "valid_split": "dev-clean",
    ...                    "test_split": "test-clean"})  # doctest: +SKIP
    {'train': 'results/manifests/train.json', 'valid': ..., 'test': ...}
"""
from __future__ import annotations

import json
import os

from speechkit.data.librispeech import prepare_librispeech
from speechkit.data.manifest import write_json_manifest
from speechkit.errors import ManifestError


def prepare_manifests(hparams: dict, build: bool = True) -> dict:
    """``{train, valid, test: manifest path}``; the training splits are merged into one ``train.json``.

    With ``build`` False (the non-main processes) or ``skip_prep``, the manifests must already exist.
    """
    folder = hparams["manifest_folder"]
    paths = {split: os.path.join(folder, f"{split}.json") for split in ("train", "valid", "test")}
    if not build or hparams.get("skip_prep", False):
        missing = [path for path in paths.values() if not os.path.isfile(path)]
        if missing:
            raise ManifestError(f"manifests missing: {', '.join(missing)} (run once without skip_prep)")
        return paths
    splits = list(hparams["train_splits"]) + [hparams["valid_split"], hparams["test_split"]]
    written = prepare_librispeech(hparams["data_folder"], os.path.join(folder, "splits"), splits,
                                  placeholder="data_root", num_workers=hparams.get("prep_workers", 2))
    merged: dict = {}
    for split in hparams["train_splits"]:
        with open(written[split], encoding="utf-8") as handle:
            merged.update(json.load(handle))
    write_json_manifest(merged, paths["train"])
    for name, split in (("valid", hparams["valid_split"]), ("test", hparams["test_split"])):
        with open(written[split], encoding="utf-8") as handle:
            write_json_manifest(json.load(handle), paths[name])
    return paths
