"""Streaming speech recognition: audio chunks in, partial transcripts out, the offline transcript at the end.

A model streams when every step before the CTC head is causal: :class:`~speechkit.features.Fbank`
features (no deltas), :class:`~speechkit.features.GlobalNormalization` (statistics of the training set, not
of the recording), a unidirectional :class:`~speechkit.models.RecurrentEncoder` and the CTC head (the
streaming preset of templates/speech_recognition trains one). Each stream carries its own state: samples
the next feature frames read, feature frames of an incomplete encoder step, recurrent states, and the
token prefix. Its outputs equal the offline model's on the whole recording (within float rounding, 1e-5),
for any chunking, and the final transcript is the offline one: the model folder's ``decoder``, a CTC prefix
beam search (:class:`~speechkit.decoding.CTCPrefixBeamSearch`, with or without an LM), runs along the
stream, each chunk's frames searched as they arrive (its beams and LM states kept between chunks), so
:meth:`Stream.finish` only searches the last frames; another decoder reruns on all the stream's scores at
the end. Partial transcripts are greedy.

Example:
    >>> asr = EncoderASR.from_hparams("results/streaming-model")       # doctest: +SKIP
    >>> stream = asr.stream()                                           # doctest: +SKIP
    >>> for chunk in audio.split(5120):                                 # doctest: +SKIP
    ...     print(stream.accept(chunk))                                 # partial text so far
    >>> stream.finish()                                                 # doctest: +SKIP
    'HELLO WORLD'
    >>> streams = StreamingASR(asr).batch(8)        # 8 streams in one batch        # doctest: +SKIP
    >>> partials = streams.accept([chunk_0, None, chunk_2, ...])                    # doctest: +SKIP
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from speechkit.data.audio_policy import shared_policy
from speechkit.decoding import CTCPrefixBeamSearch
from speechkit.errors import AudioError, SpeechkitError
from speechkit.features import Fbank, GlobalNormalization
from speechkit.models.encoders import CTCHead
from speechkit.streaming.features import StreamingFbank
from speechkit.streaming.recurrent import StreamingRecurrentEncoder


class StreamingASR:
    """Streams of a streamable :class:`~speechkit.pretrained.EncoderASR` (checked here, naming the step that
    reads the future)."""

    def __init__(self, asr):
        self.asr = asr
        # An interface running exported graphs keeps the modules they were made of (speechkit.export).
        pipeline = list(getattr(asr, "torch_pipeline", None) or asr.hparams["encoder_pipeline"])
        mods = asr.mods
        kinds = [type(mods[name]).__name__ if name in mods else name for name in pipeline]
        if (len(pipeline) not in (3, 4) or any(name not in mods for name in pipeline)
                or not isinstance(mods[pipeline[0]], Fbank) or not isinstance(mods[pipeline[-1]], CTCHead)):
            raise SpeechkitError(f"encoder_pipeline {pipeline} ({', '.join(kinds)}) does not stream: "
                                 "expected Fbank, [GlobalNormalization,] RecurrentEncoder, CTC head")
        self.fbank = mods[pipeline[0]]
        self.normalize = mods[pipeline[1]] if len(pipeline) == 4 else None
        if self.normalize is not None and not isinstance(self.normalize, GlobalNormalization):
            raise SpeechkitError(f"module '{pipeline[1]}' ({kinds[1]}) normalizes with statistics of the "
                                 "whole recording; a streaming model needs GlobalNormalization")
        self.encoder, self.head = mods[pipeline[-2]], mods[pipeline[-1]]
        StreamingRecurrentEncoder(self.encoder, 1)  # refuses a bidirectional or other encoder now
        StreamingFbank(self.fbank)  # refuses deltas now
        if asr.trim_silence is not None:
            raise SpeechkitError("the model trims silence at both ends of a recording (trim_silence), which "
                                 "needs the whole recording; a streaming model folder must not set it")
        self.sample_rate = asr.sample_rate
        self.blank = int(asr.hparams.get("decoding", {}).get("blank_index", 0))
        self.step = None
        if getattr(asr, "backend", "torch") != "torch":
            self.step = getattr(asr, "stream_step", None)
            if self.step is None:
                raise SpeechkitError(f"the model was loaded with backend={asr.backend!r} but its folder has "
                                     f"no stream_step.{asr.backend} graph; export it again with speechkit "
                                     "export")

    def stream(self, sample_rate: Optional[int] = None) -> Stream:
        """One new stream, its chunks at ``sample_rate`` Hz (default: the model's rate; another rate is
        resampled chunk by chunk with the audio policy's filter, as the whole recording would be)."""
        return Stream(self.batch(1, sample_rate))

    def batch(self, size: int, sample_rate: Optional[int] = None) -> StreamBatch:
        """``size`` new streams decoded together (one forward per call for all), chunks at ``sample_rate``."""
        return StreamBatch(self, size, sample_rate)


class StreamBatch:
    """Several streams advanced together: ``accept([chunk or None, ...]) -> [partial text, ...]``,
    ``finish() -> [final text, ...]`` (or ``finish([i, j])`` for some of them, the others going on).

    A chunk is a (time,) waveform at ``sample_rate`` (default: the model's rate; a tensor or numpy array),
    or (time, channels) whose channels are averaged; None or an empty chunk leaves that stream as it is.
    Chunks at another rate than the model's are resampled chunk by chunk
    (:meth:`speechkit.data.audio_policy.AudioPolicy.stream_resampler`): the model hears the samples the
    whole recording would give through the audio policy, within float rounding.
    """

    def __init__(self, owner: StreamingASR, size: int, sample_rate: Optional[int] = None):
        if size < 1:
            raise ValueError(f"a batch needs at least one stream, got {size}")
        self.owner, self.size = owner, size
        self.sample_rate = owner.sample_rate if sample_rate is None else sample_rate
        if isinstance(self.sample_rate, bool) or not isinstance(self.sample_rate, (int, np.integer)) \
                or self.sample_rate <= 0:
            raise AudioError(f"a stream's sample_rate must be a positive whole number of Hz, got "
                             f"{sample_rate!r}")
        self.sample_rate = int(self.sample_rate)
        policy = shared_policy(owner.sample_rate)
        self.resamplers = [policy.stream_resampler(self.sample_rate) if self.sample_rate != owner.sample_rate
                           else None for _ in range(size)]
        self.features = [StreamingFbank(owner.fbank) for _ in range(size)]
        # A CTC prefix beam search (with or without an LM) runs along: each chunk's frames are searched when
        # they arrive, so the final decoding only has the last frames left.
        decoder = owner.asr.hparams.get("decoder")
        self.searches = [decoder.stream() for _ in range(size)] if isinstance(decoder, CTCPrefixBeamSearch) \
            else None
        self.encoder = StreamingRecurrentEncoder(owner.encoder, size) if owner.step is None \
            else GraphStepper(owner.step, owner.encoder, size)
        self.log_probs = [[] for _ in range(size)]  # per stream: (frames, vocabulary) pieces
        self.encoded = [[] for _ in range(size)]
        self.tokens = [[] for _ in range(size)]
        self.last = [owner.blank] * size
        self.done = [False] * size
        self.final_tokens: dict = {}  # stream index -> the token ids of its final transcript

    @torch.no_grad()
    def accept(self, chunks: list) -> list:
        """Feed one chunk per stream; returns each stream's partial transcript."""
        self._check_open()
        if len(chunks) != self.size:
            raise ValueError(f"expected {self.size} chunks (None for a stream without audio), got "
                             f"{len(chunks)}")
        for i, chunk in enumerate(chunks):
            if chunk is not None and self.done[i]:
                raise SpeechkitError(f"stream {i} has finished; it takes no more audio (pass None for it)")
        feats = [self.features[i].accept(self._resampled(self._samples(c, i), i)) if c is not None
                 else self._no_frames() for i, c in enumerate(chunks)]
        self._advance(feats)
        return self.partial()

    @torch.no_grad()
    def finish(self, indices: Optional[list] = None) -> list:
        """End the streams ``indices`` (default: every open one): their last frames, then their final
        transcripts (the offline decoding), in the order of ``indices``."""
        self._check_open()
        indices = [i for i in range(self.size) if not self.done[i]] if indices is None else list(indices)
        for i in indices:
            if not 0 <= i < self.size:
                raise ValueError(f"stream index {i} is outside the batch of {self.size}")
            if self.done[i]:
                raise SpeechkitError(f"stream {i} has finished already")
        ending = set(indices)
        self._advance([self._last_frames(i) if i in ending else self._no_frames() for i in range(self.size)])
        for i in indices:
            self.done[i] = True
        if self.searches is not None:
            finals = [self.searches[i].finish() if self.searches[i].frames else [] for i in indices]
            self.final_tokens.update({i: [int(t) for t in seq] for i, seq in zip(indices, finals)})
            return [self._text(self.final_tokens[i]) for i in indices]
        decoder = self.owner.asr.hparams.get("decoder")
        if decoder is None or not indices:
            self.final_tokens.update({i: [int(t) for t in self.tokens[i]] for i in indices})
            return [self._text(self.tokens[i]) for i in indices]
        scores = [self.stream_log_probs(i) for i in indices]
        vocabulary = max(s.shape[-1] for s in scores)
        lengths = torch.tensor([s.shape[0] for s in scores])
        if int(lengths.max()) == 0:  # recordings shorter than one encoder step: nothing was said
            self.final_tokens.update({i: [] for i in indices})
            return ["" for _ in indices]
        padded = torch.zeros(len(scores), int(lengths.max()), vocabulary)
        for row, s in enumerate(scores):
            padded[row, :s.shape[0]] = s
        device = self.owner.asr.device
        hyps = decoder(padded.to(device), lengths.to(device))
        hyps = hyps[0] if isinstance(hyps, tuple) else hyps
        self.final_tokens.update({i: [int(t) for t in seq] for i, seq in zip(indices, hyps)})
        return [self._text([int(t) for t in seq]) for seq in hyps]

    @property
    def finished(self) -> bool:
        """Whether every stream of the batch has finished."""
        return all(self.done)

    def partial(self) -> list:
        """Each stream's greedy transcript so far."""
        return [self._text(tokens) for tokens in self.tokens]

    def stream_log_probs(self, index: int) -> torch.Tensor:
        """(frames, vocabulary) CTC scores of stream ``index`` so far."""
        return torch.cat(self.log_probs[index]) if self.log_probs[index] else torch.zeros(0, 0)

    def stream_encoded(self, index: int) -> torch.Tensor:
        """(frames, d_model) encoder outputs of stream ``index`` so far."""
        return torch.cat(self.encoded[index]) if self.encoded[index] else torch.zeros(0, 0)

    # ------------------------------------------------------------------------------------------ internals
    def _advance(self, feats: list) -> None:
        owner = self.owner
        if owner.step is not None:
            outputs = self.encoder.accept(feats)  # (encoded, scores) of the graph, normalization included
        else:
            if owner.normalize is not None:
                feats = [owner.normalize(f.unsqueeze(0), torch.tensor([f.shape[0]]))[0][0] if f.shape[0]
                         else f for f in feats]
            outputs = [(y, owner.head(y.unsqueeze(0))[0] if y.shape[0] else None)
                       for y in self.encoder.accept(feats)]
        for i, (y, scores) in enumerate(outputs):
            if not y.shape[0]:
                continue
            self.encoded[i].append(y)
            self.log_probs[i].append(scores)
            if self.searches is not None:
                self.searches[i].accept(scores)
            for token in scores.argmax(dim=-1).tolist():
                if token != owner.blank and token != self.last[i]:
                    self.tokens[i].append(token)
                self.last[i] = token

    def _samples(self, chunk, index: int) -> torch.Tensor:
        chunk = torch.as_tensor(np.asarray(chunk) if not isinstance(chunk, torch.Tensor) else chunk)
        if chunk.dim() == 2:  # (time, channels): the mean, as load_audio does for files
            chunk = chunk.mean(dim=1)
        if chunk.dim() != 1:
            raise AudioError(f"stream {index}: a chunk must be (time,) or (time, channels) samples at "
                             f"{self.sample_rate} Hz, got shape {tuple(chunk.shape)}")
        if chunk.is_floating_point() is False:
            raise AudioError(f"stream {index}: chunk samples must be floats in [-1, 1], got {chunk.dtype}")
        if not torch.isfinite(chunk).all():
            raise AudioError(f"stream {index}: the chunk holds NaN or infinite samples")
        return chunk.to(torch.float32)

    def _resampled(self, samples: torch.Tensor, index: int) -> torch.Tensor:
        resampler = self.resamplers[index]
        return samples if resampler is None else resampler.accept(samples)

    def _last_frames(self, index: int) -> torch.Tensor:
        """The frames of stream ``index`` that wait for its end (after its resampler's last samples)."""
        features, resampler = self.features[index], self.resamplers[index]
        tail = features.accept(resampler.finish()) if resampler is not None else self._no_frames()
        return torch.cat([tail, features.finish()])

    def _no_frames(self) -> torch.Tensor:
        return torch.zeros(0, self.owner.fbank.filters.shape[1])

    def _text(self, tokens: list) -> str:
        return self.owner.asr.decode_tokens(tokens)

    def _check_open(self) -> None:
        if self.finished:
            raise SpeechkitError("this stream has finished; start a new one with stream() or batch()")


class Stream:
    """One stream: ``accept(chunk) -> partial text``, ``finish() -> final text``."""

    def __init__(self, batch: StreamBatch):
        self._batch = batch

    def accept(self, chunk, sample_rate: Optional[int] = None) -> str:
        """Feed a (time,) or (time, channels) chunk at the stream's rate (``stream(sample_rate=...)``, by
        default the model's); returns the transcript so far. ``sample_rate``, when given, must be that
        rate."""
        rate = self._batch.sample_rate
        if sample_rate is not None and int(sample_rate) != rate:
            raise AudioError(f"the chunk is at {sample_rate} Hz but the stream was opened for {rate} Hz; "
                             f"open a stream at that rate (stream(sample_rate={int(sample_rate)})): it is "
                             "resampled chunk by chunk")
        return self._batch.accept([chunk])[0]

    def finish(self) -> str:
        """End the stream; returns the final transcript (the offline one)."""
        return self._batch.finish()[0]

    @property
    def final_tokens(self) -> list:
        """The token ids of the final transcript (after :meth:`finish`; the ids ``transcribe_batch`` gives
        for the whole recording)."""
        return self._batch.final_tokens.get(0, [])

    @property
    def log_probs(self) -> torch.Tensor:
        """(frames, vocabulary) CTC scores so far."""
        return self._batch.stream_log_probs(0)

    @property
    def encoded(self) -> torch.Tensor:
        """(frames, d_model) encoder outputs so far."""
        return self._batch.stream_encoded(0)


class GraphStepper:
    """The exported ``stream_step`` graph in place of the PyTorch encoder: each stream's whole encoder steps
    go through the graph from that stream's state; ``accept(list of feature frames)`` -> list of
    ``(encoded, log_probs)``."""

    def __init__(self, step, encoder, size: int):
        self.step, self.stride, self.input_size = step, encoder.stride, encoder.input_size
        self.pending = [torch.zeros(0, encoder.input_size) for _ in range(size)]
        self.states = [None] * size
        self.parts = 2 if isinstance(encoder.layers[0][0], torch.nn.LSTM) else 1
        self.shape = (len(encoder.layers), self.parts, 1, encoder.layers[0][0].hidden_size)
        self.d_model = encoder.d_model

    def accept(self, features: list) -> list:
        out = []
        for i, new in enumerate(features):
            frames = torch.cat([self.pending[i], new.reshape(-1, self.input_size).to(torch.float32)])
            usable = frames.shape[0] // self.stride * self.stride
            self.pending[i] = frames[usable:]
            if not usable:
                out.append((torch.zeros(0, self.d_model), None))
                continue
            state = self.states[i] if self.states[i] is not None else torch.zeros(self.shape)
            log_probs, encoded, self.states[i] = self.step(frames[:usable].unsqueeze(0), state)
            out.append((encoded[0], log_probs[0]))
        return out
