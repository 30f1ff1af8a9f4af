"""Small random Whisper folders written by ``transformers`` (nothing downloaded): a byte-level BPE trained
here with Whisper's special tokens in the published order, a ``generation_config.json`` as transformers
writes it for the published models, and random weights of any configuration."""
from __future__ import annotations

import json
import os

LANGUAGE_CODES = ("en", "fr", "de", "es")
TEXT = ("the quick brown fox jumps over the lazy dog while seven wizards quietly hum a tune about "
        "speech recognition models and their tokenizers, numbers like 1234 and 56 too")


def build_tokenizer(folder: str, merges: int = 200) -> dict:
    """Train a tiny byte-level BPE, add Whisper's special and timestamp tokens after the text tokens, write
    ``tokenizer.json``, ``vocab.json``, ``merges.txt`` and ``added_tokens.json``; return the special ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=256 + merges,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator([TEXT] * 20, trainer)
    specials = (["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{code}|>" for code in LANGUAGE_CODES]
                + ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>",
                   "<|notimestamps|>"] + [f"<|{i * 0.02:.2f}|>" for i in range(1501)])
    first = tokenizer.get_vocab_size()
    tokenizer.add_special_tokens(specials)
    os.makedirs(folder, exist_ok=True)
    tokenizer.save(os.path.join(folder, "tokenizer.json"))
    tokenizer.model.save(folder)  # vocab.json, merges.txt
    added = {token: first + index for index, token in enumerate(specials)}
    with open(os.path.join(folder, "added_tokens.json"), "w", encoding="utf-8") as handle:
        json.dump(added, handle)
    return {"vocab_size": first + len(specials), "eot": added["<|endoftext|>"],
            "sot": added["<|startoftranscript|>"],
            "languages": {f"<|{code}|>": added[f"<|{code}|>"] for code in LANGUAGE_CODES},
            "translate": added["<|translate|>"], "transcribe": added["<|transcribe|>"],
            "prev": added["<|startofprev|>"], "no_timestamps": added["<|notimestamps|>"],
            "timestamp_begin": added["<|0.00|>"], "space": tokenizer.token_to_id("Ġ")}


def generation_config(ids: dict, max_length: int = 448, **overrides) -> dict:
    """The fields transformers writes in a multilingual Whisper's ``generation_config.json``."""
    suppress = sorted({1, 2, 7, 8, 9, 10, 14, 25, ids["translate"], ids["transcribe"], ids["prev"] - 1,
                       ids["prev"], ids["no_timestamps"] - 1})
    values = {
        "decoder_start_token_id": ids["sot"], "bos_token_id": ids["eot"], "eos_token_id": ids["eot"],
        "pad_token_id": ids["eot"], "no_timestamps_token_id": ids["no_timestamps"],
        "prev_sot_token_id": ids["prev"], "is_multilingual": True, "max_length": max_length,
        "max_initial_timestamp_index": 50, "lang_to_id": ids["languages"],
        "task_to_id": {"transcribe": ids["transcribe"], "translate": ids["translate"]},
        "suppress_tokens": suppress, "begin_suppress_tokens": [ids["space"], ids["eot"]],
        "forced_decoder_ids": [[1, None], [2, ids["transcribe"]]], "return_timestamps": False,
    }
    values.update(overrides)
    return values


def build_whisper_folder(folder: str, *, d_model: int = 64, encoder_layers: int = 2, decoder_layers: int = 2,
                         heads: int = 4, ffn: int = 128, num_mel_bins: int = 80,
                         max_source_positions: int = 1500, max_target_positions: int = 448,
                         safe_serialization: bool = True, seed: int = 0,
                         generation_overrides: dict | None = None, weight_std: float = 0.1,
                         eos_scale: float = 1.0):
    """Write a random ``WhisperForConditionalGeneration`` folder; returns ``(hf_model, ids)``."""
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    ids = build_tokenizer(folder)
    config = WhisperConfig(
        vocab_size=ids["vocab_size"], num_mel_bins=num_mel_bins, d_model=d_model,
        encoder_layers=encoder_layers,
        decoder_layers=decoder_layers, encoder_attention_heads=heads, decoder_attention_heads=heads,
        encoder_ffn_dim=ffn, decoder_ffn_dim=ffn, max_source_positions=max_source_positions,
        max_target_positions=max_target_positions, pad_token_id=ids["eot"], bos_token_id=ids["eot"],
        eos_token_id=ids["eot"], decoder_start_token_id=ids["sot"])
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config).eval()
    with torch.no_grad():  # larger weights than the default init: confident, varied decisions
        for name, parameter in model.named_parameters():
            if parameter.dim() >= 2 and "embed_positions" not in name:
                parameter.normal_(0.0, weight_std)
        # A stronger end-of-text row: transcripts of varied lengths, not all cut at the length limit.
        model.model.decoder.embed_tokens.weight[ids["eot"]] *= eos_scale
    model.save_pretrained(folder)
    if not safe_serialization:  # the older checkpoints' format (recent transformers writes only safetensors)
        from safetensors.torch import load_file

        weights = os.path.join(folder, "model.safetensors")
        torch.save(load_file(weights), os.path.join(folder, "pytorch_model.bin"))
        os.remove(weights)
    with open(os.path.join(folder, "generation_config.json"), "w", encoding="utf-8") as handle:
        json.dump(generation_config(ids, **(generation_overrides or {})), handle, indent=2)
    from transformers import GenerationConfig

    model.generation_config = GenerationConfig.from_pretrained(folder)
    return model, ids
