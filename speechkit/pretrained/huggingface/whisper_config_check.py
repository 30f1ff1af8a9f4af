"""Check a Whisper folder's ``config.json`` and ``generation_config.json`` before anything is built.

Like :mod:`speechkit.pretrained.huggingface.config` for wav2vec 2.0: every field speechkit reads must have
its type and lie within bounds no published model passes, and the whole model within a parameter budget;
the :class:`~speechkit.errors.CheckpointError` names the file and the key.

Example:
    >>> check_whisper_config({"d_model": 384, "encoder_layers": 4}, "config.json")
    >>> check_whisper_config({"num_mel_bins": 81.5}, "config.json")
    Traceback (most recent call last):
    ...
    speechkit.errors.CheckpointError: config.json: key 'num_mel_bins' must be an integer in [1, 512], got ...
"""
from __future__ import annotations

from speechkit.errors import CheckpointError
from speechkit.pretrained.huggingface.config import BOOL, FLOAT, INT, _check_value, _json_kind, _shown

#: Most parameters a Whisper config may describe (large-v3 has about 1.55 billion).
MAX_PARAMETERS = 4_000_000_000

FIELDS = {
    "vocab_size": (INT, 1, 1_000_000), "num_mel_bins": (INT, 1, 512), "d_model": (INT, 1, 8192),
    "encoder_layers": (INT, 0, 256), "decoder_layers": (INT, 1, 256), "encoder_attention_heads": (INT, 1,
                                                                                                  512),
    "decoder_attention_heads": (INT, 1, 512), "encoder_ffn_dim": (INT, 1, 65536),
    "decoder_ffn_dim": (INT, 1, 65536), "max_source_positions": (INT, 1, 100_000),
    "max_target_positions": (INT, 2, 100_000), "dropout": (FLOAT, 0.0, 1.0),
    "attention_dropout": (FLOAT, 0.0, 1.0), "activation_dropout": (FLOAT, 0.0, 1.0),
    "pad_token_id": (INT, 0, 1_000_000), "bos_token_id": (INT, 0, 1_000_000),
    "eos_token_id": (INT, 0, 1_000_000), "decoder_start_token_id": (INT, 0, 1_000_000),
    "tie_word_embeddings": (BOOL, None, None), "scale_embedding": (BOOL, None, None),
}
TOKEN_KEYS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")

GENERATION_INT_FIELDS = {
    "decoder_start_token_id": (0, 1_000_000), "no_timestamps_token_id": (0, 1_000_000),
    "prev_sot_token_id": (0, 1_000_000), "max_length": (1, 100_000), "max_initial_timestamp_index": (0,
                                                                                                     100_000),
    "pad_token_id": (0, 1_000_000),
}
GENERATION_LIST_FIELDS = ("suppress_tokens", "begin_suppress_tokens")
GENERATION_MAPS = ("lang_to_id", "task_to_id")


def check_whisper_config(config: dict, where: str) -> None:
    """Raise :class:`CheckpointError` naming ``where`` and the key of the first field of a wrong type or out
    of bounds, a token id past the vocabulary, or a model of more than :data:`MAX_PARAMETERS`."""
    if not isinstance(config, dict):
        raise CheckpointError(f"{where}: must hold a JSON object, got a JSON {_json_kind(config)}")
    if config.get("model_type", "whisper") != "whisper":
        raise CheckpointError(f"{where}: key 'model_type' is {_shown(config.get('model_type'))}, "
                              "not \"whisper\"")
    for key, (kind, low, high) in FIELDS.items():
        if config.get(key) is not None:
            _check_value(config[key], kind, low, high, where, key)
    vocab = config.get("vocab_size", 51865)
    for key in TOKEN_KEYS:
        if config.get(key) is not None and config[key] >= vocab:
            raise CheckpointError(f"{where}: key '{key}' is {config[key]}, outside the vocabulary of "
                                  f"{vocab} (vocab_size)")
    d_model = config.get("d_model", 384)
    for key in ("encoder_attention_heads", "decoder_attention_heads"):
        if d_model % config.get(key, 6):
            raise CheckpointError(f"{where}: key '{key}' ({config.get(key, 6)}) does not divide d_model "
                                  f"({d_model})")
    if d_model % 2:
        raise CheckpointError(f"{where}: key 'd_model' must be even (sinusoidal positions), got {d_model}")
    parameters = estimated_parameters(config)
    if parameters > MAX_PARAMETERS:
        raise CheckpointError(f"{where}: describes a model of about {parameters:.3g} parameters (d_model, "
                              f"*_layers, *_ffn_dim, vocab_size), more than {MAX_PARAMETERS:.3g}; refused "
                              "before building it")


def estimated_parameters(config: dict) -> int:
    """About how many parameters the config describes (defaults: whisper-tiny)."""
    d = config.get("d_model", 384)
    encoder = config.get("encoder_layers", 4) * (4 * d * d + 2 * d * config.get("encoder_ffn_dim", 1536))
    decoder = config.get("decoder_layers", 4) * (8 * d * d + 2 * d * config.get("decoder_ffn_dim", 1536))
    embeddings = d * (config.get("vocab_size", 51865) + config.get("max_target_positions", 448)
                      + config.get("max_source_positions", 1500))
    convolutions = 3 * d * (config.get("num_mel_bins", 80) + d)
    return encoder + decoder + embeddings + convolutions


def check_generation_config(config: dict, vocab_size: int, where: str) -> None:
    """Check the fields of ``generation_config.json`` decoding reads: token ids within ``vocab_size``,
    suppression lists of token ids, ``lang_to_id``/``task_to_id`` maps of names to token ids."""
    if not isinstance(config, dict):
        raise CheckpointError(f"{where}: must hold a JSON object, got a JSON {_json_kind(config)}")
    for key, (low, high) in GENERATION_INT_FIELDS.items():
        if config.get(key) is not None:
            _check_value(config[key], INT, low, high, where, key)
    for key in ("decoder_start_token_id", "no_timestamps_token_id", "prev_sot_token_id", "pad_token_id"):
        if config.get(key) is not None and config[key] >= vocab_size:
            raise CheckpointError(f"{where}: key '{key}' is {config[key]}, outside the vocabulary of "
                                  f"{vocab_size}")
    eos = config.get("eos_token_id")
    if eos is not None:
        for index, value in enumerate(eos if isinstance(eos, list) else [eos]):
            _check_value(value, INT, 0, vocab_size - 1, where, f"eos_token_id[{index}]" if isinstance(eos,
                                                                                                      list)
                         else "eos_token_id")
    for key in GENERATION_LIST_FIELDS:
        values = config.get(key)
        if values is None:
            continue
        if not isinstance(values, list) or len(values) > vocab_size:
            raise CheckpointError(f"{where}: key '{key}' must be a list of token ids, got {_shown(values)}")
        for index, value in enumerate(values):
            _check_value(value, INT, -1, vocab_size - 1, where, f"{key}[{index}]")
    for key in GENERATION_MAPS:
        mapping = config.get(key)
        if mapping is None:
            continue
        if not isinstance(mapping, dict) or len(mapping) > 10_000:
            raise CheckpointError(f"{where}: key '{key}' must map names to token ids, got {_shown(mapping)}")
        for name, value in mapping.items():
            if len(name) > 100:
                raise CheckpointError(f"{where}: key '{key}' has a name of {len(name)} characters")
            _check_value(value, INT, 0, vocab_size - 1, where, f"{key}.{name}")
    for key in ("is_multilingual", "return_timestamps"):
        if config.get(key) is not None:
            _check_value(config[key], BOOL, None, None, where, key)
