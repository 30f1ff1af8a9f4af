"""Speaker embedding models: shapes, the published ECAPA-TDNN layout, per-item reflect padding, batch
invariance of every model, and gradients that reach every parameter."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from speechkit.models.speaker import ECAPATDNN, ResNetSpeaker, XVector, resnet34
from speechkit.models.speaker.layers import reflect_pad
from tests.helpers.batch_invariance import assert_batch_invariant


def _models():
    torch.manual_seed(0)
    return {
        "ecapa": ECAPATDNN.from_preset("tiny", input_size=20),
        "xvector": XVector(input_size=20, channels=(16, 16, 16, 16, 48), embedding_size=12),
        "resnet": ResNetSpeaker(input_size=20, num_blocks=(1, 1, 1, 1), base_channels=4, embedding_size=12),
    }


def _randomize_norms(model):
    """Give batch norms non-trivial statistics, so eval mode is not an identity."""
    for module in model.modules():
        if isinstance(module, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
    return model


@pytest.mark.parametrize("name", ["ecapa", "xvector", "resnet"])
def test_batch_invariant(name):
    model = _randomize_norms(_models()[name])
    items = [torch.randn(n, 20) for n in (37, 12, 25, 9)]
    outputs = assert_batch_invariant(model, items)
    assert all(o.shape == (model.embedding_size,) for o in outputs)


@pytest.mark.parametrize("name", ["ecapa", "xvector", "resnet"])
def test_every_parameter_learns(name):
    model = _models()[name].train()
    out = model(torch.randn(3, 30, 20), torch.tensor([30, 22, 17]))
    out.pow(2).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing


def test_reflect_pad_equals_torch_per_item():
    x = torch.randn(3, 4, 10)
    lengths = torch.tensor([10, 6, 4])
    padded = reflect_pad(x, lengths, 3)
    for i, n in enumerate(lengths.tolist()):
        expected = F.pad(x[i:i + 1, :, :n], (3, 3), mode="reflect")
        torch.testing.assert_close(padded[i:i + 1, :, :n + 6], expected)


def test_ecapa_has_the_published_layout():
    model = ECAPATDNN()  # paper sizes: C = 1024, 192-d embedding
    assert len(model.blocks) == 4 and model.mfa.conv.in_channels == 3 * 1024
    assert model.mfa.conv.out_channels == 3072 and model.fc.out_channels == 192
    assert [b.res2net_block.blocks[0].conv.dilation[0] for b in model.blocks[1:]] == [2, 3, 4]
    assert model.asp.tdnn.conv.in_channels == 3 * 3072  # global context: frames, mean and std


def test_resnet34_size_as_wespeaker():
    model = resnet34()
    assert sum(len([b for b in model.blocks if b.conv1.out_channels == c]) for c in (32, 64, 128, 256)) == 16
    assert 6e6 < sum(p.numel() for p in model.parameters()) < 7.5e6  # WeSpeaker's ResNet34: 6.6 M


def test_bad_inputs_are_refused():
    model = _models()["ecapa"]
    with pytest.raises(ValueError, match="20"):
        model(torch.randn(2, 30, 21), torch.tensor([30, 20]))
    with pytest.raises(Exception, match="lengths"):
        model(torch.randn(2, 30, 20), torch.tensor([31, 20]))
    with pytest.raises(ValueError, match="preset"):
        ECAPATDNN.from_preset("huge")
