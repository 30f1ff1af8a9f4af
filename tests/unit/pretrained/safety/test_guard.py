"""check_yaml_is_safe and the guarded loader: what a YAML from a non-local source may build."""
from __future__ import annotations

import io

import pytest
from hyperpyyaml import load_hyperpyyaml

from speechkit.errors import UnsafeSourceError
from speechkit.pretrained.safety.guard import UntrustedYamlGuard, check_yaml_is_safe

SAFE = """\
sample_rate: 16000
dim: 4
encoder: !new:torch.nn.Linear
  in_features: !ref <dim>
  out_features: 2
long_name: !new:torch.nn.modules.linear.Linear [2, 2]
act: !name:torch.nn.functional.relu
zeros: !apply:torch.zeros [3]
dtype: !name:torch.float32
opt: !name:torch.optim.AdamW {lr: 0.001}
sched: !name:torch.optim.lr_scheduler.StepLR {step_size: 2}
shape: !tuple (1, 2)
plain_tuple: (3, 4)
half: !ref <dim> / 2
path: !ref <sample_rate>/x
base: &b {lr: 1}
other: *b
tokenizer: !name:speechkit.tokenizers.SentencePieceTokenizer
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables: {encoder: !ref <encoder>}
  paths:
    encoder: !new:speechkit.pretrained.FetchSource [huggingface, org/x/enc.ckpt]
"""


def test_allowlisted_yaml_passes():
    check_yaml_is_safe(SAFE, "hyperparams.yaml")


def test_refusal_names_tag_target_file_and_line():
    with pytest.raises(UnsafeSourceError) as info:
        check_yaml_is_safe("a: 1\nb:\n  - [2, !apply:torch.utils.collect_env.run [ls]]\n",
                           "repo/hyperparams.yaml")
    message = str(info.value)
    assert message.startswith("repo/hyperparams.yaml, line 3: tag '!apply:torch.utils.collect_env.run' "
                              "(target 'torch.utils.collect_env.run') is refused")
    assert "trust_remote_code" in message


def test_the_first_refused_node_in_the_file_is_reported():
    text = "a: !apply:os.getcwd []\nb: !apply:os.system [ls]\n"
    with pytest.raises(UnsafeSourceError, match="line 1: tag '!apply:os.getcwd'"):
        check_yaml_is_safe(text, "f.yaml")


def test_unparsable_and_multi_document_yaml_is_refused_not_built():
    with pytest.raises(UnsafeSourceError, match="f.yaml.*does not parse"):
        check_yaml_is_safe("a: [1, 2\n", "f.yaml")
    with pytest.raises(UnsafeSourceError, match="f.yaml.*does not parse"):
        check_yaml_is_safe("a: 1\n---\nb: !apply:os.system [ls]\n", "f.yaml")


def test_alias_bombs_are_refused_before_expansion():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    with pytest.raises(UnsafeSourceError, match="expands to .* nodes"):
        check_yaml_is_safe("\n".join(lines) + "\n", "bomb.yaml")


@pytest.mark.parametrize("text", [
    "x: !apply:os.system [touch {marker}]\n",
    "x: !module:os\n",
    "x: !!python/object/apply:os.system [touch {marker}]\n",
    "x: (!!python/object/apply:os.system [touch {marker}],)\n",
])
def test_guarded_loader_refuses_even_text_that_skipped_the_check(text, tmp_path):
    """The construction pass is guarded on its own: a parser difference cannot turn into a call."""
    marker = tmp_path / "PWNED"
    guard = UntrustedYamlGuard("remote.yaml")
    with pytest.raises(Exception) as info:  # UnsafeSourceError, or the safe loader's own ConstructorError
        load_hyperpyyaml(io.StringIO(text.format(marker=marker)), loader=guard.loader)
    assert not marker.exists()
    assert isinstance(info.value, UnsafeSourceError) or "python/object/apply" in str(info.value)


def test_guarded_loader_builds_allowlisted_yaml():
    guard = UntrustedYamlGuard("remote.yaml")
    hparams = load_hyperpyyaml(io.StringIO(SAFE), loader=guard.loader)
    assert hparams["shape"] == (1, 2) and hparams["plain_tuple"] == (3, 4) and hparams["half"] == 2
    assert type(hparams["encoder"]).__name__ == "Linear" and hparams["other"] == {"lr": 1}


def test_overrides_from_the_caller_are_trusted():
    guard = UntrustedYamlGuard("remote.yaml", overrides="c: !new:collections.Counter {a: 1}\n")
    guard.check("c: !new:collections.Counter {a: 1}\n")
