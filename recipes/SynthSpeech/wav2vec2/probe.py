#!/usr/bin/env python3
"""Probe frozen encoders layer by layer: a linear CTC head per layer, a few minutes, greedy CER per layer.

Run (from this folder, after the pretraining runs named in hparams/probe.yaml's ``sources``):
    python probe.py hparams/probe.yaml
    python probe.py hparams/probe.yaml --sources.hubert null     # leave a source out

Each source is ``fbank`` (the aligned log-mel filterbanks, one "layer"), ``random`` (the encoder of
``config`` at random initialization, seeded) or an encoder file written by pretrain.py (any objective).
Its features of every layer (0: the Transformer's input, after the positional convolution) are computed
once for ``probe_utterances`` labelled training utterances, split by speaker (``probe_eval_fraction`` of
them, whole speakers, for evaluation); one linear CTC head per layer learns characters for ``probe_steps``
steps; the table gives each layer's greedy CER on the held-out speakers, and is also written to
``<output_folder>/probe.md``.
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch

from speechkit.data import read_audio
from speechkit.errors import HparamsError
from speechkit.models.wav2vec2 import Wav2Vec2Model, fbank_frames
from speechkit.models.wav2vec2.probing import (
    CharacterVocabulary,
    evaluate_probes,
    speaker_disjoint_split,
    train_probes,
)
from speechkit.pretrained.loading import load_encoder_checkpoint
from speechkit.recipe import sibling_module, start

prepare = sibling_module(__file__, "prepare")


@torch.no_grad()
def layer_features(source: str, hparams: dict, waves: list) -> list:
    """Per utterance, the list of its ``(frames, dim)`` features of every layer of ``source``."""
    config = hparams["config"]
    encoder = None
    if source != "fbank":
        torch.manual_seed(hparams["seed"])
        encoder = Wav2Vec2Model(config).eval()
        if source != "random":
            if not os.path.isfile(source):
                raise HparamsError(f"probe source {source!r} is neither fbank, random nor an encoder file")
            load_encoder_checkpoint(encoder, source)  # sizes checked: a mismatch names config fields
    out = []
    for start_index in range(0, len(waves), 16):
        chunk = waves[start_index:start_index + 16]
        lengths = torch.tensor([len(w) for w in chunk])
        wav = torch.zeros(len(chunk), int(lengths.max()))
        for index, wave in enumerate(chunk):
            wav[index, : len(wave)] = wave
        wav, lengths = hparams["normalize"](wav, lengths)
        if encoder is None:
            features, frames = fbank_frames(wav, lengths, config)
            layers = [features]
        else:
            encoded = encoder(wav, lengths)
            layers, frames = encoded.hidden_states, encoded.lengths
        for index, count in enumerate(frames.tolist()):
            out.append([layer[index, :count].clone() for layer in layers])
    return out


def main(argv):
    run = start(argv, prepare=prepare.prepare_manifests)
    hparams = run.hparams
    with open(run.manifests["train"], encoding="utf-8") as handle:
        manifest = json.load(handle)
    # The labelled utterances of finetune.yaml: the first probe_utterances of the manifest.
    chosen = {key: manifest[key] for key in list(manifest)[: hparams["probe_utterances"]]}
    train_ids, eval_ids = speaker_disjoint_split(chosen, hparams["probe_eval_fraction"], hparams["seed"],
                                                 run.manifests["train"])
    data_folder = hparams["data_folder"]
    waves = {key: read_audio(chosen[key]["wav"].replace("$data_root", data_folder)) for key in chosen}
    vocabulary = CharacterVocabulary(chosen[key]["text"] for key in train_ids)
    speakers = lambda ids: len({chosen[key]["spk"] for key in ids})  # noqa: E731
    print(f"probe: {len(train_ids)} training utterances ({speakers(train_ids)} speakers), {len(eval_ids)} "
          f"held-out ({speakers(eval_ids)} speakers), {hparams['probe_steps']} steps", flush=True)
    rows = []
    for name, source in hparams["sources"].items():
        if source is None:
            continue
        began = time.perf_counter()
        ids = train_ids + eval_ids
        features = dict(zip(ids, layer_features(str(source), hparams, [waves[key] for key in ids])))
        train = [(features[key], chosen[key]["text"]) for key in train_ids]
        held_out = [(features[key], chosen[key]["text"]) for key in eval_ids]
        heads = train_probes(train, vocabulary, hparams["probe_steps"], hparams["probe_batch_size"],
                             hparams["probe_lr"], hparams["seed"])
        rates = evaluate_probes(heads, held_out, vocabulary, eval_ids)
        minutes = (time.perf_counter() - began) / 60
        for layer, rate in enumerate(rates):
            rows.append(f"| {name} | {layer if len(rates) > 1 else '-'} | {rate:.2f} | {minutes:.1f} |")
        print(f"{name}: best layer {min(range(len(rates)), key=rates.__getitem__)} at {min(rates):.2f}% CER",
              flush=True)
    table = "\n".join(["| source | layer | held-out CER % (greedy) | minutes |", "| --- | --- | --- | --- |",
                       *rows])
    print(table, flush=True)
    with open(os.path.join(hparams["output_folder"], "probe.md"), "w", encoding="utf-8") as handle:
        handle.write(table + "\n")
    return table


if __name__ == "__main__":
    main(sys.argv[1:])
