"""Data for the speaker recognition recipe: the built-in corpus spoken by every voice, manifests labelled by
speaker identity, trial lists and the AS-norm cohort.

``prepare_manifests`` builds the corpus (``speechkit corpus`` with all 69 voices, whole persons held out for
valid and test, see :mod:`speechkit.corpus.speakers`) unless ``data_folder`` already holds one, then writes
under ``{data_folder}/speaker``:

* ``train.json``, ``valid.json``: rows with ``spk`` (the identity: a warp of a flite/festival voice, or an
  eSpeak variant), ``voice``, ``person`` and ``engine``; the splits share no person;
* ``test.json``: the test rows plus ``cohort_size`` training rows marked ``"cohort": true`` (the AS-norm
  cohort, embedded with the test set);
* ``valid_trials.txt``, ``test_trials.txt``: ``label enrol test kind`` (target, same_engine, cross_engine).

Any corpus with ``{split}.json`` manifests carrying ``wav`` and ``voice`` or ``spk`` works: point
``data_folder`` at it and set ``corpus_size: null``. ``speechkit.recipe.start`` runs this on the main process
first (``build=True``), then on every process (``build=False``: only the paths).
"""
from __future__ import annotations

import json
import os
import random

from speechkit.corpus.speakers import check_disjoint, speaker_rows, speaker_split
from speechkit.data.trials import make_trials, write_trials
from speechkit.errors import DataError

SPLITS = ("train", "valid", "test")


def build_corpus_if_missing(hparams: dict) -> None:
    folder = hparams["data_folder"]
    if all(os.path.isfile(os.path.join(folder, f"{split}.json")) for split in SPLITS):
        return
    if hparams["corpus_size"] is None:
        raise DataError(f"{folder}: no train/valid/test.json and corpus_size is null, so no corpus is built")
    from speechkit.corpus.generator import SIZES, CorpusConfig, build_corpus

    split = speaker_split(hparams["test_speakers"], hparams["valid_speakers"])
    size = hparams["corpus_size"]
    train, valid, test = SIZES[size] if isinstance(size, str) else size
    build_corpus(CorpusConfig(folder, num_train=train, num_valid=valid, num_test=test, seed=hparams["seed"],
                              **split, num_workers=os.cpu_count() or 1))


def read_rows(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        rows = json.load(handle)
    if not isinstance(rows, dict):
        raise DataError(f"{path}: expected a JSON object of utterances")
    try:
        return speaker_rows(rows)
    except DataError as error:
        raise DataError(f"{path}: {error}") from None


def cohort_rows(train: dict, size: int, seed: int) -> dict:
    """``size`` training rows spread evenly over the training identities (the AS-norm cohort)."""
    by_speaker: dict = {}
    for utt_id in sorted(train):
        by_speaker.setdefault(train[utt_id]["spk"], []).append(utt_id)
    rng = random.Random(seed)
    for ids in by_speaker.values():
        rng.shuffle(ids)
    chosen, round_ = [], 0
    while len(chosen) < min(size, len(train)):
        for ids in by_speaker.values():
            if round_ < len(ids) and len(chosen) < size:
                chosen.append(ids[round_])
        round_ += 1
    return {utt_id: {**train[utt_id], "cohort": True} for utt_id in chosen}


def write_json(rows: dict, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(rows, handle, indent=1)
    os.replace(path + ".tmp", path)


def prepare_manifests(hparams: dict, build: bool = True) -> dict:
    """``{"train", "valid", "test", "valid_trials", "test_trials"}`` paths; with ``build``, write them."""
    out = os.path.join(hparams["data_folder"], "speaker")
    paths = {split: os.path.join(out, f"{split}.json") for split in SPLITS}
    paths.update({f"{split}_trials": os.path.join(out, f"{split}_trials.txt") for split in ("valid", "test")})
    if not build or all(os.path.isfile(path) for path in paths.values()):
        return paths
    build_corpus_if_missing(hparams)
    rows = {split: read_rows(os.path.join(hparams["data_folder"], f"{split}.json")) for split in SPLITS}
    check_disjoint(rows)
    for split in ("valid", "test"):
        trials = make_trials(rows[split], hparams["targets_per_utt"], hparams["nontargets_per_utt"],
                             seed=hparams["seed"])
        write_trials(trials, paths[f"{split}_trials"])
    write_json(rows["train"], paths["train"])
    write_json(rows["valid"], paths["valid"])
    cohort = cohort_rows(rows["train"], hparams["cohort_size"], hparams["seed"])
    test = {utt_id: {**row, "cohort": False} for utt_id, row in rows["test"].items()}
    write_json({**test, **cohort}, paths["test"])
    return paths
