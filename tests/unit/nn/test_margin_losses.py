"""AAM- and AM-softmax: the logits against the formulas, margin warm-up, sub-centres, saved step count."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from speechkit.errors import DataError
from speechkit.nn.margin_losses import AAMSoftmaxLoss, AMSoftmaxLoss


def test_aam_logits_follow_the_arcface_formula():
    torch.manual_seed(0)
    loss = AAMSoftmaxLoss(8, 5, margin=0.3, scale=10.0)
    x, labels = torch.randn(6, 8), torch.tensor([0, 1, 2, 3, 4, 0])
    cos = F.normalize(x) @ F.normalize(loss.weight).T
    theta = torch.acos(cos.clamp(-1, 1))
    expected = cos.clone()
    for i, label in enumerate(labels.tolist()):
        c = cos[i, label]
        expected[i, label] = torch.cos(theta[i, label] + 0.3) if c > math.cos(math.pi - 0.3) \
            else c - 0.3 * math.sin(0.3)
    torch.testing.assert_close(loss.logits(x, labels), 10.0 * expected, atol=1e-5, rtol=1e-5)
    assert torch.isclose(loss(x, labels), F.cross_entropy(10.0 * expected, labels), atol=1e-5)


def test_am_logits_subtract_the_margin():
    loss = AMSoftmaxLoss(4, 3, margin=0.25, scale=5.0)
    x, labels = torch.randn(3, 4), torch.tensor([2, 0, 1])
    cos = F.normalize(x) @ F.normalize(loss.weight).T
    expected = cos - 0.25 * F.one_hot(labels, 3)
    torch.testing.assert_close(loss.logits(x, labels), 5.0 * expected)


def test_margin_warms_up_in_training_only_and_is_checkpointed():
    loss = AAMSoftmaxLoss(4, 3, margin=0.2, warmup_steps=4)
    x, labels = torch.randn(2, 4), torch.tensor([0, 1])
    assert loss.current_margin() == 0.0
    loss.eval()
    loss(x, labels)
    assert loss.current_margin() == 0.0
    loss.train()
    for expected in (0.05, 0.1, 0.15, 0.2, 0.2):
        loss(x, labels)
        assert loss.current_margin() == pytest.approx(expected)
    other = AAMSoftmaxLoss(4, 3, margin=0.2, warmup_steps=4)
    other.load_state_dict(loss.state_dict())
    assert other.current_margin() == pytest.approx(0.2)


def test_sub_centres_take_the_closest_centre():
    loss = AMSoftmaxLoss(4, 2, margin=0.0, scale=1.0, sub_centers=3)
    with torch.no_grad():
        loss.weight.copy_(torch.eye(4)[[0, 1, 2, 3, 0, 1]])  # class 0: e0, e1, e2; class 1: e3, e0, e1
    logits = loss.logits(torch.tensor([[0.0, 0.0, 1.0, 0.0]]), torch.tensor([0]))
    torch.testing.assert_close(logits, torch.tensor([[1.0, 0.0]]))


def test_bad_labels_are_refused():
    loss = AAMSoftmaxLoss(4, 3)
    with pytest.raises(DataError, match=r"\[0, 3\)"):
        loss(torch.randn(2, 4), torch.tensor([0, 3]))
    with pytest.raises(DataError, match="2 labels"):
        loss(torch.randn(3, 4), torch.tensor([0, 1]))
