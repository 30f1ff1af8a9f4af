"""The docstring examples of the ``speechkit`` package, run as tests.

Every module of ``speechkit/`` is collected for its ``>>>`` examples (``testpaths`` in pyproject.toml names
the package), so ``make test`` fails when an example stops showing true output. Each example runs in a fresh
temporary folder holding a small data set, so the paths the docs use (``data/train.json``, ``data/utt1.wav``)
exist without pointing anywhere real (with ``{"data_root": "data"}`` as the replacements):

- ``data/utt1.wav`` ... ``data/utt3.wav``: 16 kHz mono, 0.3 s of silence, a 440 Hz tone, 0.2 s of silence;
- ``data/train.json`` (utt1, utt2) and ``data/test.json`` (utt3): manifests of them (``wav`` as
  ``$data_root/uttN.wav``, ``duration``, ``text``, ``speaker``);
- ``hparams/train.yaml``: ``lr: 0.01``, ``dim: 4`` and ``model: !new:torch.nn.Linear`` of ``dim`` inputs.

Every example sees ``torch`` and starts from ``torch.manual_seed(0)`` on one thread; one that uses a
``tokenizer`` without making one gets a character SentencePiece model of the train transcripts
(``tokenizer/char.model``).

A module that needs an optional dependency which is not installed is skipped, not failed; an import error
inside ``speechkit`` itself still fails. A module kept under a former name is not collected: its examples run
at its new home.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from _pytest.doctest import DoctestItem, DoctestModule

PACKAGE = Path(__file__).resolve().parent / "speechkit"

SAMPLE_RATE = 16000
# (id, seconds of tone, transcript, speaker)
SPLITS = {"train": [("utt1", 1.0, "HELLO WORLD", "alice"), ("utt2", 0.5, "GOOD MORNING", "bob")],
          "test": [("utt3", 0.8, "HELLO AGAIN", "alice")]}

HPARAMS = """\
lr: 0.01
dim: 4
model: !new:torch.nn.Linear
    in_features: !ref <dim>
    out_features: 2
"""


class PackageDoctests(DoctestModule):
    """The examples of one module of the package; skipped when an optional dependency is missing."""

    def _getobj(self):
        try:
            return super()._getobj()
        except self.CollectError as error:
            missing = error.__cause__
            if isinstance(missing, ModuleNotFoundError) and missing.name \
                    and missing.name.partition(".")[0] != PACKAGE.name:
                module = self.path.relative_to(PACKAGE.parent)
                reason = f"{module}: needs the optional dependency {missing.name!r}"
                pytest.skip(reason, allow_module_level=True)
            raise


#: What a module kept under a former name does: it puts the new module in its place.
FORMER_NAME = re.compile(r"^sys\.modules\[__name__\]\s*=", re.MULTILINE)


def pytest_collect_file(file_path: Path, parent):
    if parent.config.option.doctestmodules:  # pytest's own doctest plugin collects them already
        return None
    if file_path.suffix != ".py" or PACKAGE not in file_path.parents or file_path.name == "__main__.py":
        return None
    # A module kept under a former name is its new module, whose examples run from the new file. It is not
    # imported here at all: the collector would bind the package's attribute (``speechkit.schedulers``) to
    # the short-lived stand-in rather than to the module it hands over, and YAMLs naming
    # ``speechkit.schedulers.NoamScheduler`` would then find no such name.
    if FORMER_NAME.search(file_path.read_text(encoding="utf-8")):
        return None
    return PackageDoctests.from_parent(parent, path=file_path)


def write_example_data(folder: Path) -> None:
    """The small data set every example finds in its working folder (see the module docstring)."""
    import torch

    from speechkit.data.audio import write

    (folder / "data").mkdir()
    for split, utterances in SPLITS.items():
        rows = {}
        for utterance_id, tone_s, text, speaker in utterances:
            time = torch.arange(int(tone_s * SAMPLE_RATE)) / SAMPLE_RATE
            tone = 0.5 * torch.sin(2 * math.pi * 440 * time)
            wave = torch.cat([torch.zeros(int(0.3 * SAMPLE_RATE)), tone, torch.zeros(int(0.2 * SAMPLE_RATE))])
            write(folder / "data" / f"{utterance_id}.wav", wave, SAMPLE_RATE)
            rows[utterance_id] = {"wav": f"$data_root/{utterance_id}.wav",
                                  "duration": len(wave) / SAMPLE_RATE, "text": text, "speaker": speaker}
        (folder / "data" / f"{split}.json").write_text(json.dumps(rows, indent=1))
    (folder / "hparams").mkdir()
    (folder / "hparams" / "train.yaml").write_text(HPARAMS)


def train_example_tokenizer(folder: Path):
    """A character SentencePiece model of ``data/train.json``'s transcripts (``tokenizer/char.model``)."""
    from speechkit.tokenizers import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer.train(folder / "data" / "train.json", folder / "tokenizer" / "build",
                                             vocab_size=13, model_type="char")
    tokenizer.save(folder / "tokenizer" / "char.model")
    return tokenizer


def _uses_name(item: DoctestItem, name: str) -> bool:
    word = re.compile(rf"\b{name}\b")
    return any(word.search(example.source) for example in item.dtest.examples)


@pytest.fixture(autouse=True)
def _doctest_workspace(request, tmp_path, monkeypatch, doctest_namespace):
    """A fresh working folder with the example data, a seeded generator and ``torch`` for every example."""
    if not isinstance(request.node, DoctestItem):
        yield
        return
    import torch

    write_example_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    doctest_namespace["torch"] = torch
    doctest_namespace.pop("tokenizer", None)
    if _uses_name(request.node, "tokenizer"):
        doctest_namespace["tokenizer"] = train_example_tokenizer(tmp_path)
    yield
    torch.set_num_threads(threads)
