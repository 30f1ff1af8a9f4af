"""Tensor names between ``transformers``' ``WhisperForConditionalGeneration`` and :class:`WhisperModel`.

speechkit's modules carry the same names without the ``model.`` prefix; the output projection
(``proj_out.weight``) is the token embedding in every published checkpoint (``tie_word_embeddings``), kept
as ``decoder.proj_out.weight`` only when a config unties it.

Example:
    >>> sorted(state_dict_from_huggingface({"model.encoder.conv1.weight": 1, "proj_out.weight": 2}, True))
    ['encoder.conv1.weight']
"""
from __future__ import annotations


def state_dict_from_huggingface(hf_state: dict, tied: bool) -> dict:
    """transformers tensors -> :class:`WhisperModel` state (unknown names kept, to be reported)."""
    ours = {}
    for key, tensor in hf_state.items():
        if key == "proj_out.weight":
            if not tied:
                ours["decoder.proj_out.weight"] = tensor
            continue
        ours[key[len("model."):] if key.startswith("model.") else key] = tensor
    return ours


def state_dict_to_huggingface(state: dict, tied: bool) -> dict:
    """:class:`WhisperModel` state -> transformers names (``proj_out.weight`` written for an untied model;
    transformers ties it itself otherwise)."""
    hf_state = {}
    for key, tensor in state.items():
        if key == "decoder.proj_out.weight":
            hf_state["proj_out.weight"] = tensor
        else:
            hf_state[f"model.{key}"] = tensor
    return hf_state
