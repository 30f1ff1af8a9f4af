"""A hparams file that extends another (a top-level ``!include:``): the base with the file's keys as
overrides, includes relative to the file that writes them, and clear errors for the mistakes."""
from __future__ import annotations

import pytest

from speechkit.errors import HparamsError
from speechkit.experiment.hparams import load_hparams, resolve_hparams_text


@pytest.fixture
def base(tmp_path):
    """template/train.yaml, including template/model.yaml (relative to the template's folder)."""
    template = tmp_path / "template"
    template.mkdir()
    (template / "model.yaml").write_text("dim: 8\nlayers: 2\n")
    (template / "train.yaml").write_text(
        "lr: 0.1\nepochs: 3\nsplits: [train, valid]\nmodel: !include:model.yaml {}\n"
        "scaled: !apply:operator.mul [!ref <lr>, 2]\n"
        "optimizer: !name:torch.optim.SGD\n    lr: !ref <lr>\n")
    return template / "train.yaml"


def _recipe(folder, text):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.yaml").write_text(text)
    return folder / "train.yaml"


def test_the_file_is_its_base_with_its_keys_overriding(base, tmp_path):
    recipe = _recipe(tmp_path / "recipes" / "mine", "# my recipe\n!include:../../template/train.yaml\n"
                                                    "lr: 0.5\nmodel:\n    dim: 16\n")
    hparams = load_hparams(recipe)
    assert (hparams["lr"], hparams["epochs"], hparams["splits"]) == (0.5, 3, ["train", "valid"])
    assert hparams["model"] == {"dim": 16, "layers": 2}  # the base's include, found from the base's folder
    assert hparams["scaled"] == 1.0  # references see the overridden value
    assert hparams["optimizer"].keywords["lr"] == 0.5
    # Overrides of the command line apply on top, as for any file.
    assert load_hparams(recipe, {"epochs": 5, "model.layers": 1})["model"] == {"dim": 16, "layers": 1}


def test_an_empty_override_mapping_is_the_base_itself(base, tmp_path):
    same = _recipe(tmp_path / "same", "!include:../template/train.yaml {}\n")
    assert resolve_hparams_text(str(same)) == resolve_hparams_text(str(base))


def test_an_include_written_in_the_extending_file_is_relative_to_it(base, tmp_path):
    folder = tmp_path / "recipes" / "mine"
    folder.mkdir(parents=True)
    (folder / "model.yaml").write_text("!include:../../template/model.yaml\nlayers: 6\n")  # extends too
    recipe = _recipe(folder, "!include:../../template/train.yaml\nmodel: !include:model.yaml {}\n")
    assert load_hparams(recipe)["model"] == {"dim": 8, "layers": 6}


def test_a_key_the_base_lacks_is_refused_with_the_nearest_name(base, tmp_path):
    recipe = _recipe(tmp_path / "typo", "!include:../template/train.yaml\nepoch: 5\n")
    with pytest.raises(HparamsError, match=r"typo/train.yaml \(extending .*template/train.yaml\).*"
                                           r"'epoch'.*did you mean 'epochs'"):
        load_hparams(recipe)


def test_a_missing_base_and_a_circle_are_named(tmp_path):
    missing = _recipe(tmp_path / "a", "!include:../nowhere/train.yaml\nlr: 1\n")
    with pytest.raises(HparamsError, match=r"a/train.yaml: the file it extends .* not found: .*nowhere"):
        load_hparams(missing)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "one.yaml").write_text("!include:two.yaml\nlr: 1\n")
    (tmp_path / "b" / "two.yaml").write_text("!include:one.yaml\nlr: 2\n")
    with pytest.raises(HparamsError, match=r"circle: .*one.yaml -> .*two.yaml -> .*one.yaml"):
        load_hparams(tmp_path / "b" / "one.yaml")


def test_an_extended_file_must_be_a_mapping(tmp_path):
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    recipe = _recipe(tmp_path / "r", "!include:../list.yaml\nlr: 1\n")
    with pytest.raises(HparamsError, match=r"list.yaml: the top level must be a mapping"):
        load_hparams(recipe)
