"""The pretraining model of each objective, built from the YAML (shared by pretrain.py, kmeans.py, probe.py).

``objective: wav2vec2 | hubert | bestrq`` picks it; all three wrap the same encoder (``config``), whose
weights pretrain.py saves alone for finetune.py, so one fine-tuning recipe serves the three.

- ``wav2vec2``: :class:`Wav2Vec2Pretraining` (contrastive, learned quantizer).
- ``hubert``: :class:`HubertPretraining` with targets from ``hubert.kmeans_file`` (written by kmeans.py):
  clusters of MFCCs, or, with ``hubert.teacher_encoder`` and ``hubert.teacher_layer``, of that layer of a
  previous model (the second iteration; kmeans.py must be run with the same two settings).
- ``bestrq``: :class:`BestRqPretraining` (frozen random projection of filterbanks, fixed by
  ``bestrq.quantizer_seed``).
"""
from __future__ import annotations

import os

import torch

from speechkit.errors import HparamsError
from speechkit.models.wav2vec2 import (
    BestRqPretraining,
    ClusterTargets,
    HubertPretraining,
    MaskedPredictionMonitor,
    MiniBatchKMeans,
    PretrainingMonitor,
    Wav2Vec2Model,
    Wav2Vec2Pretraining,
)
from speechkit.pretrained.loading import load_encoder_checkpoint, load_into, load_weights

OBJECTIVES = ("wav2vec2", "hubert", "bestrq")


def objective_of(hparams: dict) -> str:
    objective = hparams.get("objective", "wav2vec2")
    if objective not in OBJECTIVES:
        raise HparamsError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    return objective


def load_teacher(hparams: dict):
    """``(teacher encoder or None, layer)`` of ``hubert.teacher_encoder`` / ``hubert.teacher_layer``."""
    options = hparams["hubert"]
    path, layer = options.get("teacher_encoder"), options.get("teacher_layer")
    if not path:
        return None, None
    if layer is None:
        raise HparamsError("hubert.teacher_encoder is set: hubert.teacher_layer must say which layer")
    teacher = Wav2Vec2Model(hparams["config"])
    load_encoder_checkpoint(teacher, path)  # a teacher of other sizes is named by config field
    return teacher.eval(), int(layer)


def load_kmeans(path: str, num_clusters: int) -> MiniBatchKMeans:
    """A fitted k-means from kmeans.py's file (its size read from the file)."""
    if not os.path.isfile(path):
        raise HparamsError(f"hubert.kmeans_file {path} does not exist: fit it first (python kmeans.py "
                           "hparams/pretrain.yaml --objective hubert)")
    state = load_weights(path)
    if "centroids" not in state:
        raise HparamsError(f"{path}: not a k-means file of kmeans.py (no centroids)")
    clusters, dim = state["centroids"].shape
    if clusters != num_clusters:
        raise HparamsError(f"{path}: holds {clusters} clusters, hubert.num_clusters is {num_clusters}")
    kmeans = MiniBatchKMeans(clusters, dim)
    load_into(kmeans, state, path)
    return kmeans


def cluster_targets(hparams: dict, kmeans: MiniBatchKMeans) -> ClusterTargets:
    teacher, layer = load_teacher(hparams)
    return ClusterTargets(kmeans, hparams["config"], teacher, layer)


def build_model(hparams: dict) -> torch.nn.Module:
    """The pretraining model of ``hparams["objective"]`` on ``hparams["config"]``'s encoder."""
    objective, config = objective_of(hparams), hparams["config"]
    if objective == "wav2vec2":
        return Wav2Vec2Pretraining(config)
    if objective == "bestrq":
        return BestRqPretraining(config, **hparams["bestrq"])
    options = hparams["hubert"]
    targets = cluster_targets(hparams, load_kmeans(options["kmeans_file"], options["num_clusters"]))
    return HubertPretraining(config, options["num_clusters"], targets)


def build_monitor(model: torch.nn.Module, collapse_fraction: float):
    """The per-stage figures of the model's objective."""
    if isinstance(model, Wav2Vec2Pretraining):
        return PretrainingMonitor(model.config.codebook_groups, model.config.codebook_entries,
                                  collapse_fraction)
    classes = model.num_clusters if isinstance(model, HubertPretraining) else model.quantizer.codebook_size
    return MaskedPredictionMonitor(classes, collapse_fraction)
