"""check_yaml_is_safe: what a YAML from a non-local source may build."""
from __future__ import annotations

import pytest

from speechkit.errors import UnsafeSourceError
from speechkit.pretrained.safety import check_yaml_is_safe, target_rejection

SAFE = """\
sample_rate: 16000
dim: 4
encoder: !new:torch.nn.Linear
  in_features: !ref <dim>
  out_features: 2
act: !name:torch.nn.functional.relu
shape: !tuple (1, 2)
pretrainer: !new:speechkit.pretrained.Pretrainer
  paths:
    encoder: !new:speechkit.pretrained.FetchSource [huggingface, org/x/enc.ckpt]
"""


def test_allowlisted_yaml_passes():
    check_yaml_is_safe(SAFE, "hyperparams.yaml")


@pytest.mark.parametrize("line, rejected", [
    ("x: !new:collections.Counter\n", "!new:collections.Counter"),
    ("x: !apply:os.system [ls]\n", "!apply:os.system"),
    ("x: !name:subprocess.run\n", "!name:subprocess.run"),
    ("x: !module:os\n", "!module:os"),
    ("x: !apply:torch.hub.load [a, b]\n", "!apply:torch.hub.load"),
    ("x: !apply:torch.load [f.pt]\n", "!apply:torch.load"),
    ("x: !name:torch.utils.cpp_extension.load_inline\n", "!name:torch.utils.cpp_extension.load_inline"),
    ("x: !apply:torch.utils.data.dataloader.os.system [ls]\n", "dataloader.os.system"),
    ("x: !name:torch.nn.functional.__builtins__\n", "__builtins__"),
    ("x: !apply:speechkit.pretrained.interfaces.EncoderASR.from_hparams [a]\n", "from_hparams"),
    ("x: !!python/object/apply:os.system [ls]\n", "python/object/apply:os.system"),
    ("x: !include:other.yaml\n", "!include:other.yaml"),
    ("b: !weird thing\n", "!weird"),
    ("x: !apply:torch.from_file [/home/me/.bashrc, true, 10]\n", "torch.from_file"),
    ("x: !name:speechkit.data.manifest.write_json_manifest\n", "write_json_manifest"),
    ("x: !apply:speechkit.data.encoders.LabelEncoder.load [/etc/hosts]\n", "LabelEncoder.load"),
])
def test_refused_tags_are_named_with_file_and_line(line, rejected):
    text = "sample_rate: 16000\n" + line
    with pytest.raises(UnsafeSourceError) as info:
        check_yaml_is_safe(text, "repo/hyperparams.yaml")
    message = str(info.value)
    assert "repo/hyperparams.yaml" in message and rejected in message and "line 2" in message
    assert "trust_remote_code" in message or "not a hyperpyyaml tag" in message


def test_tags_in_keys_and_nested_sequences_are_checked():
    with pytest.raises(UnsafeSourceError, match="line 3"):
        check_yaml_is_safe("a:\n  - 1\n  - [2, !apply:os.getcwd []]\n", "f.yaml")


def test_unparsable_yaml_is_refused_not_built():
    with pytest.raises(UnsafeSourceError, match="f.yaml.*does not parse"):
        check_yaml_is_safe("a: [1, 2\n", "f.yaml")


def test_target_rejection_reasons():
    assert target_rejection("torch.nn.Conv1d") is None
    assert target_rejection("speechkit.pretrained.fetching.FetchSource") is None
    assert "outside the allowlist" in target_rejection("torchvision.models.resnet18")
    assert "cannot be found" in target_rejection("torch.nn.NoSuchLayer")


def test_alias_bombs_are_refused_before_expansion():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    with pytest.raises(UnsafeSourceError, match="expands to .* nodes"):
        check_yaml_is_safe("\n".join(lines) + "\n", "bomb.yaml")
    check_yaml_is_safe("base: &b {lr: 1}\nother: *b\n", "ok.yaml")  # ordinary anchors are fine
