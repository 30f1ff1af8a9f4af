#!/usr/bin/env python3
"""Fine-tune chosen modules of a trained recognizer; by default only the LM, the rest frozen.

Run (from this folder, after ``python train.py hparams/train.yaml``):
    python finetune.py hparams/finetune.yaml
    python finetune.py hparams/finetune.yaml --trainable_modules "[lm, ctc_head]"

The weights come from the best checkpoint (``pretrained_min_key``) in ``pretrained_checkpoints``. Frozen
modules are excluded from the optimizer and kept in eval mode, so their weights stay bit-identical.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

import speechkit
from speechkit import distributed as dist
from speechkit.checkpoints import Checkpointer
from speechkit.errors import CheckpointError
from speechkit.stage import Stage

sys.path.insert(0, str(Path(__file__).absolute().parent))  # not resolved: a recipe may link to this file
from prepare import prepare_manifests  # noqa: E402
from train import build_brain, dataio_prepare, load_tokenizer, make_scheduler, trim_edge_silence  # noqa: E402


def load_pretrained(modules: dict, checkpoints_dir: str, min_key: str) -> list:
    """Load every module found in the best checkpoint of ``checkpoints_dir``; returns the loaded names.

    (train.py checkpoints every module of ASR.yaml, the LM included: the one of ../LM when it had run.)
    Weights load with ``weights_only=True``.
    """
    best = Checkpointer(checkpoints_dir).find_checkpoint(min_key=min_key)
    if best is None:
        raise CheckpointError(f"{checkpoints_dir}: no checkpoint with the key '{min_key}' to fine-tune from "
                              "(run train.py first, or set pretrained_checkpoints)")
    loaded = []
    for name, module in modules.items():
        path = best.path / f"{name}.ckpt"
        if path.is_file():
            module.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
            loaded.append(name)
    return loaded


def main(argv):
    hparams_file, run_opts, overrides = speechkit.parse_arguments(argv)
    hparams = speechkit.load_hparams(hparams_file, overrides, run_opts=run_opts)
    dist.init(run_opts)
    speechkit.create_experiment_directory(hparams["output_folder"], hparams_file, overrides,
                                          run_opts=run_opts)
    dist.run_on_main(prepare_manifests, args=(hparams,))  # builds the corpus once; the others wait
    manifests = prepare_manifests(hparams, build=False)
    tokenizer = load_tokenizer(hparams, manifests["train"])
    datasets = dataio_prepare(hparams, trim_edge_silence(hparams, manifests), tokenizer)
    modules = hparams["model"]["modules"]
    loaded = load_pretrained(modules, hparams["pretrained_checkpoints"], hparams["pretrained_min_key"])
    trainable = ", ".join(hparams["trainable_modules"])
    print(f"Pretrained modules loaded: {', '.join(loaded)}; fine-tuning: {trainable}")
    brain = build_brain(hparams, run_opts, tokenizer, manifests["train"])
    train_loader = brain.make_dataloader(datasets["train"], Stage.TRAIN, hparams["train_loader_kwargs"])
    brain.lr_scheduler = make_scheduler(brain, hparams, train_loader)
    brain.fit(hparams["epoch_counter"], train_loader, datasets["valid"],
              train_loader_kwargs=hparams["train_loader_kwargs"],
              valid_loader_kwargs=hparams["eval_loader_kwargs"])
    brain.evaluate(datasets["test"], min_key="WER", test_loader_kwargs=hparams["eval_loader_kwargs"])
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
