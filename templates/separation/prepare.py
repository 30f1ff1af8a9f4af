"""Data for the separation recipe: the built-in corpus spoken by many voices, and mixtures of held-out voices.

``prepare_manifests`` builds the corpus (``speechkit corpus`` with every voice, the extra warps included)
unless ``data_folder`` already holds one, then writes the valid and test mixture sets (wsj0-2mix layout, see
``speechkit.data.mixtures``) from the voices held out of training; ``speechkit.recipe.start`` runs it on the
main process first (``build=True``), then on every process. Training mixes the training utterances on the
fly (``DynamicMixtures``). Any corpus with ``{split}.json`` manifests carrying ``wav`` and ``spk`` fields
works: point ``data_folder`` at it and set ``corpus_size: null``.

Example:
    >>> paths = prepare_manifests(hparams)  # doctest: +SKIP
    >>> sorted(paths)  # doctest: +SKIP
    ['test', 'train', 'valid']
"""
from __future__ import annotations

import os

from speechkit.data.mixtures import write_mixtures
from speechkit.errors import DataError


def build_corpus_if_missing(hparams: dict) -> None:
    """The corpus in ``data_folder`` (built with the recipe's voice split when its manifests are missing)."""
    folder = hparams["data_folder"]
    if all(os.path.isfile(os.path.join(folder, f"{s}.json")) for s in ("train", "valid", "test")):
        return
    if hparams["corpus_size"] is None:
        raise DataError(f"{folder}: no train/valid/test.json and corpus_size is null, so no corpus is built")
    from speechkit.corpus.generator import SIZES, CorpusConfig, build_corpus
    from speechkit.corpus.voices import ALL_VOICES

    train, valid, test = SIZES[hparams["corpus_size"]] if isinstance(hparams["corpus_size"], str) \
        else hparams["corpus_size"]
    build_corpus(CorpusConfig(folder, num_train=train, num_valid=valid, num_test=test, seed=hparams["seed"],
                              voices=[v.name for v in ALL_VOICES], test_voices=hparams["test_voices"],
                              valid_voices=hparams["valid_voices"], num_workers=os.cpu_count() or 1))


def prepare_manifests(hparams: dict, build: bool = True) -> dict:
    """``{"train": corpus train manifest, "valid": mixtures, "test": mixtures}``; with ``build`` (on the main
    process), create what is missing first."""
    corpus, mixtures = hparams["data_folder"], hparams["mixtures_folder"]
    paths = {"train": os.path.join(corpus, "train.json"),
             "valid": os.path.join(mixtures, "valid.json"), "test": os.path.join(mixtures, "test.json")}
    if not build:
        return paths
    build_corpus_if_missing(hparams)
    for split in ("valid", "test"):
        if not os.path.isfile(paths[split]):
            write_mixtures(os.path.join(corpus, f"{split}.json"), mixtures, split,
                           hparams[f"num_{split}_mixtures"], num_speakers=hparams["num_speakers"],
                           sample_rate=hparams["sample_rate"], mode="min",
                           level_range_db=hparams["level_range_db"], seed=hparams["seed"],
                           replacements={"data_root": corpus})
    return paths
