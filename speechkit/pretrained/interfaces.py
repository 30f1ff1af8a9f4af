"""Ready-to-use models: load a model folder from any source and transcribe audio in three lines.

Example:
    >>> from speechkit.pretrained import EncoderASR
    >>> asr = EncoderASR.from_hparams("org/asr-ctc", savedir="pretrained/asr-ctc")  # doctest: +SKIP
    >>> asr.transcribe_file("utt1.flac")                                              # doctest: +SKIP
    'HELLO WORLD'

A model folder (see docs/pretrained.md) holds ``hyperparams.yaml`` declaring ``sample_rate``, ``modules``
(a dict of ``nn.Module``), ``encoder_pipeline`` (the module names the waveform goes through, in order), a
``tokenizer`` (anything with ``decode_ids(list[int]) -> str``), ``decoding`` settings, an optional ``decoder``
(a search object), an optional ``interface`` (``EncoderASR``, ``EncoderDecoderASR``, ``SeparationModel``,
``SpeakerRecognition``, ``Wav2Vec2Features`` or ``Vocoder``, used by ``Pretrained.from_hparams``), and a
``pretrainer`` naming the weight files; plus those files.
"""
from __future__ import annotations

import inspect
import logging
import pathlib
from collections.abc import Sequence
from typing import Optional, Union

import torch

from speechkit.data.audio_policy import shared_policy
from speechkit.data.trim import trim_batch
from speechkit.decoding.ctc import ctc_greedy_decode
from speechkit.decoding.lexicon import Lexicon
from speechkit.decoding.word_list import WordList
from speechkit.errors import DataError, FetchNotFoundError, HparamsError
from speechkit.experiment.hparams import load_hparams
from speechkit.pretrained.interface_keys import check_interface_keys, describe_value, key_place
from speechkit.pretrained.registry import interface_named, register_interface
from speechkit.pretrained.sources.fetching import FetchStrategy
from speechkit.pretrained.sources.limits import DEFAULT_LIMITS, SourceLimits
from speechkit.pretrained.sources.model_source import ModelSource

logger = logging.getLogger(__name__)


class Pretrained(torch.nn.Module):
    """Base of the inference interfaces: holds the modules, hparams and device; knows the model's audio rate.

    Args:
        modules: name -> ``nn.Module``.
        hparams: the loaded hyperparams (a dict).
        run_opts: a :class:`speechkit.RunOptions` or a dict; only ``device`` is used (default ``cpu``).
    """

    #: hparams keys this interface needs.
    REQUIRED_KEYS: tuple = ("modules", "sample_rate")

    def __init__(self, modules: dict, hparams: dict, run_opts=None, source_description: str = "hyperparams"):
        super().__init__()
        for key in self.REQUIRED_KEYS:
            if key not in hparams:
                raise HparamsError(f"{source_description}: key '{key}' is required by {type(self).__name__}")
        check_interface_keys({**hparams, "modules": modules}, source_description)
        self.hparams = hparams
        self.mods = torch.nn.ModuleDict(modules)
        self.device = torch.device(_option(run_opts, "device") or "cpu")
        self.sample_rate = int(hparams["sample_rate"])
        # How files are read (docs/data.md, "The audio policy"): channels averaged, or the one the model was
        # trained on (the training recipe's audio_policy channels, written as audio_channels).
        self.audio_channels = hparams.get("audio_channels", "mix")
        try:
            self.audio_policy = shared_policy(self.sample_rate, self.audio_channels)
        except (DataError, TypeError):
            raise HparamsError(f"{source_description}: audio_channels must be 'mix' or a channel index >= 0, "
                               f"got {self.audio_channels!r}") from None
        self.trim_silence = hparams.get("trim_silence")
        if self.trim_silence is not None and (not isinstance(self.trim_silence, dict)
                                              or set(self.trim_silence) - {"margin", "threshold_db"}):
            raise HparamsError(f"{source_description}: trim_silence must be a mapping with margin (seconds) "
                               f"and threshold_db, got {self.trim_silence!r}")
        self.mods.to(self.device).eval()
        if isinstance(hparams.get("decoder"), torch.nn.Module):  # a search holding modules (e.g. an LM)
            hparams["decoder"].to(self.device).eval()

    # ------------------------------------------------------------------------------------------ loading
    @classmethod
    def from_hparams(cls, source, savedir=None, hparams_file: str = "hyperparams.yaml", overrides=None,
                     run_opts=None, trust_remote_code: bool = False, revision: Optional[str] = None,
                     strategy: Union[FetchStrategy, str] = FetchStrategy.SYMLINK, allow_network: bool = True,
                     cache_dir=None, allow: Sequence[str] = (), force_download: bool = False,
                     limits: Optional[SourceLimits] = None, backend: str = "torch"):
        """Fetch a model folder's ``hyperparams.yaml`` and files, build the modules and load the weights.

        Args:
            source: local folder, Hub repo id, URL of the folder, or a ``FetchSource``.
            savedir: where the model's files appear (default: the model's own folder for a local source, else
                ``<cache>/models/<source>``).
            hparams_file: name of the YAML in the source.
            overrides: dict of YAML overrides (trusted: they come from the caller).
            run_opts: device choice (``{"device": "cuda:0"}`` or a RunOptions).
            trust_remote_code: let a YAML from a non-local source build any object.
            revision: Hub revision (branch, tag or commit).
            strategy: how fetched files appear in ``savedir`` (symlink, copy, in_place).
            allow_network: False serves remote sources from the cache only.
            cache_dir: the download cache (default: speechkit's cache, see docs/pretrained.md).
            allow: exact dotted names (``"mypackage.MyEncoder"``) a remote YAML may build on top of the
                built-in allowlist (see docs/pretrained.md); ignored with ``trust_remote_code``.
            force_download: fetch every remote file anew instead of revalidating the cached copy.
            limits: size and time limits for a non-local source (default: :class:`SourceLimits`'s).
            backend: ``"torch"`` runs the modules; ``"onnx"`` (onnxruntime) or ``"torchscript"`` runs the
                graphs ``speechkit export --format`` wrote into the folder (docs/deploy.md), with the same
                results.

        Raises:
            UnsafeSourceError: a remote YAML asks for an object outside the allowlist (naming tag and file).
            FetchError, HparamsError, CheckpointError: naming the file, key or source at fault.
        """
        model = ModelSource.resolve(source, savedir, strategy=strategy, limits=limits, allow=allow,
                                    revision=revision, allow_network=allow_network, cache_dir=cache_dir,
                                    force_download=force_download, trust_remote_code=trust_remote_code)
        return cls.from_source(model, hparams_file, overrides=overrides, run_opts=run_opts, backend=backend)

    @classmethod
    def from_source(cls, model: ModelSource, hparams_file: str = "hyperparams.yaml", overrides=None,
                    run_opts=None, backend: str = "torch"):
        """:meth:`from_hparams` with the source and fetch settings resolved: fetch the YAML (vetted when
        ``model`` is not trusted), build it, fetch and load the pretrainer's files, build the interface.

        Example:
            >>> model = ModelSource.resolve("org/asr-ctc", allow_network=False)      # doctest: +SKIP
            >>> asr = EncoderASR.from_source(model)                                   # doctest: +SKIP
        """
        where = model.describe(hparams_file)
        if backend == "torchscript" and not model.trusted:
            from speechkit.errors import UnsafeSourceError

            raise UnsafeSourceError(f"{where}: a TorchScript file holds code; load it from a remote source "
                                    "only with trust_remote_code=True (or use backend='onnx')")
        try:
            yaml_path, text, guard = _fetch_yaml(model, hparams_file, overrides)
        except FetchNotFoundError:  # only "not there": a limit, timeout or server error is no answer
            whole = _transformers_folder_interface(cls, model, hparams_file)
            if whole is None:
                raise
            if overrides:  # they name keys of a YAML this folder does not have: never dropped silently
                raise HparamsError(f"{model.source.path}: overrides {overrides!r} change keys of a "
                                   f"hyperparams.yaml, but this {whole.MODEL_TYPE} folder has none (its "
                                   "settings are its config.json); load it without overrides") from None
            return whole.from_source(model, run_opts=run_opts, backend=backend)
        try:
            hparams = load_hparams(yaml_path, overrides, guard=guard)
        except HparamsError as error:
            raise HparamsError(f"{where}: {error}") from None
        _load_pretrained_files(hparams, model, pathlib.Path(yaml_path).parent, where, text)
        interface = cls._declared_interface(hparams, where)
        if "modules" not in hparams:
            raise HparamsError(f"{where}: key 'modules' is required by {interface.__name__}")
        if text is None:
            text = pathlib.Path(yaml_path).read_text(encoding="utf-8", errors="replace")
        check_interface_keys(hparams, where, text)
        built = interface(hparams["modules"], hparams, run_opts=run_opts, source_description=where)
        if backend != "torch":  # the folder's exported graphs replace the modules (speechkit.export)
            from speechkit.pretrained.backends import attach_backend

            attach_backend(built, backend, model.source.path, model.fetch_file)
        return built

    @classmethod
    def _declared_interface(cls, hparams: dict, where: str) -> type:
        """The class to build: ``cls``, or, called on ``Pretrained`` itself, the YAML's ``interface`` key."""
        if cls is not Pretrained:
            return cls
        return interface_named(hparams.get("interface", "EncoderASR"), where)

    # -------------------------------------------------------------------------------------------- audio
    def load_audio(self, path) -> torch.Tensor:
        """Read any file soundfile reads (WAV, FLAC, MP3, OGG, ...) as the model's training read it: by the
        audio policy (:class:`speechkit.data.audio_policy.AudioPolicy`): channels averaged (or the channel
        the folder's ``audio_channels`` names) and resampled to the model's rate with the loaders' one filter.

        Returns:
            float32 tensor (time,) at ``self.sample_rate``.
        """
        return self.audio_policy.read(path)

    def _prepare(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor]) -> tuple:
        if wavs.dim() == 1:
            wavs = wavs.unsqueeze(0)
        if lengths is None:
            lengths = torch.full((wavs.shape[0],), wavs.shape[1], dtype=torch.int64)
        lengths = torch.as_tensor(lengths)
        if lengths.is_floating_point():
            raise ValueError("lengths must be absolute int64 sample counts, not relative lengths")
        wavs, lengths = wavs.to(self.device, torch.float32), lengths.to(self.device, torch.int64)
        if self.trim_silence is not None:  # the model was trained on trimmed recordings: the same view
            wavs, lengths = trim_batch(wavs, lengths, self.sample_rate, **self.trim_silence)
        return wavs, lengths


def _transformers_folder_interface(cls, model: ModelSource, hparams_file: str):
    """The interface that loads ``model``'s folder whole (a transformers Whisper folder: ``config.json`` and
    no ``hyperparams.yaml``; :mod:`speechkit.pretrained.transformers_folders` decides), if ``cls`` is a
    recognizer or ``Pretrained`` itself; None for any other folder.

    Raises:
        HparamsError: another kind of interface (speaker, separation, ...) asked to load such a folder.
    """
    from speechkit.pretrained.transformers_folders import transformers_folder_interface

    interface = transformers_folder_interface(model, hparams_file)
    if interface is None or cls is Pretrained or issubclass(cls, EncoderASR):
        return interface
    raise HparamsError(f"{model.source.path}: a {interface.MODEL_TYPE} folder (config.json) is a speech "
                       f"recognizer; {cls.__name__} cannot load it ({interface.__name__} or "
                       "EncoderDecoderASR can)")


def _fetch_yaml(model: ModelSource, hparams_file: str, overrides) -> tuple:
    """``(path, text, guard)`` of the folder's YAML: a remote one is read within its limits and vetted
    before anything is imported (docs/pretrained.md); its text and, unless trusted, the guard its loading
    goes through. A local one is read where it is (so ``!include`` paths resolve next to it, not next to a
    link), with text and guard None."""
    yaml_path = model.fetch(hparams_file, max_bytes=model.limits.max_yaml_bytes if model.limits else None)
    if model.local:
        return model.folder / hparams_file, None, None
    from speechkit.pretrained.safety.guard import UntrustedYamlGuard, check_yaml_is_safe, read_untrusted_yaml
    from speechkit.pretrained.sources.names import check_pretrainer_names

    where = model.describe(hparams_file)
    text = read_untrusted_yaml(yaml_path, where, model.limits or DEFAULT_LIMITS)
    check_pretrainer_names(text, where)
    guard = None
    if not model.trust_remote_code:
        guard = UntrustedYamlGuard(where, allow=model.allow, overrides=overrides,
                                   limits=model.limits or DEFAULT_LIMITS)
        check_yaml_is_safe(text, where, allowlist=guard.allowlist)
    return yaml_path, text, guard


def _load_pretrained_files(hparams: dict, model: ModelSource, yaml_folder: pathlib.Path, where: str,
                           text: Optional[str]) -> None:
    """Fetch and load the files the YAML's ``pretrainer`` names (into ``model.savedir``, else next to the
    YAML); classes it built from their files replace the class in ``hparams``."""
    pretrainer = hparams.get("pretrainer")
    if pretrainer is None:
        return
    from speechkit.pretrained.pretrainer import Pretrainer

    if not isinstance(pretrainer, Pretrainer):
        raise HparamsError(f"{key_place(where, text, 'pretrainer')}: key 'pretrainer' must be a "
                           f"speechkit.pretrained.Pretrainer, got {describe_value(pretrainer)}")
    pretrainer.collect_model_files(model, model.savedir if model.savedir is not None else yaml_folder, where)
    classes = {name: obj for name, obj in pretrainer.loadables.items() if isinstance(obj, type)}
    pretrainer.load_collected()
    _put_built_instances(hparams, classes, pretrainer.loadables)


@register_interface
class EncoderASR(Pretrained):
    """A CTC model: waveform -> ``encoder_pipeline`` -> per-frame scores -> greedy (or ``decoder``) search.

    Each module of ``encoder_pipeline`` is called as ``module(x, lengths)`` when its ``forward`` takes two
    arguments, else as ``module(x)``, and returns ``(y, new_lengths)`` or just ``y`` (same lengths). The last
    output is ``(batch, frames, vocabulary)`` scores.
    """

    REQUIRED_KEYS = ("modules", "sample_rate", "encoder_pipeline", "tokenizer")

    def __init__(self, modules: dict, hparams: dict, run_opts=None, source_description: str = "hyperparams"):
        super().__init__(modules, hparams, run_opts, source_description)
        if hparams.get("vocabulary") is not None:
            hparams["decoder"] = closed_vocabulary_search(hparams, source_description)

    @torch.no_grad()
    def encode_batch(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> tuple:
        """Run the encoder pipeline.

        Args:
            wavs: (batch, time) float waveforms at the model's rate, zero-padded.
            lengths: (batch,) int64 valid samples per item.

        Returns:
            ``(outputs, out_lengths)``: (batch, frames, dim) and (batch,) int64.
        """
        x, lengths = self._prepare(wavs, lengths)
        for name in self.hparams["encoder_pipeline"]:
            if name not in self.mods:
                raise HparamsError(f"encoder_pipeline names '{name}', which is not in modules "
                                   f"({', '.join(self.mods)})")
            module = self.mods[name]
            out = module(x, lengths) if _takes_lengths(module) else module(x)
            x, lengths = (out[0], out[1]) if isinstance(out, tuple) else (out, lengths)
        return x, torch.as_tensor(lengths).to(torch.int64)

    @torch.no_grad()
    def transcribe_batch(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> tuple:
        """Transcribe a padded batch.

        Returns:
            ``(texts, token_ids)``: a list of strings and a list of lists of token ids, one per item.
        """
        scores, out_lengths = self.encode_batch(wavs, lengths)
        decoder = self.hparams.get("decoder")
        if decoder is not None:
            tokens = decoder(scores, out_lengths)
            tokens = tokens[0] if isinstance(tokens, tuple) else tokens
        else:
            blank = int(self.hparams.get("decoding", {}).get("blank_index", 0))
            tokens = ctc_greedy_decode(scores, out_lengths, blank)
        tokens = [[int(t) for t in seq] for seq in tokens]
        return [_decode(self.hparams["tokenizer"], seq) for seq in tokens], tokens

    def transcribe_file(self, path) -> str:
        """Transcribe one audio file; returns its text."""
        waveform = self.load_audio(path)
        texts, _ = self.transcribe_batch(waveform.unsqueeze(0), torch.tensor([waveform.shape[0]]))
        return texts[0]

    def forward(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> tuple:
        """``model(wavs, lengths)`` transcribes a padded batch (see :meth:`transcribe_batch`)."""
        return self.transcribe_batch(wavs, lengths)

    def decode_tokens(self, ids: list) -> str:
        """The text of token ids, by the model's tokenizer (ids past its vocabulary dropped)."""
        return _decode(self.hparams["tokenizer"], ids)

    def stream(self, sample_rate: Optional[int] = None):
        """A new :class:`speechkit.streaming.Stream` (``accept(chunk) -> partial text``, ``finish() -> text``)
        of a streamable model (docs/deploy.md), its chunks at ``sample_rate`` Hz (default: the model's;
        another rate is resampled chunk by chunk)."""
        from speechkit.streaming import StreamingASR

        return StreamingASR(self).stream(sample_rate)


@register_interface
class EncoderDecoderASR(EncoderASR):
    """An attention encoder-decoder model: the encoder pipeline, then ``decoder``, a search object called as
    ``decoder(encoded, encoded_lengths)`` returning token-id hypotheses (optionally with scores), e.g.
    :class:`speechkit.decoding.AttentionBeamSearch`. With ``decoding: {ctc_module: NAME}`` the module NAME
    (a CTC head) scores the encoder output too, and the search is called
    ``decoder(encoded, encoded_lengths, ctc_log_probs)`` (joint CTC/attention decoding).
    """

    REQUIRED_KEYS = ("modules", "sample_rate", "encoder_pipeline", "tokenizer", "decoder")

    @torch.no_grad()
    def transcribe_batch(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> tuple:
        encoded, out_lengths = self.encode_batch(wavs, lengths)
        ctc_module = self.hparams.get("decoding", {}).get("ctc_module")
        if ctc_module is not None:
            if ctc_module not in self.mods:
                raise HparamsError(f"decoding.ctc_module names '{ctc_module}', which is not in modules "
                                   f"({', '.join(self.mods)})")
            hyps = self.hparams["decoder"](encoded, out_lengths, self.mods[ctc_module](encoded))
        else:
            hyps = self.hparams["decoder"](encoded, out_lengths)
        hyps = hyps[0] if isinstance(hyps, tuple) else hyps
        tokens = [[int(t) for t in seq] for seq in hyps]
        return [_decode(self.hparams["tokenizer"], seq) for seq in tokens], tokens


# ------------------------------------------------------------------------------------------------ helpers
def _option(run_opts, name):
    if run_opts is None:
        return None
    if isinstance(run_opts, dict):
        return run_opts.get(name)
    return getattr(run_opts, name, None)


def _decode(tokenizer, ids: list) -> str:
    """Text of ids: SentencePiece-style ``decode_ids``, label encoders' ``decode_text``, or ``decode``.

    An output layer may be larger than the tokenizer (a vocabulary size given as an upper bound): ids past
    the tokenizer's end were never training targets and are dropped.
    """
    size = getattr(tokenizer, "vocab_size", None)
    if isinstance(size, int):
        ids = [i for i in ids if i < size]
    for method in ("decode_ids", "decode_text", "decode"):
        if hasattr(tokenizer, method):
            text = getattr(tokenizer, method)(ids)
            if isinstance(text, str):
                return text
    raise HparamsError(f"tokenizer {type(tokenizer).__name__} has no decode_ids(ids) or decode_text(ids) "
                       "method returning a string")


def _takes_lengths(module) -> bool:
    """Whether ``module.forward`` accepts a second positional argument (the lengths)."""
    try:
        parameters = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


def _put_built_instances(hparams: dict, classes: dict, loadables: dict) -> None:
    """Where hparams held a class that the Pretrainer built from its file, put the built instance."""
    for name, cls in classes.items():
        for key, value in list(hparams.items()):
            if value is cls:
                hparams[key] = loadables[name]


def closed_vocabulary_search(hparams: dict, where: str):
    """The model's CTC prefix beam search (``decoder``) restricted to the words of its ``vocabulary`` (a
    :class:`speechkit.decoding.WordList` the pretrainer read from the folder's word list), as the tokenizer
    spells them: the closed vocabulary of the training transcripts (``closed_vocabulary`` in training)."""
    vocabulary, decoder = hparams["vocabulary"], hparams.get("decoder")
    if not isinstance(vocabulary, WordList):
        raise HparamsError(f"{where}: key 'vocabulary' must be a speechkit.decoding.WordList read from the "
                           f"folder's word list (a pretrainer loadable, like the tokenizer), got "
                           f"{describe_value(vocabulary)}")
    if not callable(getattr(decoder, "with_lexicon", None)):
        raise HparamsError(f"{where}: a vocabulary restricts a CTC prefix beam search (decoder: "
                           f"speechkit.decoding.CTCPrefixBeamSearch), got decoder {describe_value(decoder)}")
    return decoder.with_lexicon(Lexicon.from_tokenizer(hparams["tokenizer"], vocabulary.words))
