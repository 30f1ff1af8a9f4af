"""load_hparams: overrides, includes, and an error naming file, key and line for each kind of mistake."""

from __future__ import annotations

import textwrap

import pytest

from speechkit.errors import HparamsError
from speechkit.experiment.hparams import load_hparams


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def hp_file(tmp_path):
    write(
        tmp_path / "conf" / "model.yaml",
        """\
        dim: 4
        layer: !new:torch.nn.Linear
            in_features: !ref <dim>
            out_features: 2
        """,
    )
    return write(
        tmp_path / "conf" / "train.yaml",
        """\
        lr: 0.01
        folder: !ref results/<lr>
        model: !include:model.yaml
            dim: 3
        optimizer: !name:torch.optim.SGD
            lr: !ref <lr>
        nested:
            depth: 2
        """,
    )


def test_loads_objects_references_and_includes_relative_to_including_file(hp_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the YAML's folder: the include must still be found
    hparams = load_hparams(hp_file)
    assert hparams["folder"] == "results/0.01"
    assert hparams["model"]["layer"].in_features == 3
    assert hparams["optimizer"].keywords == {"lr": 0.01}


def test_overrides_from_dict_with_dotted_keys_and_from_yaml_text(hp_file):
    hparams = load_hparams(hp_file, {"lr": 0.5, "nested.depth": 7, "model.dim": 9})
    assert hparams["lr"] == 0.5 and hparams["optimizer"].keywords["lr"] == 0.5
    assert hparams["nested"]["depth"] == 7
    assert hparams["model"]["layer"].in_features == 9
    assert load_hparams(hp_file, "nested:\n  depth: 5\n")["nested"]["depth"] == 5


def test_command_line_seed_replaces_yaml_seed(tmp_path):
    from speechkit.experiment.run_options import parse_arguments

    path = write(tmp_path / "hp.yaml", "seed: 1\nfolder: !ref out/<seed>\n")
    _, run_opts, overrides = parse_arguments([str(path), "--seed", "7"])
    assert load_hparams(path, overrides, run_opts=run_opts)["folder"] == "out/7"


def test_reference_to_missing_key_names_file_key_and_line(tmp_path):
    path = write(tmp_path / "hp.yaml", "lr: 0.1\nmodel:\n    size: 3\n    rate: !ref <learning_rate>\n")
    with pytest.raises(HparamsError, match=r"hp\.yaml, line 4: key 'model\.rate'.*learning_rate"):
        load_hparams(path)


def test_override_for_unknown_key_names_the_key(hp_file):
    with pytest.raises(HparamsError, match=r"train\.yaml.*override 'nested\.width'"):
        load_hparams(hp_file, {"nested.width": 3})
    with pytest.raises(HparamsError, match="override 'learning_rate'"):
        load_hparams(hp_file, {"learning_rate": 3})


def test_malformed_yaml_names_the_line(tmp_path):
    path = write(tmp_path / "bad.yaml", "a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(HparamsError, match=r"bad\.yaml, line \d+, column \d+: malformed YAML"):
        load_hparams(path)


def test_class_that_cannot_be_imported_names_key_and_line(tmp_path):
    path = write(tmp_path / "hp.yaml", "a: 1\nmodel: !new:torch.nn.NoSuchLayer\n    size: 3\n")
    with pytest.raises(
        HparamsError, match=r"hp\.yaml, line 2: key 'model': cannot import 'torch\.nn\.NoSuchLayer'"
    ):
        load_hparams(path)


def test_bad_constructor_argument_names_the_key(tmp_path):
    path = write(tmp_path / "hp.yaml", "model: !new:torch.nn.Linear\n    in_features: 3\n    nonsense: 1\n")
    with pytest.raises(HparamsError, match=r"hp\.yaml, line 1: key 'model'"):
        load_hparams(path)


def test_missing_file_and_missing_include(tmp_path):
    with pytest.raises(HparamsError, match="not found"):
        load_hparams(tmp_path / "absent.yaml")
    path = write(tmp_path / "hp.yaml", "a: 1\nsub: !include:nowhere.yaml\n")
    with pytest.raises(HparamsError, match=r"line 2: key 'sub': included file not found"):
        load_hparams(path)


def test_reference_into_an_included_file_and_override_of_a_bare_include(tmp_path):
    (tmp_path / "inner.yaml").write_text("dim: 4\nlayer: !new:torch.nn.Linear\n  in_features: !ref <dim>\n"
                                         "  out_features: 2\n")
    (tmp_path / "outer.yaml").write_text("model: !include:inner.yaml\nsize: !ref <model[dim]>\n")
    assert load_hparams(tmp_path / "outer.yaml")["size"] == 4
    hparams = load_hparams(tmp_path / "outer.yaml", {"model.dim": 8})
    assert hparams["size"] == 8 and hparams["model"]["layer"].in_features == 8
    with pytest.raises(HparamsError, match="model.nokey"):
        load_hparams(tmp_path / "outer.yaml", {"model.nokey": 1})


def test_class_whose_module_fails_to_import_names_file_key_line_and_cause(tmp_path, monkeypatch):
    (tmp_path / "broken_layers.py").write_text("import torch\nraise RuntimeError('CUDA extension missing')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write(tmp_path / "hp.yaml", "a: 1\nmodel:\n    enc: !new:broken_layers.Encoder\n        size: 3\n")
    with pytest.raises(HparamsError) as info:
        load_hparams(path)
    message = str(info.value)
    assert message.startswith(f"{path}, line 3: key 'model.enc': cannot import 'broken_layers.Encoder'")
    assert f"RuntimeError: CUDA extension missing (at {tmp_path / 'broken_layers.py'}, line 2)" in message


def test_override_with_a_value_of_the_wrong_type_names_file_key_and_line(tmp_path):
    from speechkit.experiment.run_options import parse_arguments

    path = write(tmp_path / "hp.yaml", "lr: 0.1\nnumber_of_epochs: 4\nflags:\n    augment: true\nname: x\n")
    _, run_opts, overrides = parse_arguments([str(path), "--number_of_epochs", "abc"])
    with pytest.raises(HparamsError, match=r"hp\.yaml, line 2: override 'number_of_epochs' = 'abc' does not "
                                           r"fit the key's int value 4"):
        load_hparams(path, overrides, run_opts=run_opts)
    with pytest.raises(HparamsError, match=r"line 4: override 'flags\.augment' = 'maybe'"):
        load_hparams(path, {"flags.augment": "maybe"})
    # Numbers replace numbers of either kind, strings replace strings.
    hparams = load_hparams(path, {"lr": 1, "number_of_epochs": 2, "flags.augment": False, "name": 3})
    assert (hparams["lr"], hparams["number_of_epochs"], hparams["flags"]["augment"]) == (1, 2, False)


def test_run_option_in_the_yaml_with_a_bad_value_names_file_key_and_line(tmp_path):
    from speechkit.errors import RunOptionsError

    path = write(tmp_path / "hp.yaml", "lr: 0.1\nmax_grad_norm: abc\n")
    with pytest.raises(RunOptionsError, match=r"hp\.yaml, line 2: option 'max_grad_norm' expects float, "
                                              r"got 'abc'"):
        load_hparams(path)
    path = write(tmp_path / "ok.yaml", "grad_accumulation_factor: 1\nprecision: fp32\n")
    with pytest.raises(RunOptionsError, match=r"ok\.yaml, line 2: override: option 'precision' must be "
                                              r"one of"):
        load_hparams(path, {"precision": "fp64"})
    assert load_hparams(path, {"grad_accumulation_factor": "auto"})["grad_accumulation_factor"] == "auto"


def test_value_a_constructor_rejects_names_the_key_that_builds_it(tmp_path):
    path = write(tmp_path / "hp.yaml", "epochs: abc\ncounter: !new:speechkit.checkpoints.EpochCounter\n"
                                       "    limit: !ref <epochs>\n")
    with pytest.raises(HparamsError, match=r"hp\.yaml, line 2: key 'counter': "
                                           r"!new:speechkit\.checkpoints\.EpochCounter raised ValueError: "
                                           r"invalid literal for int\(\) with base 10: 'abc'"):
        load_hparams(path)
    path = write(tmp_path / "two.yaml", "a: !new:torch.nn.Linear [2, 2]\nb: !new:torch.nn.Linear [2, x]\n")
    with pytest.raises(HparamsError) as info:  # the same class twice: both users are named
        load_hparams(path)
    assert "two.yaml: !new:torch.nn.Linear raised TypeError" in str(info.value)
    assert f"(used by key 'a' ({path}, line 1); key 'b' ({path}, line 2))" in str(info.value)


def test_null_from_the_command_line_unsets_a_number_key_the_yaml_documents_as_nullable(tmp_path):
    from speechkit.experiment.run_options import parse_arguments

    path = write(tmp_path / "hp.yaml", """\
        max_duration: 15.0  # seconds
        # Silence around the speech, in seconds;
        # null reads the recordings whole.
        trim_margin: 0.1
        beam: 4  # null: greedy decoding
        lr: 0.5
        """)
    _, run_opts, overrides = parse_arguments([str(path), "--trim_margin", "null", "--beam", "null"])
    hparams = load_hparams(path, overrides, run_opts=run_opts)
    assert hparams["trim_margin"] is None and hparams["beam"] is None and hparams["lr"] == 0.5
    # A key whose comment says nothing of null keeps refusing it, and the message says how to allow it.
    _, run_opts, overrides = parse_arguments([str(path), "--lr", "null"])
    with pytest.raises(HparamsError, match=r"hp\.yaml, line 6: override 'lr' = None does not fit the key's "
                                           r"float value 0\.5; null is taken .* e\.g\. 'lr: 0\.5  # null: "):
        load_hparams(path, overrides, run_opts=run_opts)
    with pytest.raises(HparamsError, match=r"line 1: override 'max_duration' = None"):
        load_hparams(path, {"max_duration": None})
