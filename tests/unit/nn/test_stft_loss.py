"""Multi-resolution STFT loss: exact values on scaled signals, padding never enters, gradients finite."""
import math

import pytest
import torch

from speechkit.nn import MultiResolutionSTFTLoss, multi_resolution_stft_loss, stft_distances
from tests.helpers.batch_invariance import assert_batch_invariant

RESOLUTIONS = [(256, 64, 256), (128, 32, 128)]


def test_identical_signals_give_zero_and_a_scaled_copy_gives_known_values():
    target = torch.randn(2, 4000)
    lengths = torch.tensor([4000, 3000])
    loss, parts = multi_resolution_stft_loss(target.clone(), target, lengths, RESOLUTIONS)
    assert float(loss) == pytest.approx(0.0, abs=1e-6)
    # Half the amplitude: |S - S/2| / |S| = 0.5 and |log S - log S/2| = log 2 on every (non-silent) bin.
    loss, parts = multi_resolution_stft_loss(0.5 * target, target, lengths, RESOLUTIONS)
    assert float(parts["spectral_convergence"]) == pytest.approx(0.5, abs=1e-4)
    assert float(parts["log_magnitude"]) == pytest.approx(math.log(2.0), abs=1e-3)


def test_padding_never_enters_the_loss():
    def per_item(estimate, lengths, target, _):
        return torch.stack(list(stft_distances(estimate, target, lengths, RESOLUTIONS).values()), 1)

    items = [(torch.randn(n), torch.randn(n)) for n in (900, 400, 650)]
    assert_batch_invariant(per_item, items)


def test_gradient_is_finite_on_silence_and_zero_past_the_length():
    estimate = torch.zeros(1, 2000, requires_grad=True)
    target = torch.randn(1, 2000)
    MultiResolutionSTFTLoss(RESOLUTIONS)(estimate, target, torch.tensor([1500])).backward()
    assert torch.isfinite(estimate.grad).all()
    assert torch.count_nonzero(estimate.grad[0, 1500:]) == 0


def test_bad_shapes_and_resolutions_are_refused():
    with pytest.raises(ValueError, match="batch, time"):
        stft_distances(torch.randn(1, 100), torch.randn(1, 90), torch.tensor([90]))
    with pytest.raises(ValueError, match="resolution"):
        MultiResolutionSTFTLoss([(256, 64, 512)])


def test_features_and_nn_import_in_either_order():
    import subprocess
    import sys

    for first in ("speechkit.features", "speechkit.nn"):
        done = subprocess.run([sys.executable, "-c", f"import {first}; import speechkit.nn.stft_loss"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
