"""check_yaml_is_safe, the allowlist and the guarded loader: what a YAML from a non-local source may build."""
from __future__ import annotations

import importlib
import io

import pytest
from hyperpyyaml import load_hyperpyyaml

from speechkit.errors import UnsafeSourceError
from speechkit.pretrained.safety.allowlist import CLASS, FUNCTION, LOADABLE, default_allowlist
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


NEVER_ALLOWED = (
    "torch", "torch.nn", "speechkit", "speechkit.models", "torch.utils.collect_env.run",
    "torch.utils.benchmark.Timer", "torch.backends.xeon.run_cpu.main", "torch.load", "torch.save",
    "torch.utils.show_pickle.main", "torch.utils.hipify.hipify_python.hipify", "torch.from_file",
    "torch.utils.collect_env.run_and_read_all", "torch.utils.file_baton.FileBaton", "torch.hub.load",
    "speechkit.tokenizers.SentencePieceTokenizer.train", "speechkit.data.trim.trim_manifest_files",
    "speechkit.data.librispeech.prepare_librispeech", "torch.nn.functional.handle_torch_function",
    "torch.nn.Module.load_state_dict", "speechkit.data.encoders.LabelEncoder.load",
)


def test_allowlist_holds_exact_names_of_torch_and_speechkit_only():
    allowlist = default_allowlist()
    for name in allowlist.entries:
        assert name.split(".")[0] in ("torch", "speechkit"), name
        assert not any(part.startswith("_") for part in name.split(".")), name
    kinds = allowlist.entries
    assert kinds["torch.nn.Linear"] == kinds["torch.nn.modules.linear.Linear"] == CLASS
    assert kinds["torch.optim.AdamW"] == kinds["torch.optim.lr_scheduler.OneCycleLR"] == CLASS
    assert kinds["torch.nn.functional.relu"] == kinds["torch.zeros"] == FUNCTION
    assert kinds["speechkit.tokenizers.SentencePieceTokenizer"] == LOADABLE
    # No package or module is an entry, and nothing that runs commands, loads code or touches files.
    for name in NEVER_ALLOWED:
        assert name not in allowlist, name


def test_every_allowlisted_name_resolves_to_what_it_says():
    for name, kind in default_allowlist().entries.items():
        module_name, _, attribute = name.rpartition(".")
        try:
            obj = getattr(importlib.import_module(module_name), attribute)
        except ImportError:  # a class under its defining module's name: torch.optim.lr_scheduler.X
            outer, _, inner = module_name.rpartition(".")
            obj = getattr(getattr(importlib.import_module(outer), inner), attribute)
        assert (isinstance(obj, type)) == (kind in (CLASS, LOADABLE)), name


def test_tags_are_checked_against_the_kind():
    allowlist = default_allowlist()
    assert "usable only as !new:, !name:" in allowlist.refusal("!apply:", "torch.nn.Linear")
    tokenizer = "speechkit.tokenizers.SentencePieceTokenizer"
    assert "usable only as !name:" in allowlist.refusal("!new:", tokenizer)
    assert allowlist.refusal("!name:", "torch.float32") is None
    assert "not on the allowlist" in allowlist.refusal("!new:", "collections.Counter")


def test_allow_extends_with_exact_names():
    text = "c: !new:collections.Counter {a: 1}\n"
    with pytest.raises(UnsafeSourceError, match="collections.Counter"):
        check_yaml_is_safe(text, "f.yaml")
    check_yaml_is_safe(text, "f.yaml", allow=["collections.Counter"])
    with pytest.raises(UnsafeSourceError, match="collections.OrderedDict"):
        check_yaml_is_safe("c: !new:collections.OrderedDict\n", "f.yaml", allow=["collections.Counter"])
    with pytest.raises(UnsafeSourceError, match="no such class"):
        check_yaml_is_safe(text, "f.yaml", allow=["collections.NoSuchThing"])


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


def test_fetch_source_is_built_under_its_former_module_name_too():
    # Model folders written before fetching moved into sources/ name it there; they still load.
    from speechkit.pretrained.sources.fetching import FetchFrom, FetchSource

    text = ("pretrainer: !new:speechkit.pretrained.Pretrainer\n"
            "  loadables: {encoder: !new:torch.nn.Linear [2, 2]}\n"
            "  paths:\n"
            "    encoder: !new:speechkit.pretrained.fetching.FetchSource [huggingface, org/x/enc.ckpt]\n")
    check_yaml_is_safe(text, "hyperparams.yaml")
    hparams = load_hyperpyyaml(io.StringIO(text), loader=UntrustedYamlGuard("remote.yaml").loader)
    source = hparams["pretrainer"].paths["encoder"]
    assert type(source) is FetchSource and source.kind is FetchFrom.HUGGING_FACE


def test_overrides_from_the_caller_are_trusted():
    guard = UntrustedYamlGuard("remote.yaml", overrides="c: !new:collections.Counter {a: 1}\n")
    guard.check("c: !new:collections.Counter {a: 1}\n")
