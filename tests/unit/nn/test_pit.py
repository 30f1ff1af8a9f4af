"""PIT with negative SI-SNR: the right permutation, swapped sources give the same loss, solver beyond 4."""
from __future__ import annotations

import itertools

import pytest
import torch

from speechkit.metrics import si_snr
from speechkit.nn import apply_permutation, pairwise_si_snr, pit_si_snr_loss
from speechkit.nn import pit as pit_module


def test_swapped_sources_give_the_same_loss_and_the_permutation():
    torch.manual_seed(0)
    targets = torch.randn(3, 2, 1000)
    estimates = targets + 0.3 * torch.randn(3, 2, 1000)
    lengths = torch.tensor([1000, 800, 500])
    loss, perm = pit_si_snr_loss(estimates, targets, lengths)
    swapped_loss, swapped_perm = pit_si_snr_loss(estimates.flip(1), targets, lengths)
    torch.testing.assert_close(loss, swapped_loss)
    assert perm.tolist() == [[0, 1]] * 3 and swapped_perm.tolist() == [[1, 0]] * 3
    torch.testing.assert_close(apply_permutation(estimates.flip(1), swapped_perm), estimates)


def test_pairwise_matches_the_metric_and_ignores_padding():
    torch.manual_seed(1)
    estimates, targets = torch.randn(2, 3, 600), torch.randn(2, 3, 600)
    lengths = torch.tensor([600, 450])
    pairwise = pairwise_si_snr(estimates, targets, lengths)
    for b, i, j in itertools.product(range(2), range(3), range(3)):
        n = int(lengths[b])
        expected = si_snr(estimates[b, i, :n].unsqueeze(0), targets[b, j, :n].unsqueeze(0))[0]
        torch.testing.assert_close(pairwise[b, i, j], expected, atol=1e-4, rtol=1e-5)
    noisy = estimates.clone()
    noisy[1, :, 450:] = 100.0
    torch.testing.assert_close(pairwise_si_snr(noisy, targets, lengths), pairwise)


@pytest.mark.parametrize("sources", [3, 5, 7])
def test_assignment_solver_finds_the_planted_permutation(sources, monkeypatch):
    torch.manual_seed(sources)
    targets = torch.randn(4, sources, 800)
    planted = torch.stack([torch.randperm(sources) for _ in range(4)])
    estimates = torch.stack([targets[b, planted[b]] for b in range(4)]) + 0.2 * torch.randn(4, sources, 800)
    loss, perm = pit_si_snr_loss(estimates, targets)
    # estimate perm[j] is matched to target j: planted[perm[j]] == j
    for b in range(4):
        assert planted[b, perm[b]].tolist() == list(range(sources))
    if sources <= pit_module.EXHAUSTIVE_MAX:  # the Hungarian path agrees with the exhaustive one
        monkeypatch.setattr(pit_module, "EXHAUSTIVE_MAX", 1)
        loss_solver, perm_solver = pit_si_snr_loss(estimates, targets)
        assert torch.equal(perm_solver, perm)
        torch.testing.assert_close(loss_solver, loss)


def test_solver_is_optimal_on_random_costs(monkeypatch):
    torch.manual_seed(3)
    cost = torch.randn(6, 4, 4)
    exhaustive = pit_module.best_permutation(cost)
    monkeypatch.setattr(pit_module, "EXHAUSTIVE_MAX", 1)
    solved = pit_module.best_permutation(cost)
    total = lambda p: cost[torch.arange(6).unsqueeze(1), p, torch.arange(4)].sum(1)  # noqa: E731
    torch.testing.assert_close(total(solved), total(exhaustive))


def test_shape_errors():
    with pytest.raises(ValueError, match="sources, time"):
        pit_si_snr_loss(torch.randn(2, 2, 10), torch.randn(2, 3, 10))
