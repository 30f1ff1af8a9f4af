"""``WhisperASR``: transcribe and translate with a Hugging Face Whisper folder (``openai/whisper-tiny`` ...
``openai/whisper-large-v3-turbo``) from a local path, a Hub repo id or a URL.

Example:
    >>> asr = WhisperASR.from_hparams("openai/whisper-tiny", savedir="whisper-tiny")  # doctest: +SKIP
    >>> asr.transcribe_file("talk.flac", language="en")                              # doctest: +SKIP
    ' Hello everyone, and welcome.'
    >>> asr.transcribe_file("talk.flac", task="translate", beam_size=5)              # doctest: +SKIP

Audio of any rate and channel count is read with speechkit's audio loading, averaged to mono and resampled to
16 kHz; recordings longer than 30 s are transcribed in sequential 30 s windows with timestamps
(:mod:`speechkit.models.whisper.transcribe`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Union

import torch

from speechkit.data import audio
from speechkit.errors import FetchError, FetchNotFoundError
from speechkit.models.whisper.frontend import SAMPLE_RATE
from speechkit.models.whisper.transcribe import DecodingOptions, WhisperTranscriber
from speechkit.pretrained.huggingface.whisper import WhisperFolder, fetch_whisper_files, load_whisper_folder
from speechkit.pretrained.sources.fetching import FetchStrategy
from speechkit.pretrained.sources.limits import SourceLimits
from speechkit.pretrained.sources.model_source import ModelSource


class WhisperASR(torch.nn.Module):
    """A Whisper folder, loaded, with the interfaces' transcription methods.

    Arguments:
        folder: a :class:`~speechkit.pretrained.huggingface.whisper.WhisperFolder`.
        device: where the model runs.
    """

    sample_rate = SAMPLE_RATE
    #: The ``model_type`` of the transformers ``config.json`` this interface loads whole.
    MODEL_TYPE = "whisper"

    def __init__(self, folder: WhisperFolder, device="cpu"):
        super().__init__()
        if folder.tokenizer is None:
            from speechkit.errors import CheckpointError

            raise CheckpointError("the Whisper folder has no tokenizer.json (nor vocab.json + merges.txt)")
        self.folder = folder
        self.model = folder.model.to(device).eval()
        self.device = torch.device(device)
        self.transcriber = WhisperTranscriber(self.model, folder.generation, folder.tokenizer)

    @classmethod
    def from_hparams(cls, source, savedir=None, run_opts=None, revision: Optional[str] = None,
                     allow_network: bool = True, cache_dir=None, force_download: bool = False,
                     limits: Optional[SourceLimits] = None, backend: str = "torch",
                     strategy: Union[FetchStrategy, str] = FetchStrategy.SYMLINK,
                     trust_remote_code: bool = False, allow: Sequence[str] = ()) -> WhisperASR:
        """Fetch and load a Whisper folder: the arguments of :meth:`speechkit.pretrained.Pretrained.
        from_hparams` (a remote folder lands in ``<cache>/models/<source>`` unless ``savedir`` is given;
        ``trust_remote_code`` and ``allow`` are accepted for the same calls and change nothing: a Whisper
        folder has no YAML), resolved into a :class:`ModelSource` and passed to :meth:`from_source`."""
        model = ModelSource.resolve(source, savedir, strategy=strategy, limits=limits, allow=allow,
                                    revision=revision, allow_network=allow_network, cache_dir=cache_dir,
                                    force_download=force_download, trust_remote_code=trust_remote_code)
        return cls.from_source(model, run_opts=run_opts, backend=backend)

    @classmethod
    def from_source(cls, model: ModelSource, run_opts=None, backend: str = "torch") -> WhisperASR:
        """Load the Whisper folder ``model`` names, every file fetched through it (its save folder, revision,
        network and cache settings, limits and ``force_download``). ``backend="onnx"`` runs the graphs
        :func:`speechkit.export.whisper.export_whisper_onnx` wrote into the folder.

        Example:
            >>> model = ModelSource.resolve("openai/whisper-tiny", allow_network=False)  # doctest: +SKIP
            >>> asr = WhisperASR.from_source(model)                                     # doctest: +SKIP
        """
        if backend not in ("torch", "onnx"):  # checked before anything is fetched
            from speechkit.errors import RunOptionsError

            raise RunOptionsError(f"backend {backend!r}: a Whisper folder runs with 'torch' or 'onnx'")
        folder = load_whisper_folder(model)
        device = (run_opts.get("device") if isinstance(run_opts, dict) else getattr(run_opts, "device",
                                                                                    None)) \
            if run_opts is not None else None
        built = cls(folder, device or "cpu")
        if backend == "onnx":
            from speechkit.pretrained.whisper_onnx import FILES, OnnxWhisper

            paths = {graph: model.fetch_file(filename) for graph, filename in FILES.items()}
            runtime = OnnxWhisper(paths, folder.model.config)
            built.transcriber.encode_features = runtime.encode
            built.transcriber.decoder = runtime
        return built

    @staticmethod
    def fetch_files(model: ModelSource) -> dict:
        """Fetch the folder's files through ``model`` (into its save folder), building nothing: name -> path
        (``speechkit fetch`` before running offline); the ONNX graphs too when the folder has them (offline:
        when the cache has them; the torch backend does not need them)."""
        from speechkit.pretrained.sources.fetching import network_allowed
        from speechkit.pretrained.whisper_onnx import FILES

        files = fetch_whisper_files(model)
        for filename in FILES.values():
            try:
                files[filename] = model.fetch_file(filename)
            except FetchNotFoundError:
                pass
            except FetchError:
                if network_allowed(model.allow_network):
                    raise
        return files

    def load_audio(self, path) -> torch.Tensor:
        """(time,) float32 mono waveform at 16 kHz."""
        waveform, rate = audio.read_with_rate(path)
        if waveform.dim() == 2:
            waveform = waveform.mean(dim=1)
        if rate != self.sample_rate:
            waveform = audio.resample(waveform, rate, self.sample_rate)
        return waveform.to(torch.float32)

    @torch.no_grad()
    def transcribe_batch(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None, *,
                         language=None, task: Optional[str] = None, timestamps: bool = False,
                         beam_size: int = 1, **options) -> tuple:
        """Transcribe a padded batch: wavs (batch, time) at 16 kHz, lengths (batch,) int64 samples.

        Returns ``(texts, token_ids)``; ``options``: the other :class:`DecodingOptions` fields.
        """
        transcripts = self.transcribe_segments(wavs, lengths, language=language, task=task,
                                               timestamps=timestamps, beam_size=beam_size, **options)
        return [t.text for t in transcripts], [t.tokens for t in transcripts]

    @torch.no_grad()
    def transcribe_segments(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None,
                            **options) -> list:
        """Like :meth:`transcribe_batch`, returning :class:`~speechkit.models.whisper.transcribe.Transcript`
        objects (text, tokens, language, timestamped segments)."""
        if wavs.dim() == 1:
            wavs = wavs.unsqueeze(0)
        if lengths is None:
            lengths = torch.full((wavs.shape[0],), wavs.shape[1], dtype=torch.int64)
        lengths = torch.as_tensor(lengths)
        if lengths.is_floating_point():
            raise ValueError("lengths must be absolute int64 sample counts, not relative lengths")
        items = [wavs[row, :int(length)] for row, length in enumerate(lengths.tolist())]
        return self.transcriber.transcribe(items, DecodingOptions(**options))

    def transcribe_file(self, path, **options) -> str:
        """The text of one audio file (``options``: language, task, timestamps, beam_size, ...)."""
        waveform = self.load_audio(path)
        return self.transcribe_batch(waveform[None], torch.tensor([waveform.numel()]), **options)[0][0]

    def forward(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> tuple:
        return self.transcribe_batch(wavs, lengths)


__all__: Sequence[str] = ["WhisperASR"]
