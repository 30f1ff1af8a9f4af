"""Data for the separation recipe: the built-in corpus spoken by many voices, and mixtures of held-out voices.

``prepare_manifests`` builds the corpus (``speechkit corpus`` with every voice: the default ones, the extra
warps and the eSpeak NG voices) unless ``data_folder`` already holds one, then writes the valid and test
mixture sets (wsj0-2mix layout, see ``speechkit.data.mixtures``) from the voices held out of training;
``speechkit.recipe.start`` runs it on the main process first (``build=True``), then on every process.
Training mixes the training utterances on the fly (``DynamicMixtures``).

Mixtures pair distinct *speakers*, not only distinct voices: the manifests the mixtures are drawn from
(``{mixtures_folder}/sources-{split}.json``) carry the corpus voice's speaker as ``spk`` (the person behind
the warps ``kal``, ``kal-lo``...; the variant behind the eSpeak accents ``espeak-us-m7``, ``espeak-sc-m7``...)
and the voice as ``voice``. Any corpus with ``{split}.json`` manifests carrying ``wav`` and ``spk`` fields
works: point ``data_folder`` at it and set ``corpus_size: null`` (its ``spk`` values are kept as they are).

Your own mixtures: a ``data_folder`` holding ``train.json``, ``valid.json`` and ``test.json`` whose rows
carry ``mix_wav``, ``s1_wav``, ``s2_wav`` (what ``speechkit data import librimix`` writes, docs/data.md) is
used as it is: no corpus is built, no mixture written, and training reads the written training mixtures
(cropped to ``segment_seconds``) instead of mixing anew.

Before training the manifests go through ``speechkit data check`` (cached in ``<output_folder>/data_check``;
``--check_data False`` skips it); errors stop the run with the report's lines.

Example:
    >>> paths = prepare_manifests(hparams)  # doctest: +SKIP
    >>> sorted(paths)  # doctest: +SKIP
    ['test', 'train', 'valid']
"""
from __future__ import annotations

import json
import os

from speechkit.corpus.generator import ENGINE_SPLIT
from speechkit.data.mixtures import write_mixtures
from speechkit.errors import DataError

SPLITS = ("train", "valid", "test")


def check_speaker_disjoint(voices: list, valid_voices: list, test_voices: list) -> None:
    """Raise DataError naming the speakers that a test voice shares with a training voice.

    Training voices are ``voices`` less the valid and test ones. Valid voices may be new voices of training
    speakers (they only guide the schedule); test voices may not: the test scores unseen speakers.
    """
    from speechkit.corpus.voices import speaker_of

    train = [v for v in voices if v not in valid_voices and v not in test_voices]
    shared = sorted({speaker_of(v) for v in test_voices} & {speaker_of(v) for v in train})
    if shared:
        raise DataError(f"test voices share speakers {shared} with the training voices; hold out every voice "
                        f"of a test speaker (test_voices: {list(test_voices)})")


def build_corpus_if_missing(hparams: dict) -> None:
    """The corpus in ``data_folder`` (built with the recipe's voice split when its manifests are missing)."""
    folder, engine = hparams["data_folder"], hparams.get("held_out_engine")
    if all(os.path.isfile(os.path.join(folder, f"{s}.json")) for s in SPLITS):
        if engine and not os.path.isfile(os.path.join(folder, f"{ENGINE_SPLIT}.json")):
            raise DataError(f"{folder} holds a corpus built without a held-out engine, but held_out_engine "
                            f"is {engine!r}: give another data_folder (the corpus is built there)")
        return
    if hparams["corpus_size"] is None:
        raise DataError(f"{folder}: no train/valid/test.json and corpus_size is null, so no corpus is built")
    from speechkit.corpus.generator import SIZES, CorpusConfig, build_corpus
    from speechkit.corpus.voices import ALL_VOICES

    voices = [v.name for v in ALL_VOICES]
    check_speaker_disjoint(voices, hparams["valid_voices"], hparams["test_voices"])
    train, valid, test = SIZES[hparams["corpus_size"]] if isinstance(hparams["corpus_size"], str) \
        else hparams["corpus_size"]
    build_corpus(CorpusConfig(folder, num_train=train, num_valid=valid, num_test=test, seed=hparams["seed"],
                              voices=voices, test_voices=hparams["test_voices"],
                              valid_voices=hparams["valid_voices"], held_out_engine=engine,
                              num_workers=os.cpu_count() or 1))


def speaker_rows(corpus_manifest: str) -> dict:
    """``corpus_manifest``'s rows with ``spk`` set to each voice's speaker and the voice kept as ``voice``."""
    from speechkit.corpus.voices import speaker_of

    with open(corpus_manifest, encoding="utf-8") as handle:
        rows = json.load(handle)
    if not isinstance(rows, dict):
        raise DataError(f"{corpus_manifest}: expected a JSON object of utterances")
    for utt_id, row in rows.items():
        if not isinstance(row, dict) or ("spk" not in row and "speaker" not in row):
            raise DataError(f"{corpus_manifest}: item {utt_id!r} has no 'spk' (or 'speaker') field")
        # A corpus built before its manifests named speakers has the voice as spk (and no voice field);
        # imported manifests (speechkit data import) name the speaker 'speaker'.
        row["voice"] = row.get("voice", row.get("spk", row.get("speaker")))
        row["spk"] = speaker_of(str(row["voice"]))
    return rows


def write_json(rows: dict, path: str) -> None:
    """``rows`` as JSON at ``path``, through a temporary file (a reader never sees half a manifest)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(rows, handle, indent=1)
    os.replace(path + ".tmp", path)


def write_speaker_manifest(corpus_manifest: str, path: str) -> None:
    """:func:`speaker_rows` of ``corpus_manifest`` written to ``path``."""
    write_json(speaker_rows(corpus_manifest), path)


def write_engine_sources(test_corpus_manifest: str, engine_corpus_manifest: str, path: str) -> list:
    """Sources of the ``test_engine`` mixtures: the held-out engine's utterances and the test speakers'
    (each mixture pairs an engine voice with another unseen voice). Returns the engine's speakers."""
    engine_rows = speaker_rows(engine_corpus_manifest)
    write_json({**speaker_rows(test_corpus_manifest), **engine_rows}, path)
    return sorted({row["spk"] for row in engine_rows.values()})


def written_mixtures(data_folder: str) -> dict:
    """``{split: path}`` when ``data_folder`` holds train/valid/test.json of written mixtures (rows with
    ``mix_wav``, as ``speechkit data import librimix`` writes them), else ``{}``."""
    paths = {split: os.path.join(data_folder, f"{split}.json") for split in SPLITS}
    if not all(os.path.isfile(path) for path in paths.values()):
        return {}
    with open(paths["train"], encoding="utf-8") as handle:
        rows = json.load(handle)
    first = next(iter(rows.values()), None) if isinstance(rows, dict) else None
    return paths if isinstance(first, dict) and "mix_wav" in first else {}


def check_written(path: str, count: int, key: str) -> None:
    """DataError unless the mixtures written at ``path`` (reused) are ``count`` many: other settings never
    pass silently as these."""
    with open(path, encoding="utf-8") as handle:
        found = len(json.load(handle))
    if found != count:
        raise DataError(f"{path} holds {found} mixtures, but {key} is {count}: set {key} to {found} to reuse "
                        f"them, or delete {os.path.basename(path)} to write them anew")


def check_data(hparams: dict, paths: dict) -> None:
    """``speechkit data check`` of the manifests training reads (cached); DataError on errors."""
    if not hparams.get("check_data", False):  # a recipe opts in with check_data in its YAML
        return
    from speechkit.data.check import CheckOptions, check_before_training

    check_before_training(paths, os.path.join(hparams["output_folder"], "data_check"),
                          CheckOptions(sample_rate=hparams["sample_rate"]),
                          replacements={"data_root": hparams["mixtures_folder"]})


def prepare_manifests(hparams: dict, build: bool = True) -> dict:
    """``{"train": training sources by speaker, "valid": mixtures, "test": mixtures}``, plus
    ``"test_engine"`` mixtures with ``held_out_engine``; with ``build`` (on the main process), create what is
    missing first."""
    corpus, mixtures = hparams["data_folder"], hparams["mixtures_folder"]
    splits = SPLITS + ((ENGINE_SPLIT,) if hparams.get("held_out_engine") else ())
    sources = {split: os.path.join(mixtures, f"sources-{split}.json") for split in splits}
    paths = {"train": sources["train"],
             **{split: os.path.join(mixtures, f"{split}.json") for split in splits if split != "train"}}
    own = written_mixtures(corpus)
    if own:
        if build:
            check_data(hparams, own)
        return own
    if not build:
        return paths
    build_corpus_if_missing(hparams)
    for split in SPLITS:
        if not os.path.isfile(sources[split]):
            write_speaker_manifest(os.path.join(corpus, f"{split}.json"), sources[split])
    anchors = None
    if ENGINE_SPLIT in splits and not os.path.isfile(paths[ENGINE_SPLIT]):
        anchors = write_engine_sources(os.path.join(corpus, "test.json"),
                                       os.path.join(corpus, f"{ENGINE_SPLIT}.json"), sources[ENGINE_SPLIT])
    for split in splits[1:]:
        if os.path.isfile(paths[split]):
            check_written(paths[split], hparams[f"num_{split}_mixtures"], f"num_{split}_mixtures")
        else:
            write_mixtures(sources[split], mixtures, split,
                           hparams[f"num_{split}_mixtures"], num_speakers=hparams["num_speakers"],
                           sample_rate=hparams["sample_rate"], mode="min",
                           level_range_db=hparams["level_range_db"], seed=hparams["seed"],
                           replacements={"data_root": corpus},
                           anchor_speakers=anchors if split == ENGINE_SPLIT else None)
    check_data(hparams, {split: paths[split] for split in SPLITS if split != "train"})
    return paths
