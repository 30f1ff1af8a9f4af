"""Data of the FSDD separation recipe: mixtures of two real speakers held out of training, and training
mixtures of the other real speakers (to fine-tune a separator of the built-in corpus, or train one).

The sources are the connected digit strings of ``recipes/FSDD/ASR`` (3-6 digits of one speaker, 1.5-3 s,
written once into ``prepared_folder/strings`` and shared with that recipe): isolated digits (0.3-0.8 s) are
shorter than the 2 s training crops. For the speakers ``held_out`` names (``george-jackson``: two or more,
joined by ``-``), under ``prepared_folder/separation/<held_out>/`` (the recipe's ``mixtures_folder``):

==============================  ==========================================================================
``sources-train-<sources>.json``  what training mixes anew every epoch: the strings made of recordings 5-49
                                of the speakers *not* held out (``train_sources: real``), plus the built-in
                                corpus' training voices with ``real+synthetic``
``sources-valid.json``          the strings made of recordings 0-4 of the training speakers
``valid.json``                  ``num_valid_mixtures`` mixtures of them (picks the checkpoint)
``sources-test.json``           every string of the held-out speakers
``test.json``                   ``num_test_mixtures`` mixtures of two distinct held-out speakers: the figure
==============================  ==========================================================================

Real speakers are named ``recorded-<speaker>`` in ``spk`` (as ``speechkit corpus --recordings`` names them),
never the name of a synthetic speaker. Mixtures follow ``speechkit.data.mixtures`` (wsj0-2mix layout, ``min``
mode: cut to the shorter string). A separator of the built-in corpus scores the test mixtures without
training (``--test_only --pretrained_checkpoints``), or starts from there (``--pretrained_checkpoints``).

Example:
    >>> hparams = {"data_folder": "fsdd", "held_out": "george-jackson", ...}  # doctest: +SKIP
    >>> paths = prepare_manifests(hparams)  # doctest: +SKIP
    >>> sorted(paths)  # doctest: +SKIP
    ['test', 'train', 'valid']
"""
from __future__ import annotations

import os

from speechkit.corpus.recordings import VOICE_PREFIX
from speechkit.data.mixtures import write_mixtures
from speechkit.errors import DataError
from speechkit.recipe import module_from_file

HERE = os.path.dirname(os.path.abspath(__file__))
#: What training mixes: the real speakers not held out, alone or with the built-in corpus' training voices.
TRAIN_SOURCES = ("real", "real+synthetic")

#: FSDD's reader and connected strings (recipes/FSDD/ASR), the separation template's corpus and mixtures.
digits = module_from_file(os.path.join(HERE, "..", "ASR", "prepare.py"), "fsdd_digit_strings")
template = module_from_file(os.path.join(HERE, "..", "..", "..", "templates", "separation", "prepare.py"),
                            "separation_template_prepare")
written_mixtures = template.written_mixtures  # an FSDD folder holds none: training mixes anew


def held_out_speakers(held_out, speakers: list) -> list:
    """The speakers of ``held_out`` (``"george-jackson"``), checked against the folder's ``speakers``.

    Raises:
        DataError: not a string, fewer than two distinct names, or a name the folder lacks.
    """
    names = sorted(set(held_out.split("-"))) if isinstance(held_out, str) else []
    if len(names) < 2:
        raise DataError(f"held_out must name two or more FSDD speakers joined by '-' (george-jackson), got "
                        f"{held_out!r}")
    unknown = [name for name in names if name not in speakers]
    if unknown:
        raise DataError(f"held_out speakers {unknown} are not in the FSDD folder; it holds "
                        f"{', '.join(speakers)}")
    return names


def string_rows(strings: dict, role: str, speakers: list) -> dict:
    """The strings of ``role`` (``train``, ``valid``; ``None``: both) spoken by ``speakers``, as source rows
    (``wav``, ``duration``, ``spk``: ``recorded-<speaker>``)."""
    roles = [role] if role else list(strings)
    return {utt_id: {"wav": row["wav"], "duration": row["duration"], "spk": f"{VOICE_PREFIX}{row['spk']}"}
            for name in roles for utt_id, row in strings[name].items() if row["spk"] in speakers}


def synthetic_rows(hparams: dict) -> dict:
    """The built-in corpus' training utterances as source rows (absolute paths; the template's corpus built
    first when ``corpus_folder`` has none)."""
    folder = os.path.abspath(hparams["corpus_folder"])
    template.build_corpus_if_missing({**hparams, "data_folder": folder})
    rows = template.speaker_rows(os.path.join(folder, "train.json"))
    return {utt_id: {"wav": row["wav"].replace("$data_root", folder), "duration": row["duration"],
                     "spk": row["spk"]} for utt_id, row in rows.items()}


def prepare_manifests(hparams: dict, build: bool = True) -> dict:
    """``{"train": sources, "valid": mixtures, "test": mixtures}`` paths; with ``build`` (on the main
    process), write what is missing.

    Raises:
        DataError: the FSDD folder is missing or holds a broken recording, ``held_out`` is malformed or names
            speakers the folder lacks, ``train_sources`` is unknown, too few speakers to mix.
    """
    if hparams["train_sources"] not in TRAIN_SOURCES:
        raise DataError(f"train_sources must be one of {TRAIN_SOURCES}, got {hparams['train_sources']!r}")
    out = os.path.abspath(hparams["mixtures_folder"])
    paths = {"train": os.path.join(out, f"sources-train-{hparams['train_sources']}.json"),
             "valid": os.path.join(out, "valid.json"), "test": os.path.join(out, "test.json")}
    if not build:
        return paths
    data_folder = os.path.abspath(hparams["data_folder"])
    recordings = digits.find_recordings(data_folder)
    speakers = sorted({rec.speaker for rec in recordings})
    held_out = held_out_speakers(hparams["held_out"], speakers)
    training = [name for name in speakers if name not in held_out]
    settings = digits.StringSettings(seed=hparams["data_seed"], train_strings=hparams["train_strings"],
                                     valid_strings=hparams["valid_strings"]).checked()
    strings = digits.strings_once(recordings, data_folder, hparams["prepared_folder"], settings,
                                  sample_rate=8000)  # FSDD's rate (find_recordings checks it)
    if not os.path.isfile(paths["train"]):
        rows = string_rows(strings, "train", training)
        if hparams["train_sources"] == "real+synthetic":
            rows.update(synthetic_rows(hparams))
        template.write_json(rows, paths["train"])
    sources = {"valid": string_rows(strings, "valid", training), "test": string_rows(strings, None, held_out)}
    for split, rows in sources.items():
        if os.path.isfile(paths[split]):
            template.check_written(paths[split], hparams[f"num_{split}_mixtures"], f"num_{split}_mixtures")
        else:
            template.write_json(rows, os.path.join(out, f"sources-{split}.json"))
            write_mixtures(os.path.join(out, f"sources-{split}.json"), out, split,
                           hparams[f"num_{split}_mixtures"], num_speakers=hparams["num_speakers"],
                           sample_rate=hparams["sample_rate"], mode="min",
                           level_range_db=hparams["level_range_db"], seed=hparams["seed"])
    template.check_data(hparams, {split: paths[split] for split in ("valid", "test")})
    return paths
