"""speechkit --version; every command's --help ends with an example and shows the defaults."""
from __future__ import annotations

import pytest

import speechkit
from speechkit.cli import COMMANDS, EXAMPLES, main


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"speechkit {speechkit.__version__}"
    assert main(["-V"]) == 0


def test_every_command_has_an_example():
    assert set(EXAMPLES) == set(COMMANDS)
    for name, example in EXAMPLES.items():
        assert example.startswith(f"speechkit {name} "), name


@pytest.mark.parametrize("name", ["corpus", "new-recipe", "fetch", "export", "transcribe"])
def test_help_shows_defaults_and_the_example(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    assert exit_info.value.code == 0
    page = capsys.readouterr().out
    assert f"Example:\n  {EXAMPLES[name]}" in page
    assert "(default: None)" not in page and "(default: False)" not in page  # nothing worth showing
    if name == "transcribe":  # its help text does not say the default: the page adds it
        assert "Chunk length for --stream (ms). (default: 320.0)" in " ".join(page.split())


def test_main_help_names_version_and_an_example(capsys):
    assert main(["--help"]) == 0
    page = capsys.readouterr().out
    assert "--version" in page and "Example:" in page
