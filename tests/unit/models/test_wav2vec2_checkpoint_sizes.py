"""speechkit.models.wav2vec2.checkpoint_sizes: the sizes read back from an encoder's weights are the config
it was built from, for every layout the model has, and a config of other sizes is refused by field name."""
from __future__ import annotations

import pytest

from speechkit.errors import CheckpointError
from speechkit.models.wav2vec2 import (
    Wav2Vec2Config,
    Wav2Vec2Model,
    check_encoder_sizes,
    size_differences,
    sizes_in_state_dict,
)

SMALL = dict(conv_channels=(16, 16, 12, 12, 8, 8, 8), conv_kernels=(10, 3, 3, 3, 3, 2, 2), d_model=24,
             num_layers=3, num_heads=2, ffn_dim=40, pos_conv_kernel=6, pos_conv_groups=3)


@pytest.mark.parametrize("layout", [{}, {"layer_norm_first": True}, {"pos_conv_layers": 2},
                                    {"relative_position_buckets": 8, "relative_position_max_distance": 20}])
def test_the_sizes_read_from_the_weights_are_those_the_encoder_was_built_with(layout):
    config = Wav2Vec2Config(**SMALL, **layout)
    sizes = sizes_in_state_dict(Wav2Vec2Model(config).state_dict())
    # data2vec-audio's stacked positional convolutions have another layout: their sizes are not read.
    expected = {k: v for k, v in SMALL.items() if k != "num_heads"
                and not (layout.get("pos_conv_layers") and k.startswith("pos_conv"))}
    assert sizes == expected
    assert size_differences(config, Wav2Vec2Model(config).state_dict()) == {}


def test_a_config_of_other_sizes_is_refused_naming_the_file_and_each_field():
    state = Wav2Vec2Model(Wav2Vec2Config(**SMALL)).state_dict()
    other = Wav2Vec2Config(**{**SMALL, "d_model": 36, "conv_channels": (16,) * 7, "num_layers": 2})
    assert size_differences(other, state) == {"conv_channels": ((16,) * 7, SMALL["conv_channels"]),
                                              "d_model": (36, 24), "num_layers": (2, 3)}
    with pytest.raises(CheckpointError) as caught:
        check_encoder_sizes(other, state, "runs/pretrain/encoder.ckpt")
    message = str(caught.value)
    assert message.startswith("runs/pretrain/encoder.ckpt: ")
    assert "config.d_model is 36 here, 24 in the file" in message
    assert "config.num_layers is 2 here, 3 in the file" in message
    assert "--config.conv_channels [16,16,12,12,8,8,8] --config.d_model 24 --config.num_layers 3" in message
    assert "ffn_dim" not in message  # only what differs
    check_encoder_sizes(Wav2Vec2Config(**SMALL), state, "encoder.ckpt")  # the same sizes load
