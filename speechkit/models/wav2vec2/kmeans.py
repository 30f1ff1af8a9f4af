"""Mini-batch k-means in torch: fitted on a stream of feature batches, deterministic per seed, resumable.

HuBERT's targets are the clusters of frame features (MFCCs, then a layer of the previous model). The corpus
does not fit in memory as frames, so the centroids are fitted one batch at a time (Sculley's web-scale
k-means): the first batch seeds them with k-means++, then each batch assigns its frames to the nearest
centroid and moves each centroid towards its frames' mean with the step ``frames of this batch / frames it
has ever received`` (each centroid is the running mean of everything assigned to it).

Everything that decides the result is in :meth:`~torch.nn.Module.state_dict`: centroids, counts, the
batches seen and the random state of the k-means++ draw, so a fit stopped after any batch and resumed from
its saved state ends with the same centroids, bit for bit, as one that never stopped (given the same
batches in the same order, which the recipe's ``kmeans.py`` draws from the seed).

Example:
    >>> kmeans = MiniBatchKMeans(num_clusters=2, dim=1, seed=0)
    >>> kmeans.partial_fit(torch.tensor([[0.0], [0.1], [5.0], [5.1]]))
    >>> sorted(round(c, 2) for c in kmeans.centroids.flatten().tolist())
    [0.05, 5.05]
    >>> kmeans.predict(torch.tensor([[4.0]])).tolist() == kmeans.predict(torch.tensor([[5.0]])).tolist()
    True
"""
from __future__ import annotations

import torch
from torch import nn

from speechkit.errors import DataError


class MiniBatchKMeans(nn.Module):
    """``num_clusters`` centroids of ``dim``-dimensional frames (see the module doc).

    Shapes: :meth:`partial_fit` and :meth:`predict` take frames ``(count, dim)``; :meth:`predict` returns
    ``(count,)`` int64 cluster indices.
    """

    def __init__(self, num_clusters: int, dim: int, seed: int = 0):
        super().__init__()
        if num_clusters < 1 or dim < 1:
            raise DataError(f"k-means needs num_clusters >= 1 and dim >= 1, got {num_clusters}, {dim}")
        self.num_clusters, self.dim, self.seed = num_clusters, dim, seed
        self.register_buffer("centroids", torch.zeros(num_clusters, dim))
        self.register_buffer("counts", torch.zeros(num_clusters, dtype=torch.float64))
        self.register_buffer("batches", torch.zeros((), dtype=torch.long))

    @property
    def fitted(self) -> bool:
        return int(self.batches) > 0

    def _check(self, frames: torch.Tensor) -> torch.Tensor:
        if frames.dim() != 2 or frames.shape[1] != self.dim:
            raise DataError(f"k-means takes frames (count, {self.dim}), got shape {tuple(frames.shape)}")
        if not bool(torch.isfinite(frames).all()):
            raise DataError("k-means: the frames hold NaN or inf values")
        return frames.detach().float().to(self.centroids.device)

    def distances(self, frames: torch.Tensor) -> torch.Tensor:
        """Squared distances ``(count, num_clusters)`` to the centroids."""
        frames = self._check(frames)
        # float32 also under autocast: a bf16 product would move frames between nearby clusters.
        with torch.autocast(device_type=frames.device.type, enabled=False):
            return ((frames.square().sum(1, keepdim=True) - 2.0 * frames @ self.centroids.T
                     + self.centroids.square().sum(1)).clamp(min=0))

    def predict(self, frames: torch.Tensor) -> torch.Tensor:
        """The nearest centroid of each frame, ``(count,)`` int64."""
        if not self.fitted:
            raise DataError("k-means: predict before any partial_fit (load fitted centroids first)")
        return self.distances(frames).argmin(1)

    def inertia(self, frames: torch.Tensor) -> float:
        """Mean squared distance of the frames to their nearest centroid."""
        return float(self.distances(frames).min(1).values.mean())

    def _initialize(self, frames: torch.Tensor) -> None:
        """k-means++ on the first batch: each next centroid drawn with probability proportional to the
        squared distance to the nearest one already chosen."""
        if len(frames) < self.num_clusters:
            raise DataError(f"k-means: the first batch has {len(frames)} frames, fewer than the "
                            f"{self.num_clusters} clusters (use bigger batches)")
        generator = torch.Generator().manual_seed(self.seed)
        chosen = [int(torch.randint(len(frames), (1,), generator=generator))]
        nearest = (frames - frames[chosen[0]]).square().sum(1).double()
        for _ in range(1, self.num_clusters):
            total = float(nearest.sum())
            if total <= 0:  # fewer distinct frames than clusters: duplicates are the only choice left
                index = int(torch.randint(len(frames), (1,), generator=generator))
            else:
                index = int(torch.multinomial((nearest / total).cpu(), 1, generator=generator))
            chosen.append(index)
            nearest = torch.minimum(nearest, (frames - frames[index]).square().sum(1).double())
        self.centroids.copy_(frames[chosen])

    @torch.no_grad()
    def partial_fit(self, frames: torch.Tensor) -> None:
        """Move the centroids towards one batch of frames ``(count, dim)``."""
        frames = self._check(frames)
        if not self.fitted:
            self._initialize(frames)
        labels = self.distances(frames).argmin(1)
        sums = torch.zeros_like(self.centroids, dtype=torch.float64).index_add_(0, labels, frames.double())
        counts = torch.bincount(labels, minlength=self.num_clusters).double()
        self.counts += counts
        hit = counts > 0
        # centroid += (sum - n * centroid) / total count: the running mean of all frames assigned to it.
        step = (sums[hit] - counts[hit, None] * self.centroids[hit].double()) / self.counts[hit, None]
        self.centroids[hit] = (self.centroids[hit].double() + step).float()
        self.batches += 1

    def extra_repr(self) -> str:
        return f"num_clusters={self.num_clusters}, dim={self.dim}, seed={self.seed}"
