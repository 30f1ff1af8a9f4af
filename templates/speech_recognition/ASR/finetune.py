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

from speechkit.pretrained.loading import load_best_checkpoint
from speechkit.recipe import fit_and_evaluate, sibling_module, start

prepare, train = sibling_module(__file__, "prepare"), sibling_module(__file__, "train")


def main(argv):
    run = start(argv, prepare=prepare.prepare_manifests)
    hparams = run.hparams
    loaded = load_best_checkpoint(hparams["model"]["modules"], hparams["pretrained_checkpoints"],
                                  hparams["pretrained_min_key"])
    trainable = ", ".join(hparams["trainable_modules"])
    print(f"Pretrained modules loaded: {', '.join(loaded)}; fine-tuning: {trainable}")
    brain = train.build_brain(hparams, run.run_opts, run.manifests)
    datasets = train.dataio_prepare(hparams, run.manifests, brain.tokenizer)
    fit_and_evaluate(brain, hparams, datasets, min_key="WER")
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
