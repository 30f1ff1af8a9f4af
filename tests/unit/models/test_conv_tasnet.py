"""Conv-TasNet: presets, shapes, batch invariance (alone vs padded in a batch), speakers 2 and 3."""
from __future__ import annotations

import pytest
import torch

from speechkit.models import ConvTasNet
from speechkit.models.conv_tasnet import PRESETS, DepthwiseDilatedConv, GlobalLayerNorm
from tests.helpers.batch_invariance import assert_batch_invariant


def _count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def test_paper_preset_has_the_published_size():
    model = ConvTasNet.from_preset("paper")
    assert (model.enc_dim, model.kernel_size, len(model.blocks)) == (512, 16, 24)
    assert 4.8e6 < _count(model) < 5.2e6  # the paper reports 5.1 M (its skip path differs slightly)
    assert set(PRESETS) >= {"paper", "small", "tiny"}
    with pytest.raises(ValueError, match="unknown Conv-TasNet preset"):
        ConvTasNet.from_preset("huge")


@pytest.mark.parametrize("speakers", [2, 3])
def test_batch_invariance(speakers):
    torch.manual_seed(0)
    model = ConvTasNet.from_preset("tiny", num_speakers=speakers, blocks_per_repeat=3)
    items = [torch.randn(n) for n in (1203, 400, 777, 16)]

    def separate(mixture, lengths):  # (batch, speakers, time) -> time first, as the helper compares
        out = model(mixture, lengths)
        assert out.shape == (mixture.shape[0], speakers, mixture.shape[1])
        return out.transpose(1, 2), lengths

    assert_batch_invariant(separate, items)


def test_output_is_zero_past_each_length_and_gradients_flow():
    model = ConvTasNet.from_preset("tiny")
    mixture, lengths = torch.randn(2, 500), torch.tensor([500, 321])
    out = model(mixture, lengths)
    assert float(out[1, :, 321:].detach().abs().sum()) == 0.0
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_depthwise_matches_torch_conv_and_gln_ignores_padding():
    conv = DepthwiseDilatedConv(6, 3, dilation=4)
    reference = torch.nn.Conv1d(6, 6, 3, dilation=4, padding=4, groups=6)
    reference.load_state_dict(conv.state_dict())
    x = torch.randn(2, 6, 40)
    torch.testing.assert_close(conv(x), reference(x))
    norm = GlobalLayerNorm(6)
    mask = torch.ones(1, 1, 40)
    mask[..., 30:] = 0
    padded = x[:1].clone()
    padded[..., 30:] = 1e3
    torch.testing.assert_close(norm(padded, mask)[..., :30], norm(x[:1, :, :30], torch.ones(1, 1, 30)))
    with torch.no_grad():
        norm.weight.uniform_(0.5, 2.0)
        norm.bias.normal_()
    # No mask (every frame valid): the fused group_norm path gives what the masked one gives.
    torch.testing.assert_close(norm(x, None), norm(x, torch.ones(2, 1, 40)))
