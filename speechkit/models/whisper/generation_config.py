"""Whisper's decoding rules from ``generation_config.json``: the special tokens, the suppressed tokens, the
languages and tasks, and how the reference builds the first tokens of a transcript.

Example:
    >>> rules = WhisperGenerationConfig(decoder_start_token_id=50258, eos_token_id=50257,
    ...                                 no_timestamps_token_id=50363, lang_to_id={"<|en|>": 50259},
    ...                                 task_to_id={"transcribe": 50359, "translate": 50358})
    >>> rules.initial_tokens(language="en", task=None, timestamps=False)
    [50258, 50259, 50359, 50363]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from speechkit.errors import CheckpointError
from speechkit.models.whisper.languages import LANGUAGES, language_code

TASKS = ("transcribe", "translate")


@dataclass
class WhisperGenerationConfig:
    """The fields of ``generation_config.json`` decoding reads (``raw`` keeps the whole file to write it
    back). ``max_length``: most generated tokens after the first ones (the reference adds the prompt's
    length, capped at ``max_target_positions``)."""

    decoder_start_token_id: int = 50258
    eos_token_id: int = 50257
    pad_token_id: int = 50257
    no_timestamps_token_id: Optional[int] = None
    prev_sot_token_id: Optional[int] = None
    suppress_tokens: list = field(default_factory=list)
    begin_suppress_tokens: list = field(default_factory=list)
    lang_to_id: dict = field(default_factory=dict)
    task_to_id: dict = field(default_factory=dict)
    is_multilingual: Optional[bool] = None
    forced_decoder_ids: Optional[list] = None
    max_length: int = 20
    max_initial_timestamp_index: Optional[int] = None
    return_timestamps: bool = False
    max_target_positions: int = 448
    raw: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, values: dict, config=None, where: str = "generation_config.json"):
        """From a ``generation_config.json`` dict already checked for types and bounds; ``config``: the
        model's
        :class:`WhisperConfig` (for its token ids and ``max_target_positions``)."""
        eos = values.get("eos_token_id", getattr(config, "eos_token_id", 50257))
        eos = eos[0] if isinstance(eos, list) else eos
        built = cls(
            decoder_start_token_id=values.get("decoder_start_token_id",
                                              getattr(config, "decoder_start_token_id", 50258)),
            eos_token_id=eos,
            pad_token_id=values.get("pad_token_id", getattr(config, "pad_token_id", eos)),
            no_timestamps_token_id=values.get("no_timestamps_token_id"),
            prev_sot_token_id=values.get("prev_sot_token_id"),
            suppress_tokens=list(values.get("suppress_tokens") or []),
            begin_suppress_tokens=list(values.get("begin_suppress_tokens") or []),
            lang_to_id=dict(values.get("lang_to_id") or {}),
            task_to_id=dict(values.get("task_to_id") or {}),
            is_multilingual=values.get("is_multilingual"),
            forced_decoder_ids=values.get("forced_decoder_ids"),
            max_length=values.get("max_length", 20),
            max_initial_timestamp_index=values.get("max_initial_timestamp_index"),
            return_timestamps=bool(values.get("return_timestamps", False)),
            max_target_positions=getattr(config, "max_target_positions", 448),
            raw=dict(values),
        )
        forced = built.forced_decoder_ids
        if forced is not None and not (isinstance(forced, list) and all(
                isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int)
                and (pair[1] is None or isinstance(pair[1], int)) for pair in forced)):
            raise CheckpointError(f"{where}: key 'forced_decoder_ids' must be a list of [position, "
                                  "token id or null] pairs")
        return built

    def to_dict(self) -> dict:
        return dict(self.raw)

    @property
    def timestamp_begin(self) -> Optional[int]:
        """The id of ``<|0.00|>`` (None without timestamps)."""
        return None if self.no_timestamps_token_id is None else self.no_timestamps_token_id + 1

    def language_token(self, language: str) -> int:
        """The token id of ``language`` (a code, a name or ``<|code|>``); raises ValueError naming the
        languages
        this model has."""
        if language in self.lang_to_id:
            return self.lang_to_id[language]
        code = language_code(language)
        token = f"<|{code}|>" if code is not None else None
        if token not in self.lang_to_id:
            known = ", ".join(sorted(key.strip("<|>") for key in self.lang_to_id)) or "none"
            raise ValueError(f"language {language!r} is not one of this model's languages ({known})")
        return self.lang_to_id[token]

    def language_of(self, token: int) -> str:
        """The code of a language token id."""
        for name, index in self.lang_to_id.items():
            if index == token:
                return name.strip("<|>")
        raise ValueError(f"token {token} is not a language token")

    def check_request(self, language, task: Optional[str], timestamps: bool) -> None:
        if self.is_multilingual is False and (language is not None or task is not None):
            raise ValueError("an English-only model takes no language or task")
        if task is not None and task not in TASKS:
            raise ValueError(f"task must be 'transcribe' or 'translate', got {task!r}")
        if task is not None and task not in self.task_to_id:
            raise ValueError(f"the model's generation_config.json has no task {task!r} (task_to_id)")
        if language is not None and not self.lang_to_id:
            raise ValueError("the model's generation_config.json has no languages (lang_to_id)")
        if timestamps and self.no_timestamps_token_id is None:
            raise ValueError("the model's generation_config.json has no no_timestamps_token_id: "
                             "no timestamps")

    def initial_tokens(self, language: Optional[str], task: Optional[str], timestamps: bool,
                       detected: Optional[int] = None) -> list:
        """The first tokens of a transcript, built as the reference builds them.

        Without language and task, the config's ``forced_decoder_ids`` give them (a null language: detected,
        passed as ``detected``); a language without a task transcribes; ``<|notimestamps|>`` ends the prompt
        unless ``timestamps``.
        """
        tokens = [self.decoder_start_token_id]
        if task is None and language is None and self.forced_decoder_ids:
            forced = sorted(self.forced_decoder_ids)
            position = 1
            while forced and forced[0][0] == position:
                tokens.append(forced[0][1])
                forced, position = forced[1:], position + 1
        if language is not None:
            language_id = self.language_token(language)
        elif self.lang_to_id and self.needs_detection(task, language):
            language_id = detected
        else:
            language_id = None
        if language_id is not None:
            if len(tokens) > 1:
                tokens[1] = language_id
            else:
                tokens.append(language_id)
        if task is not None:
            tokens.append(self.task_to_id[task])
        elif language is not None and self.task_to_id and not any(
                token in self.task_to_id.values() for token in tokens):
            tokens.append(self.task_to_id["transcribe"])
        if self.no_timestamps_token_id is not None:
            if not timestamps and tokens[-1] != self.no_timestamps_token_id:
                tokens.append(self.no_timestamps_token_id)
            elif timestamps and tokens[-1] == self.no_timestamps_token_id:
                tokens = tokens[:-1]
        return [token for token in tokens if token is not None]

    def needs_detection(self, task: Optional[str], language) -> bool:
        """Whether the language is detected: a multilingual model (``lang_to_id``) asked for no language whose
        forced tokens leave the language open."""
        if language is not None or not self.lang_to_id:
            return False
        if task is None and self.forced_decoder_ids:
            forced = dict((position, token) for position, token in self.forced_decoder_ids)
            return forced.get(1) is None
        return True


__all__ = ["LANGUAGES", "TASKS", "WhisperGenerationConfig"]
