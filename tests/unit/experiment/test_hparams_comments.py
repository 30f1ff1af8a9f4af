"""load_hparams builds what plain hyperpyyaml builds, and a comment anywhere YAML allows one changes nothing.

Each case is a YAML template whose ``{c}`` marks are filled either with nothing or with a comment: after
every kind of tag (``!new:``, ``!name:``, ``!apply:``, ``!applyref:``, ``!module:``, ``!ref``, ``!copy``,
``!include:``, ``!tuple`` strings), on tagged mappings and tagged sequences, as map values and as list
items, at the start and end of the file and between entries.
"""

from __future__ import annotations

import collections
import functools
import io
import textwrap
import types

import pytest
import torch
from hyperpyyaml import load_hyperpyyaml

from speechkit.experiment.hparams import load_hparams, resolve_hparams_text


def describe(value):
    """What was built, as plain data that compares by value (objects by class and attributes)."""
    if isinstance(value, collections.Counter):
        return ("Counter", sorted((str(k), describe(v)) for k, v in value.items()))
    if isinstance(value, dict):
        return {str(k): describe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [describe(v) for v in value])
    if isinstance(value, functools.partial):
        return ("partial", describe(value.func), describe(value.args), describe(value.keywords))
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    if callable(value) and hasattr(value, "__qualname__"):
        return ("callable", getattr(value, "__module__", ""), value.__qualname__)
    if isinstance(value, torch.nn.Module):
        return (type(value).__name__, repr(value))
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    return (type(value).__name__, describe(vars(value)))


# Cases in the manner of hyperpyyaml's own examples (its README and tests), plus the recipe idioms.
CASES = {
    "scalars": """\
        {c}
        string: abcd{c}
        integer: 1{c}
        float: 1.3{c}
        bool: True{c}
        none: null{c}
        tuple: (3, 3){c}
        """,
    "new_mapping": """\
        a: 3{c}
        thing: !new:collections.Counter{c}
            b: !ref <a>{c}
            c: 5{c}
        """,
    "new_sequence": """\
        a: hello{c}
        thing: !new:collections.Counter{c}
            - !ref <a>{c}
        """,
    "new_empty_flow": """\
        thing: !new:collections.Counter {{}}{c}
        """,
    "nested_new": """\
        constants:{c}
            a: 1{c}
        thing: !new:collections.Counter{c}
            other: !new:collections.Counter{c}
                a: !ref <constants[a]>{c}
        """,
    "name_and_module": """\
        add: !name:operator.add{c}
        counter: !name:collections.Counter{c}
            a: 2{c}
        mod: !module:collections{c}
        """,
    "apply": """\
        total: !apply:sum{c}
            - [1, 2, 3]{c}
        flow: !apply:sum [[1, 2]]{c}
        upper: !applyref:str.upper{c}
            - abc{c}
        """,
    "ref_copy_arithmetic": """\
        folder1: abc/def{c}
        folder2: ghi/jkl{c}
        folder3: !ref <folder1>/<folder2>{c}
        foo: 1024{c}
        bar: 512{c}
        baz: !ref <foo> // <bar> + 1{c}
        thing: !new:collections.Counter{c}
            a: 4{c}
        same: !ref <thing>{c}
        copied: !copy <thing>{c}
        """,
    "tagged_items_in_lists": """\
        items:{c}
            - !new:collections.Counter{c}
                a: 1{c}
            - !new:collections.Counter{c}
                - abracadabra{c}
            - !name:operator.add{c}
            - !apply:sum{c}
                - [4, 5]{c}
            - !ref <first>{c}
            - plain{c}
        first: !new:collections.Counter{c}
            z: 9{c}
        {c}
        """,
    "list_of_lists_and_maps": """\
        outer: !new:collections.OrderedDict{c}
            - - [a, 1]{c}
              - [b, 2]{c}
        maps:{c}
            - x: 1{c}
              y: !new:collections.Counter{c}
                  q: 1{c}
        """,
    "anchors_and_merge": """\
        thing1: !new:collections.Counter &thing{c}
            a: 3{c}
            b: 5{c}
        thing2: !new:collections.Counter{c}
            <<: *thing{c}
            b: 7{c}
        """,
    "modules_in_a_list": """\
        augment: !new:speechkit.features.FeatureChain{c}
            - !new:speechkit.features.FrequencyWarp{c}
                warp_range: [0.88, 1.12]{c}
            - !new:speechkit.features.SpecAugment{c}
                time_warp_window: 5{c}
        layers: !new:torch.nn.Sequential{c}
            - !new:torch.nn.Linear{c}
                in_features: 3{c}
                out_features: 2{c}
            - !new:torch.nn.ReLU{c}
        """,
}

COMMENTS = ["", "   # a comment", "  # a comment with: colon, [brackets], !new:fake.Tag and <ref>"]


def fill(template: str, comment: str) -> str:
    text = textwrap.dedent(template).format(c=comment)
    # A line that holds only the comment mark keeps its indentation: an own-line comment.
    return "\n".join(line.rstrip() if line.strip() else "" for line in text.splitlines()) + "\n"


@pytest.mark.parametrize("comment", COMMENTS[1:])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_comment_anywhere_builds_the_same_objects(tmp_path, name, comment):
    plain, commented = tmp_path / "plain.yaml", tmp_path / "commented.yaml"
    plain.write_text(fill(CASES[name], ""))
    commented.write_text(fill(CASES[name], comment))
    torch.manual_seed(0)
    expected = describe(load_hparams(plain))
    torch.manual_seed(0)
    assert describe(load_hparams(commented)) == expected


@pytest.mark.parametrize("name", sorted(CASES))
def test_builds_what_plain_hyperpyyaml_builds(tmp_path, name):
    """On the files without comments (with some, plain hyperpyyaml itself loses tags)."""
    path = tmp_path / "hp.yaml"
    path.write_text(fill(CASES[name], ""))
    with open(path) as handle:
        expected = describe(load_hyperpyyaml(handle))
    assert describe(load_hparams(path)) == expected


def test_comments_in_an_included_file_and_after_an_include_tag(tmp_path):
    (tmp_path / "inner.yaml").write_text(
        "# the model\ndim: 4   # width\nlayer: !new:torch.nn.Linear   # a layer\n"
        "    in_features: !ref <dim>   # from dim\n    out_features: 2\n"
        "augment: !new:speechkit.features.FeatureChain   # in order\n"
        "    - !new:speechkit.features.SpecAugment   # masks\n        freq_masks: 1   # one\n"
    )
    (tmp_path / "outer.yaml").write_text(
        "model: !include:inner.yaml   # the model file\n    dim: 3   # narrower\n"
        "chain: !new:speechkit.features.FeatureChain\n"
        "    - !new:speechkit.features.SpecAugment   # masks\n        freq_masks: 1\n"
    )
    hparams = load_hparams(tmp_path / "outer.yaml", "chain: !new:speechkit.features.FeatureChain\n"
                           "    - !new:speechkit.features.SpecAugment   # from the command line\n"
                           "        freq_masks: 3\n")
    assert hparams["model"]["layer"].in_features == 3
    assert hparams["model"]["augment"].steps[0].freq_masks == 1
    assert hparams["chain"].steps[0].freq_masks == 3


def test_the_resolved_text_loads_again_to_the_same_objects(tmp_path):
    """The recorded hyperparams.yaml of an experiment is itself a loadable file with the same meaning."""
    path = tmp_path / "hp.yaml"
    path.write_text(fill(CASES["tagged_items_in_lists"], COMMENTS[1]))
    again = tmp_path / "again.yaml"
    again.write_text(resolve_hparams_text(str(path)))
    assert describe(load_hparams(again)) == describe(load_hparams(path))
    with io.StringIO(again.read_text()) as handle:
        assert describe(load_hyperpyyaml(handle)) == describe(load_hparams(path))
