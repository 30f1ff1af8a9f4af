"""The separation recipe's voice split: test mixtures hold only speakers never heard in training."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from speechkit.corpus.voices import ALL_VOICES, ESPEAK_ACCENTS, speaker_of
from speechkit.data.mixtures import plan_mixtures
from speechkit.errors import DataError
from speechkit.experiment.hparams import resolve_hparams_text
from tests.helpers.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "SynthSpeech" / "separation"
prepare = load_script(RECIPE / "prepare.py", "separation_prepare")


class _UntaggedLoader(yaml.SafeLoader):
    """Reads a hyperpyyaml file as plain YAML: every tagged node (``!ref``, ``!new:``...) reads as None."""


_UntaggedLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def recipe_voices(path: Path) -> dict:
    """test_voices and valid_voices of a recipe folder's hparams/train.yaml (with the file it extends)."""
    hparams = yaml.load(resolve_hparams_text(path / "hparams" / "train.yaml"), Loader=_UntaggedLoader)
    return {key: hparams[key] for key in ("test_voices", "valid_voices")}


@pytest.mark.parametrize("folder", [RECIPE, REPO / "templates" / "separation"])
def test_recipe_split_is_speaker_disjoint(folder):
    split = recipe_voices(folder)
    voices = [v.name for v in ALL_VOICES]
    assert set(split["test_voices"]) <= set(voices) and set(split["valid_voices"]) <= set(voices)
    prepare.check_speaker_disjoint(voices, split["valid_voices"], split["test_voices"])
    train = set(voices) - set(split["test_voices"]) - set(split["valid_voices"])
    test_speakers = {speaker_of(v) for v in split["test_voices"]}
    assert "kal" in test_speakers and {"espeak-m7", "espeak-f4"} <= test_speakers
    assert not {speaker_of(v) for v in train} & test_speakers
    assert not any(v.startswith("espeak-ca-") for v in train)  # a whole accent is never heard in training
    assert len({speaker_of(v) for v in train}) >= 12 and len(ESPEAK_ACCENTS) == 4


def test_a_test_voice_of_a_training_speaker_is_refused():
    voices = [v.name for v in ALL_VOICES]
    with pytest.raises(DataError, match=r"share speakers \['espeak-m7', 'kal'\]"):
        prepare.check_speaker_disjoint(voices, [], ["kal", "espeak-us-m7"])


def test_test_mixtures_never_pair_two_voices_of_one_speaker(tmp_path):
    test_voices = recipe_voices(RECIPE)["test_voices"]
    rows = {f"{v}-test-{u}": {"wav": f"$data_root/test/{v}/{u}.flac", "spk": v, "duration": 1.0}
            for v in test_voices for u in range(3)}
    (tmp_path / "test.json").write_text(json.dumps(rows))
    prepare.write_speaker_manifest(str(tmp_path / "test.json"), str(tmp_path / "mix" / "sources-test.json"))
    sources = json.loads((tmp_path / "mix" / "sources-test.json").read_text())
    assert sources["kal-lo-test-0"]["spk"] == "kal" and sources["kal-lo-test-0"]["voice"] == "kal-lo"
    plans = plan_mixtures(sources, 300, num_speakers=2, seed=3)
    pairs = [tuple(sources[s.id]["voice"] for s in plan.sources) for plan in plans]
    assert all(speaker_of(a) != speaker_of(b) for a, b in pairs)
    assert {speaker_of(v) for pair in pairs for v in pair} == {"kal", "espeak-m2", "espeak-m7", "espeak-f4"}
    # A corpus whose manifests already name the speaker keeps its voices.
    named = {u: {**row, "spk": speaker_of(row["spk"]), "voice": row["spk"]} for u, row in rows.items()}
    (tmp_path / "new.json").write_text(json.dumps(named))
    prepare.write_speaker_manifest(str(tmp_path / "new.json"), str(tmp_path / "mix" / "sources-new.json"))
    assert json.loads((tmp_path / "mix" / "sources-new.json").read_text()) == sources
    (tmp_path / "bad.json").write_text(json.dumps({"u1": {"wav": "x.flac"}}))
    with pytest.raises(DataError, match="bad.json: item 'u1' has no 'spk'"):
        prepare.write_speaker_manifest(str(tmp_path / "bad.json"), str(tmp_path / "out.json"))


def test_held_out_engine_mixtures_pair_each_engine_voice_with_a_test_voice(tmp_path):
    from speechkit.corpus.generator import CorpusConfig, split_voices

    voices = [v.name for v in ALL_VOICES]
    split = recipe_voices(RECIPE)
    config = CorpusConfig(str(tmp_path), voices=voices, test_voices=split["test_voices"],
                          valid_voices=split["valid_voices"], held_out_engine="festival")
    by_split = split_voices(config)
    assert {speaker_of(v) for v in by_split["test_engine"]} == {"ked"}
    assert not any(speaker_of(v) == "ked" for s in ("train", "valid", "test") for v in by_split[s])
    for name, split_name in (("test.json", "test"), ("test_engine.json", "test_engine")):
        rows = {f"{v}-{split_name}-{u}": {"wav": f"$data_root/{split_name}/{v}/{u}.flac", "spk": v,
                                          "voice": v, "duration": 1.0}
                for v in by_split[split_name] for u in range(2)}
        (tmp_path / name).write_text(json.dumps(rows))
    anchors = prepare.write_engine_sources(str(tmp_path / "test.json"), str(tmp_path / "test_engine.json"),
                                           str(tmp_path / "mix" / "sources-test_engine.json"))
    assert anchors == ["ked"]
    assert [p.name for p in (tmp_path / "mix").iterdir()] == ["sources-test_engine.json"]
    sources = json.loads((tmp_path / "mix" / "sources-test_engine.json").read_text())
    plans = plan_mixtures(sources, 100, num_speakers=2, seed=1, anchor_speakers=anchors)
    assert {plan.sources[0].speaker for plan in plans} == {"ked"}
    assert {plan.sources[1].speaker for plan in plans} == {"kal", "espeak-m2", "espeak-m7", "espeak-f4"}


def test_a_corpus_without_the_held_out_engine_is_refused(tmp_path):
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.json").write_text("{}")
    with pytest.raises(DataError, match="built without a held-out engine, but held_out_engine is 'festival'"):
        prepare.build_corpus_if_missing({"data_folder": str(tmp_path), "held_out_engine": "festival"})


def test_written_mixtures_are_reused_only_with_the_counts_they_were_written_with(tmp_path):
    from tests.recipes.recipe_helpers import write_speaker_corpus

    corpus = write_speaker_corpus(tmp_path / "corpus")
    hparams = {"data_folder": str(corpus), "mixtures_folder": str(corpus / "mix"), "corpus_size": None,
               "num_valid_mixtures": 2, "num_test_mixtures": 3, "num_speakers": 2, "sample_rate": 8000,
               "level_range_db": 5.0, "seed": 1, "check_data": False}
    paths = prepare.prepare_manifests(hparams)
    written = Path(paths["test"]).read_text()
    assert prepare.prepare_manifests(hparams) == paths and Path(paths["test"]).read_text() == written
    with pytest.raises(DataError, match=r"test\.json holds 3 mixtures, but num_test_mixtures is 4: set "
                                        r"num_test_mixtures to 3 to reuse them, or delete test\.json"):
        prepare.prepare_manifests({**hparams, "num_test_mixtures": 4})
