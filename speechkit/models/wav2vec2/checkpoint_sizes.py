"""The sizes of a wav2vec 2.0-style encoder read from its weights, to name the ``config`` field that differs
when a saved encoder (pretrain.py's ``encoder.ckpt``) is loaded into one built from another ``config``.

A state dict only says what its shapes say: the convolution channels and kernels, ``d_model``, ``ffn_dim``,
``num_layers`` and the positional convolution's kernel and groups. ``num_heads`` leaves no trace in the
shapes (the attention projections are ``d_model x d_model`` for any head count), so it cannot be checked.

Example:
    >>> from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model
    >>> small = Wav2Vec2Config(conv_channels=(16,) * 7, d_model=24, num_layers=1, num_heads=2, ffn_dim=32,
    ...                        pos_conv_kernel=4, pos_conv_groups=2)
    >>> state = Wav2Vec2Model(small).state_dict()
    >>> sizes_in_state_dict(state)["d_model"], sizes_in_state_dict(state)["pos_conv_groups"]
    (24, 2)
    >>> size_differences(small.replace(d_model=32), state)
    {'d_model': (32, 24)}
"""
from __future__ import annotations

import json
import re

from speechkit.errors import CheckpointError

_CONV = re.compile(r"feature_encoder\.layers\.(\d+)\.conv\.weight")
_LAYER = re.compile(r"encoder\.layers\.(\d+)\.")
#: The positional convolution's weight: with weight norm (as the model holds it) or plain.
_POS_CONV = ("encoder.pos_conv.conv.parametrizations.weight.original1", "encoder.pos_conv.conv.weight")


def sizes_in_state_dict(state: dict) -> dict:
    """The :class:`Wav2Vec2Config` size fields that the shapes of ``state`` (a ``Wav2Vec2Model`` state dict)
    determine; a field whose tensors are absent is left out."""
    sizes = {}
    convs = sorted((int(match.group(1)), tensor) for key, tensor in state.items()
                   if (match := _CONV.fullmatch(key)) and hasattr(tensor, "shape"))
    if convs:  # (out_channels, in_channels, kernel) each
        sizes["conv_channels"] = tuple(int(tensor.shape[0]) for _, tensor in convs)
        sizes["conv_kernels"] = tuple(int(tensor.shape[-1]) for _, tensor in convs)
    if "projection.weight" in state:  # (d_model, last conv channels)
        sizes["d_model"] = int(state["projection.weight"].shape[0])
    layers = {int(match.group(1)) for key in state if (match := _LAYER.match(key))}
    if layers:
        sizes["num_layers"] = max(layers) + 1
    if "encoder.layers.0.ffn_in.weight" in state:  # (ffn_dim, d_model)
        sizes["ffn_dim"] = int(state["encoder.layers.0.ffn_in.weight"].shape[0])
    pos_conv = next((state[key] for key in _POS_CONV if key in state), None)
    if pos_conv is not None and pos_conv.dim() == 3:  # (d_model, d_model / groups, kernel)
        sizes["pos_conv_kernel"] = int(pos_conv.shape[2])
        sizes["pos_conv_groups"] = int(pos_conv.shape[0]) // max(int(pos_conv.shape[1]), 1)
    return sizes


def size_differences(config, state: dict) -> dict:
    """``{field: (config's value, the weights' value)}`` for every size field on which they disagree."""
    differences = {}
    for name, found in sizes_in_state_dict(state).items():
        wanted = getattr(config, name)
        wanted = tuple(wanted) if isinstance(wanted, (list, tuple)) else wanted
        if wanted != found:
            differences[name] = (wanted, found)
    return differences


def check_encoder_sizes(config, state: dict, path, prefix: str = "config") -> None:
    """Raise :class:`CheckpointError` naming ``path`` and each ``<prefix>.<field>`` whose value in ``config``
    differs from the encoder saved in ``state``, with the overrides that would build the saved one.

    Example:
        >>> from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model
        >>> small = Wav2Vec2Config(conv_channels=(16,) * 7, d_model=24, num_layers=1, num_heads=2,
        ...                        ffn_dim=32, pos_conv_kernel=4, pos_conv_groups=2)
        >>> check_encoder_sizes(small, Wav2Vec2Model(small).state_dict(), "encoder.ckpt")  # fits: no error
    """
    differences = size_differences(config, state)
    if not differences:
        return
    found = "; ".join(f"{prefix}.{name} is {_text(wanted)} here, {_text(saved)} in the file"
                      for name, (wanted, saved) in differences.items())
    overrides = " ".join(f"--{prefix}.{name} {_text(saved)}" for name, (_, saved) in differences.items())
    raise CheckpointError(f"{path}: the saved encoder has other sizes than the {prefix} it is loaded into: "
                          f"{found}. Build the encoder it was saved from: {overrides} (and the same "
                          f"{prefix}.num_heads, which the weights do not record)")


def _text(value) -> str:
    """A value as it is written on a command line (``[128,128]`` for channels)."""
    return json.dumps(list(value)).replace(" ", "") if isinstance(value, tuple) else str(value)
