"""speechkit.experiment.recipe: a recipe's helper modules import without sys.path, and start() runs the common
bootstrap (YAML + overrides, experiment folder, preparation on the main process then everywhere)."""
from __future__ import annotations

import sys

import pytest

from speechkit.errors import SpeechkitError
from speechkit.experiment.recipe import module_from_file, sibling_module, start


def test_sibling_module_imports_the_file_next_to_the_script_as_called(tmp_path):
    real, linked = tmp_path / "template", tmp_path / "recipe"
    real.mkdir(), linked.mkdir()
    (real / "train.py").write_text("# the template's script\n")
    (linked / "train.py").symlink_to(real / "train.py")
    (real / "helper_mod_x.py").write_text("WHERE = 'template'\n")
    (linked / "helper_mod_x.py").write_text("WHERE = 'recipe'\n")
    path_before = list(sys.path)
    try:
        module = sibling_module(str(linked / "train.py"), "helper_mod_x")
        assert module.WHERE == "recipe"  # the link's folder, not the resolved one
        assert sibling_module(str(linked / "train.py"), "helper_mod_x") is module
        assert sys.path == path_before
        with pytest.raises(SpeechkitError, match="missing_mod.py: not found"):
            sibling_module(str(linked / "train.py"), "missing_mod")
    finally:
        sys.modules.pop("helper_mod_x", None)


def test_module_from_file_imports_another_recipes_file_once_and_a_failing_one_leaves_nothing(tmp_path):
    (tmp_path / "other.py").write_text("VALUE = 3\n")
    (tmp_path / "broken.py").write_text("raise RuntimeError('broken on import')\n")
    try:
        module = module_from_file(tmp_path / "other.py", "other_recipe_prepare_x")
        assert module.VALUE == 3 and sys.modules["other_recipe_prepare_x"] is module
        assert module_from_file(str(tmp_path / "other.py"), "other_recipe_prepare_x") is module
        with pytest.raises(RuntimeError, match="broken on import"):
            module_from_file(tmp_path / "broken.py", "broken_recipe_prepare_x")
        assert "broken_recipe_prepare_x" not in sys.modules
        with pytest.raises(SpeechkitError, match="absent.py: not found"):
            module_from_file(tmp_path / "absent.py", "absent_recipe_prepare_x")
    finally:
        sys.modules.pop("other_recipe_prepare_x", None)


def test_start_loads_prepares_on_main_then_everywhere(tmp_path):
    hparams_file = tmp_path / "hp.yaml"
    hparams_file.write_text(f"output_folder: {tmp_path / 'out'}\nlr: 0.5\n")
    calls = []

    def prepare(hparams, build):
        calls.append(build)
        return {"train": f"{hparams['output_folder']}/train.json"}

    run = start([str(hparams_file), "--lr", "0.1", "--noprogressbar"], prepare=prepare)
    assert run.hparams["lr"] == 0.1 and run.run_opts.noprogressbar
    assert calls == [True, False]  # one process: it is the main one
    assert run.manifests == {"train": f"{tmp_path / 'out'}/train.json"}
    assert (tmp_path / "out").is_dir()
