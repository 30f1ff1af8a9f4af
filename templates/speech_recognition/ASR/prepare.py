"""Data preparation shared by the Tokenizer, LM and ASR steps of the template.

``data_folder`` is either a folder of your own data, holding ``train.json``, ``valid.json`` and
``test.json`` (what ``speechkit data import`` writes: docs/data.md, "Bring your own data"), used as it is,
or the built-in synthetic corpus (``speechkit corpus``), built there when the folder holds no manifests (a
few minutes on 2 cores for the ``small`` size). A folder with only some of the three manifests, or with
other manifests (``train-clean-100.json``...), is refused rather than built into. Audio paths are absolute
or ``$data_root/...`` (the data folder).

Before training, the manifests go through ``speechkit data check`` (once per manifest content, the report
cached in ``<output_folder>/data_check``); errors stop the run with the report's lines (``--check_data
False`` skips the check).

Every step calls :func:`prepare_manifests` with its hparams (``data_folder``, ``corpus_size``); a recipe for
another corpus replaces this file with one that defines the same function.

Example:
    >>> manifests = prepare_data("data/SynthSpeech", corpus_size="demo")  # doctest: +SKIP
    >>> sorted(manifests)  # doctest: +SKIP
    ['test', 'train', 'valid']
"""
from __future__ import annotations

import json
import logging
import os
from typing import Optional

from speechkit.errors import DataError

SPLITS = ("train", "valid", "test")
logger = logging.getLogger(__name__)


def warn_if_other_size(data_folder: str, corpus_size: Optional[str]) -> None:
    """Log a warning when ``data_folder`` holds a built-in corpus of another size than ``corpus_size``: it is
    used as it is (the steps of a recipe share one folder), which a user who changed the size should know."""
    from speechkit.corpus.generator import SIZES

    info = os.path.join(data_folder, "corpus.json")
    if corpus_size not in SIZES or not os.path.isfile(info):
        return
    try:
        with open(info, encoding="utf-8") as handle:
            settings = json.load(handle)["settings"]
        found = tuple(settings[key] for key in ("num_train", "num_valid", "num_test"))
    except (OSError, ValueError, KeyError, TypeError):
        return  # not a corpus.json of speechkit's: nothing to compare
    if found != tuple(SIZES[corpus_size]):
        logger.warning("%s holds a corpus of %d/%d/%d train/valid/test utterances, not the %r size "
                       "(%d/%d/%d); it is used as it is: choose another data_folder to build that size",
                       data_folder, *found, corpus_size, *SIZES[corpus_size])


def engine_split(data_folder: str) -> dict:
    """``{"test_engine": path}`` when the corpus was built with ``--held-out-engine`` (voices of a speech
    engine absent from training speak the test sentences), else ``{}``."""
    from speechkit.corpus.generator import ENGINE_SPLIT

    path = os.path.join(data_folder, f"{ENGINE_SPLIT}.json")
    return {ENGINE_SPLIT: path} if os.path.isfile(path) else {}


def written_by_corpus(path: str) -> bool:
    """Whether the manifest at ``path`` is one of the built-in corpus' (its rows name a ``voice``): the
    remains of an interrupted build, which building again completes."""
    try:
        with open(path, encoding="utf-8") as handle:
            rows = json.load(handle)
        return isinstance(rows, dict) and all(isinstance(row, dict) and "voice" in row
                                              for row in rows.values())
    except (OSError, ValueError):
        return False


def refuse_partial_folder(data_folder: str, manifests: dict) -> None:
    """Raise DataError when ``data_folder`` holds manifests of other data but not the three the template
    reads: the user meant their own data, and building the synthetic corpus there would be a surprise."""
    if not os.path.isdir(data_folder):
        return
    present = [os.path.basename(path) for path in manifests.values() if os.path.isfile(path)]
    others = sorted(name for name in os.listdir(data_folder) if name.endswith((".json", ".csv", ".jsonl"))
                    and name not in present and name not in ("corpus.json", "split.json"))
    own = [name for name in present if not written_by_corpus(os.path.join(data_folder, name))]
    if own or others:
        missing = [os.path.basename(path) for path in manifests.values() if not os.path.isfile(path)]
        raise DataError(f"{data_folder} holds {', '.join(present + others)} but not {', '.join(missing)}: a "
                        "folder of your own data needs train.json, valid.json and test.json (speechkit data "
                        "import writes them: docs/data.md#bring-your-own-data); no corpus is built there")


def prepare_data(data_folder: str, corpus_size: Optional[str] = "small", seed: int = 1234,
                 num_workers: int = 2) -> dict:
    """Make sure ``data_folder`` holds the corpus manifests; build the built-in corpus there if it is empty.

    Args:
        data_folder: folder holding (or to receive) ``train.json``, ``valid.json``, ``test.json``.
        corpus_size: named size of the built-in corpus to build when none is there (``tiny``, ``demo``,
            ``small``, ``medium``, ``large``); ``None`` never builds (the manifests must exist).
        seed: seed of the built corpus (same seed, same bytes).
        num_workers: synthesis processes.

    Returns:
        ``{split: manifest path}``: train, valid, test, and test_engine when the corpus has it.
    """
    data_folder = os.path.abspath(data_folder)
    manifests = {split: os.path.join(data_folder, f"{split}.json") for split in SPLITS}
    if all(os.path.isfile(path) for path in manifests.values()):
        warn_if_other_size(data_folder, corpus_size)
        return {**manifests, **engine_split(data_folder)}
    refuse_partial_folder(data_folder, manifests)
    if corpus_size is None:
        missing = [path for path in manifests.values() if not os.path.isfile(path)]
        raise DataError(f"{data_folder}: manifests missing ({', '.join(missing)}) and corpus_size is null, "
                        "so no corpus is built")
    from speechkit.corpus.generator import SIZES, CorpusConfig, build_corpus

    if corpus_size not in SIZES:
        raise DataError(f"corpus_size must be one of {', '.join(SIZES)}, got {corpus_size!r}")
    train, valid, test = SIZES[corpus_size]
    config = CorpusConfig(data_folder, num_train=train, num_valid=valid, num_test=test, seed=seed,
                          num_workers=num_workers)
    build_corpus(config)
    return manifests


def prepare_manifests(hparams: dict, build: bool = True) -> dict:
    """``{split: manifest path}`` for a recipe's hparams; builds the corpus when ``build`` (main process only)
    and ``skip_prep`` is not set. Audio paths in the manifests are relative to ``$data_root``, which the
    recipes replace with ``data_folder``."""
    size = hparams.get("corpus_size") if build and not hparams.get("skip_prep", False) else None
    manifests = prepare_data(hparams["data_folder"], corpus_size=size)
    if build and hparams.get("check_data", False):  # a recipe opts in with check_data in its YAML
        from speechkit.data.check import CheckOptions, check_before_training

        rate = hparams.get("sample_rate") or (hparams.get("model") or {}).get("sample_rate")
        check_before_training({split: manifests[split] for split in SPLITS},
                              os.path.join(hparams["output_folder"], "data_check"),
                              CheckOptions(sample_rate=rate),
                              replacements={"data_root": hparams["data_folder"]}, log=logger.warning)
    return manifests
