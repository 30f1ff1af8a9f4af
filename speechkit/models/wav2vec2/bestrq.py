"""BEST-RQ's random-projection quantizer: a frozen projection and codebook, fixed by a seed.

Each frame's features ``x`` (``input_dim``) are projected by a random matrix ``P`` (Xavier-uniform,
``input_dim x code_dim``), L2-normalized, and labelled with the nearest of ``codebook_size`` random unit
vectors (standard normal, L2-normalized): ``code = argmin_k || normalize(x P) - c_k ||``, i.e. the largest
cosine. Nothing is learned: ``P`` and the codebook are buffers, drawn from ``seed`` alone (so the same seed
gives the same quantizer anywhere) and saved with the model's state, and no optimizer ever sees them.
``num_codebooks`` independent pairs give that many codes per frame.

Example:
    >>> quantizer = RandomProjectionQuantizer(input_dim=80, codebook_size=16, code_dim=8, seed=0)
    >>> quantizer(torch.randn(2, 5, 80)).shape
    torch.Size([2, 5, 1])
    >>> torch.equal(quantizer.codebooks, RandomProjectionQuantizer(80, 16, 8, seed=0).codebooks)
    True
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class RandomProjectionQuantizer(nn.Module):
    """Frozen random projection + codebook (see the module doc).

    Shapes: x ``(batch, frames, input_dim)`` -> codes ``(batch, frames, num_codebooks)`` int64.
    """

    def __init__(self, input_dim: int, codebook_size: int = 1024, code_dim: int = 16, num_codebooks: int = 1,
                 seed: int = 0):
        super().__init__()
        if min(input_dim, codebook_size, code_dim, num_codebooks) < 1:
            raise ValueError("RandomProjectionQuantizer: every size must be >= 1, got input_dim "
                             f"{input_dim}, codebook_size {codebook_size}, code_dim {code_dim}, "
                             f"num_codebooks {num_codebooks}")
        self.input_dim, self.codebook_size = input_dim, codebook_size
        self.code_dim, self.num_codebooks, self.seed = code_dim, num_codebooks, seed
        generator = torch.Generator().manual_seed(seed)
        bound = math.sqrt(6.0 / (input_dim + code_dim))  # Xavier-uniform
        projections = (torch.rand(num_codebooks, input_dim, code_dim, generator=generator) * 2 - 1) * bound
        codebooks = torch.randn(num_codebooks, codebook_size, code_dim, generator=generator)
        codebooks = F.normalize(codebooks, dim=-1)
        self.register_buffer("projections", projections)
        self.register_buffer("codebooks", codebooks)

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.input_dim:
            raise ValueError(f"the quantizer takes {self.input_dim} features per frame, got {x.shape[-1]}")
        batch, frames, _ = x.shape
        # float32 also under autocast: the codes of a frame must not depend on the training precision.
        with torch.autocast(device_type=x.device.type, enabled=False):
            flat = x.float().reshape(1, batch * frames, self.input_dim).expand(self.num_codebooks, -1, -1)
            projected = F.normalize(torch.bmm(flat, self.projections.float()), dim=-1)  # (books, N, dim)
            # Both unit vectors: the nearest codeword is the one of largest dot product.
            scores = torch.bmm(projected, self.codebooks.float().transpose(1, 2))
        return scores.argmax(-1).T.reshape(batch, frames, self.num_codebooks)

    def extra_repr(self) -> str:
        return (f"input_dim={self.input_dim}, codebook_size={self.codebook_size}, code_dim={self.code_dim}, "
                f"num_codebooks={self.num_codebooks}, seed={self.seed}")
