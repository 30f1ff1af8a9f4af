"""The exact classes, functions and values a YAML from a non-local source may name (deny by default).

A model folder's ``hyperparams.yaml`` builds modules, a search, a tokenizer loadable and a ``Pretrainer``;
nothing else. Every entry is one dotted name (no package or prefix is ever allowed as a whole, since
``torch`` alone holds functions that run shell commands), with the tags it may be used with:

- classes (``!new:``, ``!name:``): the ``torch.nn`` modules, ``torch.optim`` optimizers and learning-rate
  schedulers, and the speechkit classes made for YAML (models, nn, features, decoding, label encoders,
  schedulers, ``Pretrainer``, ``FetchSource``);
- functions (``!name:``, ``!apply:``, ``!applyref:``): ``torch.nn.functional``'s functions, tensor
  constructors and the pure functions of speechkit's nn, features and decoding;
- values (``!name:``): dtypes;
- loadables (``!name:`` only): classes whose constructor reads a file (``SentencePieceTokenizer``), so that
  only the ``Pretrainer`` builds them, from a file it fetched.

A class is also accepted under the name of the module that defines it (``torch.nn.modules.linear.Linear``).
Users add names with ``from_hparams(..., allow=["mypackage.MyEncoder"])`` (see docs/pretrained.md).

Example:
    >>> allowlist = default_allowlist()
    >>> allowlist.refusal("!new:", "torch.nn.Linear") is None
    True
    >>> allowlist.refusal("!apply:", "torch.utils.collect_env.run")
    "'torch.utils.collect_env.run' is not on the allowlist"
"""
from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Iterable
from typing import Optional

CLASS, FUNCTION, VALUE, LOADABLE = "class", "function", "value", "loadable"
TAGS_OF_KIND = {
    CLASS: ("!new:", "!name:"),
    FUNCTION: ("!name:", "!apply:", "!applyref:"),
    VALUE: ("!name:",),
    LOADABLE: ("!name:",),
}

TENSOR_CONSTRUCTORS = (
    "tensor", "as_tensor", "zeros", "ones", "full", "empty", "arange", "linspace", "logspace", "eye",
    "rand", "randn", "randint", "zeros_like", "ones_like", "full_like", "empty_like", "rand_like",
    "randn_like", "randint_like",
)
DTYPES = (
    "float16", "bfloat16", "float32", "float64", "half", "float", "double", "complex64", "complex128",
    "uint8", "int8", "int16", "int32", "int64", "short", "int", "long", "bool",
)
#: torch.nn.functional's dispatch helpers: they call whatever callable they are given.
FUNCTIONAL_HELPERS = frozenset({"assert_int_or_pair", "boolean_dispatch", "handle_torch_function",
                                "has_torch_function", "has_torch_function_unary",
                                "has_torch_function_variadic"})

#: speechkit's names made for YAML, per kind. Nothing here reads or writes a file (files reach a model only
#: through the Pretrainer, which fetches them and loads them as weights).
SPEECHKIT_CLASSES = {
    "speechkit.models": ("CTCHead", "ConformerEncoder", "ConvTasNet", "ISTFTGenerator", "LSTMLanguageModel",
                         "MelGenerator", "MelSpectrogram", "RecurrentEncoder", "TransformerDecoder",
                         "TransformerEncoder", "TransformerLanguageModel"),
    "speechkit.nn": ("CTCLoss", "ConformerBlock", "Conv2dSubsampling", "ConvolutionModule", "FeedForward",
                     "LabelSmoothedNLLLoss", "MaskedInstanceNorm", "MultiHeadAttention",
                     "MultiResolutionSTFTLoss", "RotaryEmbedding",
                     "SinusoidalPositionalEncoding", "TransformerDecoderLayer", "TransformerEncoderLayer"),
    "speechkit.features": ("FeatureChain", "FrequencyWarp", "MFCC", "Deltas", "Fbank", "GlobalNormalization",
                           "UtteranceNormalization", "SpecAugment", "SpeedPerturb", "STFT"),
    "speechkit.decoding": ("AttentionBeamSearch", "CTCPrefixBeamSearch", "CTCPrefixScorer", "Lexicon",
                           "PrefixLanguageModelScores", "WordList"),
    "speechkit.data.encoders": ("CTCLabelEncoder", "LabelEncoder"),
    "speechkit.data.text_policy": ("TextNormalizer",),
    "speechkit.schedulers": ("NewBobScheduler", "NoamScheduler", "ReduceLROnPlateau",
                             "WarmupCosineScheduler"),
    "speechkit.models.wav2vec2": ("Wav2Vec2Config", "Wav2Vec2Model", "WaveformNormalization"),
    "speechkit.models.speaker": ("ECAPATDNN", "EmbeddingNormalization", "ResNetSpeaker", "XVector"),
    "speechkit.pretrained": ("Pretrainer", "FetchSource"),
    # FetchSource's former defining module: YAMLs written before it moved to sources/ may name it there.
    "speechkit.pretrained.fetching": ("FetchSource",),
}
SPEECHKIT_FUNCTIONS = {
    "speechkit.models": ("stack_frames",),
    "speechkit.nn": ("attention_mask", "ctc_loss", "label_smoothed_nll_loss", "length_mask",
                     "masked_mean_var", "sinusoid_table", "subsampled_lengths"),
    "speechkit.features": ("frequency_warp", "deltas", "fbank", "mel_filterbank", "mfcc", "masked_moments",
                           "utterance_normalize", "freq_mask", "time_mask", "time_warp", "speed_perturb",
                           "num_frames", "stft"),
    "speechkit.decoding": ("ctc_greedy_decode", "ctc_prefix_beam_search"),
}
SPEECHKIT_LOADABLES = {"speechkit.tokenizers": ("SentencePieceTokenizer",)}


class Allowlist:
    """Dotted name -> kind; answers whether a tag may name a target.

    Args:
        entries: ``{dotted_name: kind}`` with kind one of ``class``, ``function``, ``value``, ``loadable``.
    """

    def __init__(self, entries: dict):
        self.entries = dict(entries)

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def refusal(self, tag_prefix: str, target: str) -> Optional[str]:
        """Why ``tag_prefix + target`` may not be built, or None when it may (exact names only)."""
        kind = self.entries.get(target)
        if kind is None:
            return f"'{target}' is not on the allowlist"
        if tag_prefix not in TAGS_OF_KIND[kind]:
            allowed = ", ".join(TAGS_OF_KIND[kind])
            why = " (its constructor reads a file: the pretrainer builds it)" if kind == LOADABLE else ""
            return f"'{target}' is a {kind} on the allowlist, usable only as {allowed}{why}"
        return None

    def extended(self, names: Iterable[str]) -> Allowlist:
        """A copy that also allows ``names`` (exact dotted names, imported here to learn their kind)."""
        entries = dict(self.entries)
        for name in names:
            entries.update(_entries_for(_import_exact(name), name, None))
        return Allowlist(entries)


@functools.lru_cache(maxsize=1)
def default_allowlist() -> Allowlist:
    """The built-in allowlist (computed once: it imports torch and speechkit's model packages)."""
    import torch
    import torch.nn.functional as functional
    from torch.optim import lr_scheduler

    entries: dict = {}
    for name in torch.nn.modules.__all__:
        obj = getattr(torch.nn, name, None)
        if inspect.isclass(obj) and issubclass(obj, torch.nn.Module):
            entries.update(_entries_for(obj, f"torch.nn.{name}", CLASS))
    entries.update(_entries_for(torch.nn.Parameter, "torch.nn.Parameter", CLASS))
    for name in torch.optim.__all__:
        obj = getattr(torch.optim, name, None)
        if inspect.isclass(obj) and issubclass(obj, torch.optim.Optimizer):
            entries.update(_entries_for(obj, f"torch.optim.{name}", CLASS))
    for name in lr_scheduler.__all__:
        obj = getattr(lr_scheduler, name, None)
        schedulers = (lr_scheduler.LRScheduler, lr_scheduler.ReduceLROnPlateau)
        if inspect.isclass(obj) and issubclass(obj, schedulers):
            entries.update(_entries_for(obj, f"torch.optim.lr_scheduler.{name}", CLASS))
    for name in dir(functional):
        obj = getattr(functional, name)
        # Only torch's own routines: a helper imported into the module from elsewhere is not an nn function.
        if (not name.startswith("_") and name not in FUNCTIONAL_HELPERS and inspect.isroutine(obj)
                and getattr(obj, "__module__", None) in ("torch.nn.functional", "torch", "torch._C",
                                                         "torch._C._nn")):
            entries[f"torch.nn.functional.{name}"] = FUNCTION
    entries.update({f"torch.{name}": FUNCTION for name in TENSOR_CONSTRUCTORS})
    entries.update({f"torch.{name}": VALUE for name in DTYPES})
    entries.update(_entries_for(torch.device, "torch.device", CLASS))
    for table, kind in ((SPEECHKIT_CLASSES, CLASS), (SPEECHKIT_FUNCTIONS, FUNCTION),
                        (SPEECHKIT_LOADABLES, LOADABLE)):
        for module_name, names in table.items():
            module = importlib.import_module(module_name)
            for name in names:
                entries.update(_entries_for(getattr(module, name), f"{module_name}.{name}", kind))
    return Allowlist(entries)


def _entries_for(obj, public_name: str, kind: Optional[str]) -> dict:
    """The public name and, for a class or function, the name under its defining module."""
    if kind is None:
        kind = CLASS if inspect.isclass(obj) else FUNCTION if inspect.isroutine(obj) else VALUE
    names = {public_name: kind}
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if (inspect.isclass(obj) or inspect.isroutine(obj)) and module and qualname and "<" not in qualname:
        defined = f"{module}.{qualname}"
        if _import_exact(defined, missing_ok=True) is obj:  # only spellings that really lead to it
            names[defined] = kind
    return names


def _import_exact(dotted: str, missing_ok: bool = False):
    """The object a full dotted name points to (longest importable module, then attributes)."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for part in parts[split:]:
                obj = getattr(obj, part)
        except AttributeError:
            break
        return obj
    if missing_ok:
        return None
    from speechkit.errors import UnsafeSourceError

    raise UnsafeSourceError(f"cannot add '{dotted}' to the allowlist: no such class, function or value")
