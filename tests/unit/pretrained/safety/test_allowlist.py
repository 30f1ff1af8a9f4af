"""The allowlist: the exact names a YAML from a non-local source may build, and the tags each may take."""
from __future__ import annotations

import importlib
import io

import pytest
from hyperpyyaml import load_hyperpyyaml

from speechkit.errors import UnsafeSourceError
from speechkit.pretrained.safety.allowlist import CLASS, FUNCTION, LOADABLE, default_allowlist
from speechkit.pretrained.safety.guard import UntrustedYamlGuard, check_yaml_is_safe

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
