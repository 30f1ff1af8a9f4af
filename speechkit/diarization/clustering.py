"""Clustering speaker embeddings into speakers: spectral clustering with the eigengap estimate of the number
of speakers, and agglomerative (average linkage) clustering with a cosine-similarity threshold.

Both take (n, dim) embeddings, or an (n, n) ``similarity`` matrix of cosine similarities (e.g. the
multi-scale one of :class:`~speechkit.diarization.Diarizer`), and return one speaker label per row (0, 1,
... in order of first appearance). Given ``num_speakers``, both produce that many clusters (when there are
that many rows); otherwise spectral clustering picks the count with the largest eigengap of the graph
Laplacian (at most ``max_speakers``) and agglomerative clustering stops merging when no two clusters are
more similar than ``threshold``.

Example:
    >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> spectral_clustering(x).tolist(), agglomerative_clustering(x, threshold=0.5).tolist()
    ([0, 0, 1, 1], [0, 0, 1, 1])
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from speechkit.errors import DataError


def cosine_similarity(embeddings: torch.Tensor) -> np.ndarray:
    """(n, n) float64 cosine similarities of (n, dim) embeddings."""
    x = torch.nn.functional.normalize(torch.as_tensor(embeddings).double(), dim=-1)
    return (x @ x.T).numpy()


def _relabel(labels: np.ndarray) -> np.ndarray:
    """Labels renumbered 0, 1, ... in order of first appearance."""
    order = {}
    for label in labels.tolist():
        order.setdefault(label, len(order))
    return np.array([order[label] for label in labels.tolist()], dtype=np.int64)


def _similarity(embeddings, similarity) -> np.ndarray:
    """The (n, n) similarities to cluster: ``similarity`` if given, else those of ``embeddings``."""
    if (embeddings is None) == (similarity is None):
        raise DataError("clustering takes either embeddings or a similarity matrix, not both or neither")
    if similarity is None:
        shape = tuple(torch.as_tensor(embeddings).shape)
        if len(shape) != 2:
            raise DataError(f"clustering takes (n, dim) embeddings, got shape {shape}")
        return cosine_similarity(embeddings)
    similarity = np.array(similarity, dtype=np.float64)
    if similarity.ndim != 2 or similarity.shape[0] != similarity.shape[1]:
        raise DataError(f"a similarity matrix is (n, n), got shape {similarity.shape}")
    return similarity


def _check(num_speakers, max_speakers) -> None:
    if num_speakers is not None and num_speakers < 1:
        raise DataError(f"num_speakers must be >= 1, got {num_speakers}")
    if max_speakers < 1:
        raise DataError(f"max_speakers must be >= 1, got {max_speakers}")


def kmeans(points: np.ndarray, k: int, seed: int = 0, iterations: int = 100, restarts: int = 5) -> np.ndarray:
    """Labels of k-means (k-means++ seeding, best of ``restarts``) on (n, d) ``points``."""
    rng = np.random.default_rng(seed)
    best, best_cost = None, np.inf
    for _ in range(restarts):
        centres = [points[rng.integers(len(points))]]
        for _ in range(1, k):
            distance = np.min([((points - c) ** 2).sum(1) for c in centres], axis=0)
            total = distance.sum()
            index = rng.choice(len(points), p=distance / total) if total > 0 else rng.integers(len(points))
            centres.append(points[index])
        centres = np.array(centres)
        for _ in range(iterations):
            labels = ((points[:, None, :] - centres[None]) ** 2).sum(-1).argmin(1)
            updated = np.array([points[labels == j].mean(0) if (labels == j).any() else centres[j]
                                for j in range(k)])
            if np.allclose(updated, centres):
                break
            centres = updated
        cost = ((points - centres[labels]) ** 2).sum()
        if cost < best_cost:
            best, best_cost = labels, cost
    return best


def spectral_clustering(embeddings: Optional[torch.Tensor] = None, num_speakers: Optional[int] = None,
                        max_speakers: int = 8, keep: float = 0.3, seed: int = 0,
                        similarity: Optional[np.ndarray] = None) -> np.ndarray:
    """Spectral clustering of cosine affinities, each row keeping its ``keep`` share of strongest links.

    The affinity graph is made sparse per row (Park et al., "Auto-tuning spectral clustering", 2019) and
    symmetrized; the number of speakers (unless given) is the position of the largest gap between the
    ascending eigenvalues of its Laplacian, then k-means clusters the rows of the first eigenvectors.
    """
    similarity = _similarity(embeddings, similarity)
    _check(num_speakers, max_speakers)
    count = len(similarity)
    if count <= 2:
        return np.zeros(count, dtype=np.int64) if num_speakers in (None, 1) or count < 2 \
            else np.arange(count, dtype=np.int64)
    affinity = np.clip(similarity, 0.0, None)
    neighbours = max(2, int(np.ceil(keep * count)))
    pruned = np.zeros_like(affinity)
    strongest = np.argsort(-affinity, axis=1)[:, :neighbours]
    np.put_along_axis(pruned, strongest, np.take_along_axis(affinity, strongest, 1), 1)
    affinity = 0.5 * (pruned + pruned.T)
    laplacian = np.diag(affinity.sum(1)) - affinity
    values, vectors = np.linalg.eigh(laplacian)
    if num_speakers is None:
        limit = min(max_speakers, count - 1)
        gaps = np.diff(values[: limit + 1])
        num_speakers = int(np.argmax(gaps)) + 1 if gaps.size else 1
    num_speakers = min(num_speakers, count)
    if num_speakers == 1:
        return np.zeros(count, dtype=np.int64)
    return _relabel(kmeans(vectors[:, :num_speakers], num_speakers, seed))


def agglomerative_clustering(embeddings: Optional[torch.Tensor] = None, num_speakers: Optional[int] = None,
                             threshold: float = 0.5, max_speakers: int = 8,
                             similarity: Optional[np.ndarray] = None) -> np.ndarray:
    """Average-linkage clustering on cosine similarity: merge the two most similar clusters while their
    similarity is at least ``threshold`` (or until ``num_speakers`` clusters remain, when given; never more
    than ``max_speakers`` when estimating)."""
    similarity = _similarity(embeddings, similarity)  # a fresh array: changed in place below
    _check(num_speakers, max_speakers)
    count = len(similarity)
    np.fill_diagonal(similarity, -np.inf)
    sizes = np.ones(count)
    members = {i: [i] for i in range(count)}
    alive = np.ones(count, dtype=bool)
    while alive.sum() > 1:
        masked = np.where(alive[:, None] & alive[None, :], similarity, -np.inf)
        a, b = np.unravel_index(np.argmax(masked), masked.shape)
        clusters = int(alive.sum())
        if num_speakers is not None:
            if clusters <= num_speakers:
                break
        elif masked[a, b] < threshold and clusters <= max_speakers:
            break
        merged = (sizes[a] * similarity[a] + sizes[b] * similarity[b]) / (sizes[a] + sizes[b])
        similarity[a], similarity[:, a] = merged, merged
        similarity[a, a] = -np.inf
        alive[b] = False
        sizes[a] += sizes[b]
        members[a] += members.pop(b)
    labels = np.zeros(count, dtype=np.int64)
    for label, rows in enumerate(members.values()):
        labels[rows] = label
    return _relabel(labels)
