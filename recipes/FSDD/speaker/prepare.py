"""Data of the FSDD speaker recipe: verification trials among real speakers, and training on the built-in
corpus' voices with or without the other real speakers.

The real speakers' utterances are the connected digit strings of ``recipes/FSDD/ASR`` (3-6 digits of one
speaker, 1.5-3 s, written once into ``prepared_folder/strings`` and shared with that recipe): isolated digits
(0.3-0.8 s) are too short to tell voices apart reliably. For the speakers ``held_out`` (two or more), under
``prepared_folder/speaker/<held-out names>-<synthetic|real>/``:

=====================  =================================================================================
``train.json``         the built-in corpus' training voices (the speaker template's split), plus, with
                       ``real_in_train``, every string of the real speakers *not* held out
``valid.json``         the corpus' validation voices (picks the checkpoint: never a real speaker)
``test.json``          every string of the held-out speakers, and ``cohort_size`` training rows marked
                       ``"cohort": true`` (the AS-norm cohort)
``valid_trials.txt``   trials among the corpus' validation voices
``test_trials.txt``    trials among the held-out real speakers: ``targets_per_utt`` strings of the same
                       speaker and ``nontargets_per_utt`` of the others per string; two strings sharing a
                       recording are never paired (they would compare a take with itself)
=====================  =================================================================================

Real speakers are named ``recorded-<speaker>`` in ``spk`` (engine ``recorded``, as ``speechkit corpus
--recordings`` names them): never the name of a synthetic voice. Every path in the manifests is absolute.

Example:
    >>> hparams = {"data_folder": "fsdd", "held_out": ["george", "jackson"], ...}  # doctest: +SKIP
    >>> paths = prepare_manifests(hparams)  # doctest: +SKIP
    >>> sorted(paths)  # doctest: +SKIP
    ['test', 'test_trials', 'train', 'valid', 'valid_trials']
"""
from __future__ import annotations

import os

from speechkit.corpus.recordings import RECORDED_ENGINE, VOICE_PREFIX
from speechkit.data.trials import make_trials, write_trials
from speechkit.errors import DataError
from speechkit.recipe import module_from_file

HERE = os.path.dirname(os.path.abspath(__file__))
SPLITS = ("train", "valid", "test")
#: What a manifest row keeps: the audio, its length and who speaks (speaker_rows adds voice/person/engine).
FIELDS = ("wav", "duration", "spk", "voice", "person", "engine")

#: FSDD's reader and connected strings (recipes/FSDD/ASR), the speaker template's corpus and cohort.
digits = module_from_file(os.path.join(HERE, "..", "ASR", "prepare.py"), "fsdd_digit_strings")
TEMPLATE = os.path.join(HERE, "..", "..", "..", "templates", "speaker_recognition")
template = module_from_file(os.path.join(TEMPLATE, "prepare.py"), "speaker_template_prepare")


def real_speaker_rows(strings: dict) -> dict:
    """``{speaker: {id: row}}`` of the strings (both roles), ``spk`` and ``voice`` ``recorded-<speaker>``,
    in :data:`FIELDS` (a manifest's rows share their fields)."""
    out: dict = {}
    for role_rows in strings.values():
        for utt_id, row in role_rows.items():
            name = f"{VOICE_PREFIX}{row['spk']}"
            out.setdefault(row["spk"], {})[utt_id] = {
                "wav": row["wav"], "duration": row["duration"], "spk": name, "voice": name, "person": name,
                "engine": RECORDED_ENGINE}
    return out


def fold_name(held_out, real_in_train: bool) -> str:
    """``george-jackson-real``: the folder of one held-out set and training condition.

    Raises:
        DataError: ``held_out`` is no list of names.
    """
    if isinstance(held_out, str) or not isinstance(held_out, (list, tuple)) or not all(
            isinstance(name, str) for name in held_out):
        raise DataError(f"held_out must be a list of FSDD speakers, got {held_out!r}")
    return "-".join(sorted(set(held_out))) + ("-real" if real_in_train else "-synthetic")


def checked_held_out(held_out, speakers: list) -> list:
    """The held-out speakers (a list, see :func:`fold_name`), sorted; DataError unless two or more distinct
    speakers of the folder."""
    unknown = sorted(set(held_out) - set(speakers))
    if unknown:
        raise DataError(f"held_out speakers {unknown} are not in the FSDD folder; it holds "
                        f"{', '.join(speakers)}")
    if len(set(held_out)) < 2:
        raise DataError(f"held_out needs two speakers or more (non-target trials are pairs of held-out "
                        f"voices), got {list(held_out)}")
    return sorted(set(held_out))


def absolute_rows(rows: dict, root: str) -> dict:
    """Rows in :data:`FIELDS` whose ``$data_root`` paths point at ``root`` (the corpus), so one manifest
    mixes two folders."""
    return {utt_id: {**{key: row[key] for key in FIELDS if key in row},
                     "wav": row["wav"].replace("$data_root", root)} for utt_id, row in rows.items()}


def corpus_rows(hparams: dict) -> dict:
    """The built-in corpus' speaker rows per split (the corpus built first if missing)."""
    folder = os.path.abspath(hparams["corpus_folder"])
    template.build_corpus_if_missing({**hparams, "data_folder": folder})
    rows = {split: template.read_rows(os.path.join(folder, f"{split}.json")) for split in SPLITS}
    return {split: absolute_rows(split_rows, folder) for split, split_rows in rows.items()}


def prepare_manifests(hparams: dict, build: bool = True) -> dict:
    """``{"train", "valid", "test", "valid_trials", "test_trials"}`` paths; with ``build``, write them.

    Raises:
        DataError: the FSDD folder is missing or holds a broken recording, ``held_out`` names speakers it
            lacks or fewer than two, a synthetic voice in two splits.
    """
    out = os.path.join(os.path.abspath(hparams["prepared_folder"]), "speaker",
                       fold_name(hparams["held_out"], hparams["real_in_train"]))
    paths = {split: os.path.join(out, f"{split}.json") for split in SPLITS}
    paths.update({f"{split}_trials": os.path.join(out, f"{split}_trials.txt") for split in ("valid", "test")})
    if not build or all(os.path.isfile(path) for path in paths.values()):
        return paths
    data_folder = os.path.abspath(hparams["data_folder"])
    recordings = digits.find_recordings(data_folder)
    speakers = sorted({rec.speaker for rec in recordings})
    held_out = checked_held_out(hparams["held_out"], speakers)
    settings = digits.StringSettings(seed=hparams["data_seed"], train_strings=hparams["train_strings"],
                                     valid_strings=hparams["valid_strings"])
    strings = digits.strings_once(recordings, data_folder, hparams["prepared_folder"], settings.checked(),
                                  sample_rate=8000)
    real = real_speaker_rows(strings)
    sources = {utt_id: row["sources"] for role_rows in strings.values() for utt_id, row in role_rows.items()}
    rows = corpus_rows(hparams)
    if hparams["real_in_train"]:
        for speaker in speakers:
            if speaker not in held_out:
                rows["train"].update(real[speaker])
    test = {utt_id: row for speaker in held_out for utt_id, row in real[speaker].items()}
    template.check_disjoint({"train": rows["train"], "valid": rows["valid"], "test": test})
    valid_trials = make_trials(rows["valid"], hparams["targets_per_utt"], hparams["nontargets_per_utt"],
                               seed=hparams["seed"])
    # No engine field: every non-target is a pair of two real voices ("nontarget").
    trial_rows = {utt_id: {"spk": row["spk"], "sources": sources[utt_id]} for utt_id, row in test.items()}
    test_trials = make_trials(trial_rows, hparams["targets_per_utt"], hparams["nontargets_per_utt"],
                              seed=hparams["seed"], source_key="sources")
    cohort = template.cohort_rows(rows["train"], hparams["cohort_size"], hparams["seed"])
    write_trials(valid_trials, paths["valid_trials"])
    write_trials(test_trials, paths["test_trials"])
    template.write_json(rows["train"], paths["train"])
    template.write_json(rows["valid"], paths["valid"])
    template.write_json({**{u: {**r, "cohort": False} for u, r in test.items()}, **cohort}, paths["test"])
    return paths
