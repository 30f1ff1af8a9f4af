"""The models a server holds: each loaded once at start-up through ``Pretrained.from_hparams`` (so a Hub or
URL folder is vetted by the same allowlist as in Python), named, and given the batch function its requests
run through.

A served model is one of four kinds, chosen by its interface: ``asr`` (``EncoderASR``,
``EncoderDecoderASR``, ``WhisperASR`` for a transformers Whisper folder), ``separation``
(``SeparationModel``), ``vocoder`` (``Vocoder``) or ``speaker`` (``SpeakerRecognition``).

Example:
    >>> specs = [parse_model_spec("asr=org/asr-ctc"), parse_model_spec("results/separator-model")]
    >>> [s.name for s in specs]
    ['asr', 'separator-model']
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Callable

import torch

from speechkit.errors import HparamsError
from speechkit.serve.errors import RequestError

#: interface class name -> kind of model (which endpoint serves it)
KINDS = {"EncoderASR": "asr", "EncoderDecoderASR": "asr", "WhisperASR": "asr",
         "SeparationModel": "separation", "Vocoder": "vocoder", "SpeakerRecognition": "speaker"}
#: kind -> the endpoint that serves it
ENDPOINTS = {"asr": ["transcribe", "stream"], "separation": ["separate"], "vocoder": ["generate"],
             "speaker": ["embed", "verify"]}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One ``MODEL`` argument: the name it is served under and its source (local path, Hub id or URL, or a
    ``FetchSource`` when ``--kind`` says which)."""

    name: str
    source: str


def parse_model_spec(text: str) -> ModelSpec:
    """``NAME=SOURCE`` or ``SOURCE`` (served under the last part of its path or id)."""
    name, sep, source = text.partition("=")
    if not sep or "://" in name or "/" in name:  # a URL holds '=' in its query: no NAME= part
        name, source = os.path.basename(text.rstrip("/").split("?")[0]) or "model", text
    if not _NAME.match(name):
        raise HparamsError(f"model name {name!r} (from {text!r}) must be 1-64 letters, digits, '_', '.' or "
                           "'-'; choose one with NAME=SOURCE")
    return ModelSpec(name, source)


class ServedModel:
    """A loaded interface with what its endpoints need.

    Args:
        name: the name in URLs (``/v1/models/{name}/...``).
        interface: a loaded ``Pretrained`` of a supported kind.
    """

    def __init__(self, name: str, interface):
        self.name, self.interface = name, interface
        type_name = type(interface).__name__
        if type_name not in KINDS:
            raise HparamsError(f"model {name}: interface {type_name} cannot be served (supported: "
                               f"{', '.join(KINDS)})")
        self.kind = KINDS[type_name]
        self.sample_rate = int(interface.sample_rate)

    def describe(self) -> dict:
        """What ``GET /v1/models`` says of this model."""
        info: dict[str, Any] = {"name": self.name, "kind": self.kind,
                                "interface": type(self.interface).__name__, "sample_rate": self.sample_rate,
                                "endpoints": [f"/v1/models/{self.name}/{e}" for e in ENDPOINTS[self.kind]]}
        if self.kind == "separation":
            info["num_speakers"] = self.interface.num_speakers
        if self.kind == "vocoder":
            info.update(n_mels=self.interface.n_mels, hop_length=self.interface.hop_length)
        if self.kind == "speaker":
            info["threshold"] = self.interface.threshold
        return info

    def require(self, kind: str) -> None:
        """Refuse a request for an endpoint of another kind (400, naming the endpoints this model has)."""
        if self.kind != kind:
            raise RequestError(400, f"model {self.name!r} is of kind {self.kind!r}; it serves "
                                    f"{', '.join(ENDPOINTS[self.kind])}, not this endpoint")

    def seconds(self, item: torch.Tensor) -> float:
        """Audio seconds of one request's input (a waveform, or a vocoder's (frames, n_mels) mel)."""
        if self.kind == "vocoder":
            return item.shape[0] * self.interface.hop_length / self.sample_rate
        return item.shape[0] / self.sample_rate

    def batch_function(self) -> Callable[[list], list]:
        """The function the batcher calls: a list of inputs -> a list of outputs, one per input, each
        computed from a zero-padded batch with absolute lengths (batch-invariant, docs/design.md,
        contract 2)."""
        return {"asr": self._transcribe, "separation": self._separate, "vocoder": self._generate,
                "speaker": self._embed}[self.kind]

    def _transcribe(self, wavs: list) -> list:
        batch, lengths = _pad(wavs)
        texts, tokens = self.interface.transcribe_batch(batch, lengths)
        return [{"text": text, "tokens": ids} for text, ids in zip(texts, tokens)]

    def _separate(self, wavs: list) -> list:
        batch, lengths = _pad(wavs)
        estimates = self.interface.separate_batch(batch, lengths).cpu()
        return [estimates[i, :, :n] for i, n in enumerate(lengths.tolist())]

    def _generate(self, mels: list) -> list:
        batch, frames = _pad(mels)
        wavs, samples = self.interface.generate(batch, frames)
        wavs = wavs.cpu()
        return [wavs[i, :n] for i, n in enumerate(samples.tolist())]


    def _embed(self, wavs: list) -> list:
        batch, lengths = _pad(wavs)
        embeddings = self.interface.embed_batch(batch, lengths).float().cpu()
        return list(embeddings)


def load_models(specs: list, device: str = "cpu", **from_hparams_options) -> dict:
    """Load every model folder once; name -> :class:`ServedModel`. Names must be unique.

    ``from_hparams_options`` go to ``Pretrained.from_hparams`` (``savedir`` is per model, so not here;
    ``trust_remote_code``, ``allow``, ``allow_network``, ``revision``, ``cache_dir``, ``backend``).
    """
    from speechkit.pretrained.interfaces import Pretrained

    models = {}
    for spec in specs:
        if spec.name in models:
            raise HparamsError(f"two models are named {spec.name!r}; name them with NAME=SOURCE")
        # A transformers Whisper folder (config.json, no hyperparams.yaml) comes back as a WhisperASR.
        interface = Pretrained.from_hparams(spec.source, run_opts={"device": device}, **from_hparams_options)
        models[spec.name] = ServedModel(spec.name, interface)
    return models


def _pad(items: list) -> tuple:
    """(batch, max_time, ...) zero-padded and (batch,) int64 lengths of tensors (time, ...)."""
    lengths = torch.tensor([item.shape[0] for item in items], dtype=torch.int64)
    return torch.nn.utils.rnn.pad_sequence(items, batch_first=True), lengths
