"""`speechkit new-recipe`: templates are found, copied, and their outward paths rewritten."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from speechkit import cli, templating
from speechkit.commands import new_recipe
from speechkit.templating import TemplateError, available_templates, copy_template, rewrite_paths


def _fake_templates(root: Path) -> Path:
    """templates/demo/{Tokenizer,ASR} with paths inside and outside the template."""
    templates = root / "repo" / "templates"
    asr = templates / "demo" / "ASR"
    (asr / "hparams").mkdir(parents=True)
    (templates / "demo" / "Tokenizer").mkdir()
    (templates / "demo" / "Tokenizer" / "train.py").write_text("print('tok')\n")
    (asr / "train.py").write_text("DATA = '../../../data/corpus'\n")
    (asr / "hparams" / "ASR.yaml").write_text("d_model: 8\n")
    (asr / "hparams" / "train.yaml").write_text(
        "data_folder: ../../../data/corpus\n"
        "tokenizer: ../Tokenizer/results/tok.model\n"
        "output_folder: results/asr\n"
        "model: !include:ASR.yaml\n"
        "shared: !include:../../../../shared.yaml\n"
    )
    (asr / "README.md").write_text("cd templates/demo/ASR && python train.py hparams/train.yaml\n")
    (asr / "results").mkdir()
    (asr / "results" / "junk.txt").write_text("not copied")
    (asr / "weights.bin").write_bytes(b"\x00../../x\xff")
    return templates


def test_available_templates_lists_folders_and_recipes(tmp_path):
    templates = _fake_templates(tmp_path)
    assert available_templates(templates) == ["demo", "demo/ASR", "demo/Tokenizer"]
    assert available_templates(tmp_path / "missing") == []


def test_copy_whole_template_rewrites_only_paths_that_leave_it(tmp_path):
    templates = _fake_templates(tmp_path)
    dest = copy_template("demo", tmp_path / "mine", root=templates)
    repo = (tmp_path / "repo").resolve()
    hparams = (dest / "ASR" / "hparams" / "train.yaml").read_text()
    # Read from the recipe folder (where train.py runs), like the recipe itself reads it; what leaves the
    # template lands inside the copy (a corpus written there never goes into the checkout or the package).
    assert "data_folder: ../data/corpus\n" in hparams
    assert "tokenizer: ../Tokenizer/results/tok.model\n" in hparams  # sibling folder, copied along
    assert "output_folder: results/asr\n" in hparams
    assert "model: !include:ASR.yaml\n" in hparams
    # !include is relative to the including file (hparams/), so it climbs one folder more.
    assert f"shared: !include:{repo / 'shared.yaml'}\n" in hparams
    assert (dest / "ASR" / "train.py").read_text() == "DATA = '../data/corpus'\n"
    assert (dest / "ASR" / "README.md").read_text().startswith(f"cd {dest}/ASR && python train.py")
    assert not (dest / "ASR" / "results").exists()
    assert (dest / "ASR" / "weights.bin").read_bytes() == b"\x00../../x\xff"  # binary: untouched


def test_copy_one_recipe_points_back_at_its_siblings(tmp_path):
    templates = _fake_templates(tmp_path)
    dest = copy_template("demo/ASR", tmp_path / "asr_only", root=templates)
    hparams = (dest / "hparams" / "train.yaml").read_text()
    assert "tokenizer: Tokenizer/results/tok.model\n" in hparams  # written inside the copy, not the template


def test_unknown_template_lists_the_available_ones(tmp_path):
    templates = _fake_templates(tmp_path)
    with pytest.raises(TemplateError, match=r"unknown template 'nope'.*demo, demo/ASR, demo/Tokenizer"):
        copy_template("nope", tmp_path / "x", root=templates)
    with pytest.raises(TemplateError, match="unknown template '../repo'"):
        copy_template("../repo", tmp_path / "x", root=templates)


def test_refuses_a_non_empty_destination_unless_forced(tmp_path):
    templates = _fake_templates(tmp_path)
    dest = tmp_path / "taken"
    dest.mkdir()
    (dest / "mine.txt").write_text("keep me")
    with pytest.raises(TemplateError, match="taken exists and is not empty"):
        copy_template("demo", dest, root=templates)
    copy_template("demo", dest, root=templates, force=True)
    assert (dest / "mine.txt").read_text() == "keep me"
    assert (dest / "ASR" / "train.py").is_file()


def test_rewrite_keeps_urls_and_plain_words():
    text = "see https://example.org/../a and foo../bar, path ../../up\n"
    out = rewrite_paths(text, Path("/r/t/x/ASR"), Path("/r/t/x"), Path("/d"))
    assert out == "see https://example.org/../a and foo../bar, path ../up\n"


def test_cli_reports_unknown_template_with_the_list(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPEECHKIT_TEMPLATES", str(_fake_templates(tmp_path)))
    assert cli.main(["new-recipe", "nope", str(tmp_path / "x")]) == 1
    assert "available templates: demo, demo/ASR" in capsys.readouterr().err
    assert cli.main(["new-recipe", "demo", str(tmp_path / "ok")]) == 0
    assert (tmp_path / "ok" / "ASR" / "hparams" / "ASR.yaml").is_file()
    capsys.readouterr()
    parser = argparse.ArgumentParser()
    new_recipe.add_arguments(parser)
    assert new_recipe.run(parser.parse_args(["--list"])) == 0
    assert capsys.readouterr().out.splitlines() == ["demo"]  # templates only, not their recipe folders


def test_repository_ships_the_speech_recognition_template():
    names = available_templates()
    assert "speech_recognition" in names
    assert {"speech_recognition/ASR", "speech_recognition/LM", "speech_recognition/Tokenizer"} <= set(names)


def test_without_templates_the_error_says_why_and_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPEECHKIT_TEMPLATES", str(tmp_path / "missing"))
    assert cli.main(["new-recipe", "--list"]) == 1
    error = capsys.readouterr().err
    assert "no templates folder at" in error and "SPEECHKIT_TEMPLATES" in error, error


def _written_paths(copy: Path) -> list:
    """(file, line, path as the recipe resolves it) for every relative path that climbs, includes left out."""
    found = []
    for path in sorted(copy.rglob("*")):
        if not path.is_file() or path.suffix not in (".yaml", ".py", ".sh"):
            continue
        recipe = next((folder for folder in (path.parent, *path.parent.parents)
                       if (folder / "train.py").is_file()), path.parent)
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "!include" in line:
                continue
            for relative in templating._CLIMBING_PATH.findall(line):
                found.append((path, number, (recipe / relative).resolve()))
    return found


@pytest.mark.parametrize("name", ["speech_recognition", "speech_recognition/ASR", "separation",
                                  "ssl_finetune", "whisper_finetune"])
def test_every_path_a_copy_of_a_shipped_template_names_stays_inside_the_copy(tmp_path, name):
    copy = copy_template(name, tmp_path / "mine")
    paths = _written_paths(copy)
    data_folders = [(file, line, (file.parent.parent / text.split(":", 1)[1].split("#")[0].strip()).resolve())
                    for file in copy.rglob("hparams/*.yaml")
                    for line, text in enumerate(file.read_text().splitlines(), 1)
                    if text.startswith("data_folder:")]
    assert data_folders, "no data_folder found: the check checks nothing"
    paths += data_folders
    for file, line, target in paths:
        assert target == copy or copy in target.parents, f"{file}, line {line}: {target} is outside {copy}"
    assert str(templating.templates_root()) not in "".join(p.read_text() for p in copy.rglob("*.yaml")
                                                             if "!include" not in p.read_text())
