"""Transcribe with a Whisper model: language detection, the prompt, greedy or beam search, temperature
fallback, and long-form transcription of recordings longer than 30 s, as the reference does them.

- Short form (30 s or less): each item is padded to 30 s, encoded, its language detected when none is
  given, and decoded from its prompt (``<|startoftranscript|>``, language, task, ``<|notimestamps|>``).
- Long form (longer than 30 s): sequential 30 s windows with timestamps. A window's transcript ends at its
  last pair of timestamps and the next window starts there (or after the whole window when the transcript
  ends on a single timestamp); the language is detected once, on the first window.
- Temperature fallback: a window whose transcript compresses too well (zlib ratio of its token bytes above
  ``compression_ratio_threshold``: repetition) or whose average log-probability is below
  ``logprob_threshold`` is decoded again at the next temperature (sampling).

Example:
    >>> transcriber = WhisperTranscriber(model, generation, tokenizer)   # doctest: +SKIP
    >>> transcriber.transcribe([waveform], DecodingOptions(language="en"))[0].text  # doctest: +SKIP
    ' Hello world.'
"""
from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn.functional as F

from speechkit.models.whisper.frontend import CHUNK_SAMPLES, WhisperFrontEnd
from speechkit.models.whisper.generation_config import WhisperGenerationConfig
from speechkit.models.whisper.rules import TokenRules
from speechkit.models.whisper.search import beam_search, greedy_search

TIME_PRECISION = 0.02  # seconds per timestamp step
FRAME_SECONDS = 0.01  # seconds per log-mel frame
INPUT_STRIDE = 2  # log-mel frames per encoder state (and per timestamp step)


@dataclass
class DecodingOptions:
    """How to decode (the interfaces' usual arguments).

    Arguments:
        language: a code (``"en"``), name (``"english"``) or None to detect it; or one per item.
        task: ``"transcribe"``, ``"translate"`` or None (the model's default: transcribe).
        timestamps: predict timestamps (always on for long form).
        beam_size: 1 for greedy search.
        length_penalty: beam hypotheses are scored by log-probability / length ** length_penalty.
        max_new_tokens: most tokens generated per window (default: the model's ``max_length`` rule).
        temperatures: the temperatures tried in turn (fallback); ``(0.0,)``: no fallback.
        compression_ratio_threshold, logprob_threshold: when to fall back (None: never; the reference's
            long-form defaults are 2.4 and -1.0 with temperatures 0.0, 0.2, ..., 1.0).
        seed: the sampling generator's seed at temperatures above 0.
    """

    language: Optional[object] = None
    task: Optional[str] = None
    timestamps: bool = False
    beam_size: int = 1
    length_penalty: float = 1.0
    max_new_tokens: Optional[int] = None
    temperatures: Sequence[float] = (0.0,)
    compression_ratio_threshold: Optional[float] = None
    logprob_threshold: Optional[float] = None
    seed: int = 0


@dataclass
class Segment:
    """A stretch of transcript between two timestamps (seconds from the start of the recording)."""

    start: float
    end: float
    tokens: list
    text: str = ""


@dataclass
class Transcript:
    """One recording's result: ``text``, ``tokens`` (without the prompt and end of text), ``language``
    (code), and ``segments`` when timestamps were predicted."""

    text: str
    tokens: list
    language: Optional[str]
    segments: list = field(default_factory=list)


class WhisperTranscriber:
    """A Whisper model with its decoding rules and tokenizer, turning waveforms into transcripts.

    Arguments:
        model: a :class:`~speechkit.models.whisper.WhisperModel` (its device and dtype are used).
        generation: the folder's :class:`WhisperGenerationConfig`.
        tokenizer: a :class:`~speechkit.models.whisper.tokenizer.WhisperTokenizer` or None (no text).
    """

    def __init__(self, model, generation: WhisperGenerationConfig, tokenizer=None):
        self.model = model
        self.generation = generation
        self.tokenizer = tokenizer
        self.frontend = WhisperFrontEnd(model.config.num_mel_bins)
        # Replaced by exported graphs with backend="onnx" (speechkit.pretrained.whisper_onnx): the searches
        # only call decoder.new_cache and decoder.step.
        self.encode_features = model.encoder
        self.decoder = model.decoder

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------------------------------ public
    @torch.no_grad()
    def transcribe(self, waveforms: Sequence[torch.Tensor], options: DecodingOptions) -> list:
        """One :class:`Transcript` per waveform (1-D float tensors at 16 kHz, any lengths)."""
        languages = self._languages(options.language, len(waveforms))
        self.generation.check_request(languages[0] if languages else None, options.task,
                                      options.timestamps)
        results: list = [None] * len(waveforms)
        short = [i for i, wave in enumerate(waveforms) if wave.numel() <= CHUNK_SAMPLES]
        for i in range(len(waveforms)):
            if i not in short:
                results[i] = self._long_form(waveforms[i], languages[i], options)
        if short:
            lengths = torch.tensor([waveforms[i].numel() for i in short])
            batch = torch.zeros(len(short), int(lengths.max()))
            for row, i in enumerate(short):
                batch[row, :waveforms[i].numel()] = waveforms[i].float().cpu()
            features = self.frontend(batch, lengths).to(self.device, self._dtype())
            for row, transcript in enumerate(self.decode_features(features, [languages[i] for i in short],
                                                                  options)):
                results[short[row]] = transcript
        return results

    @torch.no_grad()
    def detect_language(self, states: torch.Tensor) -> list:
        """The most likely language token of each item of (batch, frames, d_model) encoder states, from the
        decoder's scores after ``<|startoftranscript|>`` restricted to language tokens."""
        start = torch.full((states.shape[0], 1), self.generation.decoder_start_token_id, device=states.device)
        logits = self.decoder.step(start, self.decoder.new_cache(states, capacity=1)).float()
        is_language = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device)
        is_language[list(self.generation.lang_to_id.values())] = True
        return logits.masked_fill(~is_language, float("-inf")).argmax(-1).tolist()

    @torch.no_grad()
    def decode_features(self, features: torch.Tensor, languages: list, options: DecodingOptions) -> list:
        """Short-form transcripts of (batch, mels, 3000) features."""
        states = self.encode_features(features)
        prompts, codes = self._prompts(states, languages, options.task, options.timestamps)
        tokens, _ = self._decode_with_fallback(states, prompts, options, options.timestamps)
        out = []
        for row, seq in enumerate(tokens):
            segments = self._segments_of(seq, 0.0, 3000)[0] if options.timestamps else []
            out.append(Transcript(self._text(seq), seq, codes[row], segments))
        return out

    # ------------------------------------------------------------------------------------------ pieces
    def _dtype(self):
        return next(self.model.parameters()).dtype

    @staticmethod
    def _languages(language, count: int) -> list:
        if isinstance(language, (list, tuple)):
            if len(language) != count:
                raise ValueError(f"{len(language)} languages for {count} recordings")
            return list(language)
        return [language] * count

    def _prompts(self, states: torch.Tensor, languages: list, task, timestamps: bool) -> tuple:
        rules = self.generation
        detected = [None] * states.shape[0]
        if any(rules.needs_detection(task, language) for language in languages):
            detected = self.detect_language(states)
        prompts, codes = [], []
        for row, language in enumerate(languages):
            prompt = rules.initial_tokens(language, task, timestamps, detected[row])
            prompts.append(prompt)
            code = None
            if len(prompt) > 1 and prompt[1] in rules.lang_to_id.values():
                code = rules.language_of(prompt[1])
            codes.append(code)
        if len({len(p) for p in prompts}) > 1:
            raise ValueError("items of one batch have prompts of different lengths")
        return prompts, codes

    def _max_length(self, prompt_length: int, options: DecodingOptions) -> int:
        limit = self.model.config.max_target_positions
        if options.max_new_tokens is not None:
            if options.max_new_tokens + prompt_length > limit:
                raise ValueError(f"max_new_tokens {options.max_new_tokens} + a prompt of {prompt_length} "
                                 f"tokens is more than the model's {limit} positions")
            return prompt_length + options.max_new_tokens
        initial = min(limit // 2 - 1, prompt_length)
        return min(self.generation.max_length + initial, limit)

    def _rules(self, prompt_length: int, timestamps: bool) -> TokenRules:
        g = self.generation
        return TokenRules(self.model.config.vocab_size, g.suppress_tokens, g.begin_suppress_tokens,
                          prompt_length,
                          g.timestamp_begin if timestamps else None, g.no_timestamps_token_id, g.eos_token_id,
                          g.max_initial_timestamp_index, device=self.device)

    def _decode_with_fallback(self, states, prompts: list, options: DecodingOptions,
                              timestamps: bool) -> tuple:
        """Decode every item; items that fail the thresholds are decoded again at the next temperature.
        Returns (tokens per item, temperature used per item)."""
        g = self.generation
        prompt_length = len(prompts[0])
        rules = self._rules(prompt_length, timestamps)
        max_length = self._max_length(prompt_length, options)
        generator = torch.Generator(device=states.device).manual_seed(options.seed)
        results, used = [None] * len(prompts), [None] * len(prompts)
        pending = list(range(len(prompts)))
        temperatures = list(options.temperatures) or [0.0]
        for attempt, temperature in enumerate(temperatures):
            index = torch.tensor(pending, device=states.device)
            rows = [prompts[i] for i in pending]
            if temperature > 0 or options.beam_size <= 1:
                # The log-probabilities only serve the threshold deciding whether a next temperature is tried.
                wanted = options.logprob_threshold is not None and attempt < len(temperatures) - 1
                found = greedy_search(self.decoder, states.index_select(0, index), rows, rules,
                                      g.eos_token_id, g.pad_token_id, max_length, temperature, generator,
                                      log_probs=wanted)
                log_probs = [sum(values) / max(1, len(values)) for values in found.token_log_probs] \
                    if wanted else [0.0] * len(pending)
            else:
                found = beam_search(self.decoder, states.index_select(0, index), rows, rules,
                                    g.eos_token_id, g.pad_token_id, max_length, options.beam_size,
                                    options.length_penalty)
                log_probs = found.scores
            still = []
            for position, item in enumerate(pending):
                tokens = found.tokens[position]
                results[item], used[item] = tokens, temperature
                ended = found.ended[position] if found.ended is not None else True
                checked = tokens + ([g.eos_token_id] if ended else [])
                if self._needs_fallback(checked, log_probs[position], options):
                    still.append(item)
            pending = still
            if not pending or attempt == len(temperatures) - 1:
                break
        return results, used

    def _needs_fallback(self, tokens: list, average_log_prob: float, options: DecodingOptions) -> bool:
        if options.compression_ratio_threshold is not None and \
                compression_ratio(tokens, self.model.config.vocab_size) > options.compression_ratio_threshold:
            return True
        return options.logprob_threshold is not None and average_log_prob < options.logprob_threshold

    def _text(self, tokens: list) -> str:
        return self.tokenizer.decode(tokens) if self.tokenizer is not None else ""

    def _segments_of(self, tokens: list, offset: float, window_frames: int) -> tuple:
        """Split a window's tokens at its timestamp pairs: (segments, frames to advance), as the reference."""
        begin = self.generation.timestamp_begin
        is_time = [token >= begin for token in tokens]
        single_ending = is_time[-2:] == [False, True]
        cuts = [i + 1 for i in range(len(tokens) - 1) if is_time[i] and is_time[i + 1]]
        segments = []
        if cuts:
            if single_ending:
                cuts.append(len(tokens))
            else:
                cuts[-1] += 1
            last = 0
            for n, cut in enumerate(cuts):
                piece = tokens[last:cut]
                end_index = -1 if n < len(cuts) - 1 or single_ending else -2
                segments.append(Segment(offset + (piece[0] - begin) * TIME_PRECISION,
                                        offset + (piece[end_index] - begin) * TIME_PRECISION, piece,
                                        self._text(piece)))
                last = cut
            advance = window_frames if single_ending else (tokens[last - 2] - begin) * INPUT_STRIDE
        else:
            times = [i for i, flag in enumerate(is_time) if flag]
            end_position = int(window_frames * FRAME_SECONDS / TIME_PRECISION)
            if times and tokens[times[-1]] != begin:
                end_position = tokens[times[-1]] - begin
            segments.append(Segment(offset, offset + end_position * TIME_PRECISION, list(tokens),
                                    self._text(tokens)))
            advance = window_frames
        return segments, advance

    def _long_form(self, waveform: torch.Tensor, language, options: DecodingOptions) -> Transcript:
        features = self.frontend.long_form(waveform.float().cpu()).to(self.device, self._dtype())
        total = features.shape[-1]
        window = self.model.config.num_frames
        seek, segments, code, prompt = 0, [], None, None
        while seek < total:
            frames = min(total - seek, window)
            piece = F.pad(features[:, seek:seek + frames], (0, window - frames))[None]
            states = self.encode_features(piece)
            if prompt is None:  # the language is detected once, on the first window
                prompts, codes = self._prompts(states, [language], options.task, True)
                prompt, code = prompts[0], codes[0]
            tokens, _ = self._decode_with_fallback(states, [prompt], options, True)
            found, advance = self._segments_of(tokens[0], seek * FRAME_SECONDS, frames)
            segments.extend(found)
            # A window that does not move on would be decoded again for ever: skip it instead.
            seek += int(advance) if advance > 0 else frames
        all_tokens = [token for segment in segments for token in segment.tokens]
        return Transcript(self._text(all_tokens), all_tokens, code, segments)


def compression_ratio(tokens: list, vocab_size: int) -> float:
    """Bytes of the token ids (little-endian, as few bytes as the vocabulary needs) over their zlib size."""
    width = int(math.log2(vocab_size) / 8) + 1
    data = b"".join(int(token).to_bytes(width, "little") for token in tokens)
    return len(data) / len(zlib.compress(data)) if data else 0.0
