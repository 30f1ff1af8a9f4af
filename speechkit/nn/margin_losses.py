"""Margin softmax losses for speaker embeddings: AAM-softmax (ArcFace) and AM-softmax (CosFace), with a
margin warm-up and optional sub-centres.

Both score an embedding against one (or ``sub_centers``) learned unit vector per class by cosine, take the
largest sub-centre's cosine per class (sub-centre ArcFace: noisy labels fall on a secondary centre), penalise
the target class by a margin (additive angular: ``cos(theta + m)``; additive cosine: ``cos(theta) - m``),
scale by ``scale`` and apply cross entropy. The margin grows linearly from 0 to ``margin`` over the first
``warmup_steps`` training calls (the count is a buffer, saved and restored with the checkpoint), which lets a
model from scratch find the classes before the margin makes them hard.

Example:
    >>> loss = AAMSoftmaxLoss(embedding_size=16, num_classes=10, margin=0.2, scale=30.0)
    >>> loss(torch.randn(4, 16), torch.tensor([1, 2, 3, 1])).shape
    torch.Size([])
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from speechkit.errors import DataError


class _MarginSoftmax(nn.Module):
    def __init__(self, embedding_size: int, num_classes: int, margin: float, scale: float, sub_centers: int,
                 warmup_steps: int):
        super().__init__()
        if num_classes < 2 or sub_centers < 1 or scale <= 0 or margin < 0 or warmup_steps < 0:
            raise ValueError("need num_classes >= 2, sub_centers >= 1, scale > 0, margin >= 0 and "
                             "warmup_steps >= 0")
        self.num_classes, self.sub_centers = num_classes, sub_centers
        self.margin, self.scale, self.warmup_steps = float(margin), float(scale), int(warmup_steps)
        self.weight = nn.Parameter(torch.empty(num_classes * sub_centers, embedding_size))
        nn.init.xavier_normal_(self.weight)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))

    def current_margin(self) -> float:
        """The margin now: ``margin * min(1, steps / warmup_steps)``."""
        if self.warmup_steps == 0:
            return self.margin
        return self.margin * min(1.0, int(self.steps) / self.warmup_steps)

    def cosines(self, embeddings: torch.Tensor) -> torch.Tensor:
        """(batch, num_classes): cosine to each class (the closest of its sub-centres)."""
        cosine = F.linear(F.normalize(embeddings, dim=-1), F.normalize(self.weight, dim=-1))
        if self.sub_centers > 1:
            cosine = cosine.view(-1, self.num_classes, self.sub_centers).amax(dim=-1)
        return cosine

    def _target_logit(self, cosine: torch.Tensor, margin: float) -> torch.Tensor:
        raise NotImplementedError

    def logits(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """(batch, num_classes) scaled logits with the target classes penalised by the current margin."""
        labels = torch.as_tensor(labels, device=embeddings.device).reshape(-1).to(torch.int64)
        if labels.shape[0] != embeddings.shape[0]:
            raise DataError(f"{labels.shape[0]} labels for {embeddings.shape[0]} embeddings")
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= self.num_classes):
            raise DataError(f"speaker labels must lie in [0, {self.num_classes}); got {labels.tolist()}")
        cosine = self.cosines(embeddings.float())
        one_hot = F.one_hot(labels, self.num_classes).to(torch.bool)
        target = self._target_logit(cosine, self.current_margin())
        return self.scale * torch.where(one_hot, target, cosine)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean cross entropy of ``embeddings`` (batch, dim) against int ``labels`` (batch,) or (batch, 1)
        (a tensor or a list)."""
        labels = torch.as_tensor(labels, device=embeddings.device).reshape(-1).to(torch.int64)
        loss = F.cross_entropy(self.logits(embeddings, labels), labels)
        if self.training:
            self.steps += 1
        return loss


class AAMSoftmaxLoss(_MarginSoftmax):
    """Additive angular margin softmax (ArcFace): target logit ``s * cos(theta + m)``.

    Where ``theta + m`` would pass pi the logit continues as ``cos(theta) - m * sin(m)`` (monotonic in
    theta), as in the published implementation.
    """

    def __init__(self, embedding_size: int, num_classes: int, margin: float = 0.2, scale: float = 30.0,
                 sub_centers: int = 1, warmup_steps: int = 0):
        super().__init__(embedding_size, num_classes, margin, scale, sub_centers, warmup_steps)

    def _target_logit(self, cosine: torch.Tensor, margin: float) -> torch.Tensor:
        sine = (1.0 - cosine.pow(2)).clamp(min=0.0, max=1.0).sqrt()
        shifted = cosine * math.cos(margin) - sine * math.sin(margin)
        return torch.where(cosine > math.cos(math.pi - margin), shifted, cosine - margin * math.sin(margin))


class AMSoftmaxLoss(_MarginSoftmax):
    """Additive margin softmax (CosFace): target logit ``s * (cos(theta) - m)``."""

    def __init__(self, embedding_size: int, num_classes: int, margin: float = 0.2, scale: float = 30.0,
                 sub_centers: int = 1, warmup_steps: int = 0):
        super().__init__(embedding_size, num_classes, margin, scale, sub_centers, warmup_steps)

    def _target_logit(self, cosine: torch.Tensor, margin: float) -> torch.Tensor:
        return cosine - margin
