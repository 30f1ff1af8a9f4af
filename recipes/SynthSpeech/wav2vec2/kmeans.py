#!/usr/bin/env python3
"""Fit HuBERT's k-means targets on the training audio (no transcripts), one batch of utterances at a time.

Run (from this folder), with the YAML of pretraining so the features are exactly those pretrain.py labels:
    python kmeans.py hparams/pretrain.yaml --objective hubert                     # MFCCs (iteration 1)
    python kmeans.py hparams/pretrain.yaml --objective hubert --hubert.num_clusters 500 \\
        --hubert.teacher_encoder results/pretrain/hubert/encoder.ckpt --hubert.teacher_layer 3 \\
        --hubert.kmeans_file results/kmeans/iter2/kmeans.ckpt                     # a layer (iteration 2)

The frames of ``kmeans_utterances`` training utterances (a subset drawn from the seed) are read in batches of
``kmeans_batch`` utterances, ``kmeans_passes`` times, each pass in an order drawn from the seed. After every
batch the k-means and its place in the stream are saved (``<output_folder>/kmeans_state.ckpt``, atomically):
a run stopped anywhere and started again with the same command continues where it was and ends with the
same centroids, bit for bit. Each pass logs the mean squared distance of its frames to their centroid and
how many clusters they use; the fitted centroids go to ``hubert.kmeans_file``. One process.
"""
from __future__ import annotations

import json
import logging
import os
import sys

import torch

from speechkit.data import read_audio
from speechkit.errors import DataError
from speechkit.models.wav2vec2 import MiniBatchKMeans
from speechkit.recipe import sibling_module, start

prepare = sibling_module(__file__, "prepare")
objectives = sibling_module(__file__, "objectives")
logger = logging.getLogger(__name__)


def stream_order(ids: list, seed: int, utterances: int, passes: int, batch: int) -> list:
    """The batches of ids of every pass: a seeded subset of ``utterances`` ids, reshuffled each pass."""
    generator = torch.Generator().manual_seed(seed)
    subset = [ids[i] for i in torch.randperm(len(ids), generator=generator)[:utterances].tolist()]
    batches = []
    for _ in range(passes):
        order = [subset[i] for i in torch.randperm(len(subset), generator=generator).tolist()]
        batches.append([order[start:start + batch] for start in range(0, len(order), batch)])
    return batches


def read_batch(manifest: dict, ids: list, data_folder: str) -> tuple:
    waves = [read_audio(manifest[key]["wav"].replace("$data_root", data_folder)) for key in ids]
    lengths = torch.tensor([len(wave) for wave in waves])
    wav = torch.zeros(len(waves), int(lengths.max()))
    for index, wave in enumerate(waves):
        wav[index, : len(wave)] = wave
    return wav, lengths


def save_atomically(state: dict, path: str) -> None:
    temporary = f"{path}.tmp{os.getpid()}"
    torch.save(state, temporary)
    os.replace(temporary, path)


def main(argv):
    run = start(argv, prepare=prepare.prepare_manifests)
    hparams = run.hparams
    options = hparams["hubert"]
    with open(run.manifests["train"], encoding="utf-8") as handle:
        manifest = json.load(handle)
    ids = sorted(key for key, item in manifest.items()
                 if hparams["min_duration"] <= float(item["duration"]) <= hparams["max_duration"])
    if not ids:
        raise DataError(f"{run.manifests['train']}: no utterance between min_duration and max_duration")
    targets = objectives.cluster_targets(hparams, MiniBatchKMeans(1, 1))  # the features; k-means below
    kmeans = MiniBatchKMeans(options["num_clusters"], targets.dim, seed=hparams["seed"])
    targets.kmeans = kmeans
    batches = stream_order(ids, hparams["seed"], hparams["kmeans_utterances"], hparams["kmeans_passes"],
                           hparams["kmeans_batch"])
    state_path = os.path.join(hparams["output_folder"], "kmeans_state.ckpt")
    position = (0, 0)
    if os.path.isfile(state_path):
        saved = torch.load(state_path, weights_only=True)
        kmeans.load_state_dict(saved["kmeans"])
        position = (int(saved["pass"]), int(saved["batch"]))
        logger.info("resuming the k-means fit at pass %d, batch %d (%s)", *position, state_path)
    for pass_index in range(position[0], len(batches)):
        distance, frames_seen, used = 0.0, 0, torch.zeros(kmeans.num_clusters, dtype=torch.bool)
        start_batch = position[1] if pass_index == position[0] else 0
        for batch_index in range(start_batch, len(batches[pass_index])):
            wav, lengths = read_batch(manifest, batches[pass_index][batch_index], hparams["data_folder"])
            if hparams["normalize_audio"]:
                wav, lengths = hparams["normalize"](wav, lengths)
            features, frame_lengths = targets.features(wav, lengths)
            valid = torch.arange(features.shape[1])[None, :] < frame_lengths[:, None]
            frames = features[valid]
            kmeans.partial_fit(frames)
            distances = kmeans.distances(frames).min(1)
            distance += float(distances.values.sum())
            frames_seen += len(frames)
            used[distances.indices] = True
            save_atomically({"kmeans": kmeans.state_dict(), "pass": pass_index, "batch": batch_index + 1},
                            state_path)
        if frames_seen:
            logger.info("k-means pass %d: mean squared distance %.4f over %d frames, %d of %d clusters used",
                        pass_index + 1, distance / frames_seen, frames_seen, int(used.sum()),
                        kmeans.num_clusters)
            print(f"pass {pass_index + 1}: mean squared distance {distance / frames_seen:.4f}, "
                  f"{int(used.sum())}/{kmeans.num_clusters} clusters used", flush=True)
        save_atomically({"kmeans": kmeans.state_dict(), "pass": pass_index + 1, "batch": 0}, state_path)
    if not kmeans.fitted:
        raise DataError("the k-means saw no frames: kmeans_utterances or kmeans_passes is 0")
    folder = os.path.dirname(options["kmeans_file"])
    if folder:
        os.makedirs(folder, exist_ok=True)
    save_atomically(kmeans.state_dict(), options["kmeans_file"])
    print(f"k-means of {kmeans.num_clusters} clusters x {kmeans.dim} dimensions after {int(kmeans.batches)} "
          f"batches -> {options['kmeans_file']}", flush=True)
    return kmeans


if __name__ == "__main__":
    main(sys.argv[1:])
