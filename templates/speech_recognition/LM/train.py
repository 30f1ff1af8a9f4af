#!/usr/bin/env python3
"""Train the token language model of the ASR step on the training transcripts.

Run (from this folder, after ../Tokenizer):
    python train.py hparams/lm.yaml [--number_of_epochs 5]

Writes ``results/lm/lm.ckpt`` (the best epoch's weights), which ../ASR loads for shallow fusion and
../ASR/finetune.py adapts.
"""
from __future__ import annotations

import math
import sys

import speechkit
from speechkit.data import DynamicItemDataset
from speechkit.nn.losses import label_smoothed_nll_loss
from speechkit.pretrained.loading import save_weights
from speechkit.recipe import fit_and_evaluate, sibling_module, start
from speechkit.tokenizers import SentencePieceTokenizer, prepare_token_targets

prepare = sibling_module(__file__, "prepare")  # the recipe's own data preparation, next to this file


class LanguageModelBrain(speechkit.Brain):
    def compute_forward(self, batch, stage):
        tokens_bos, lengths = batch.tokens_bos
        return self.modules.lm(tokens_bos, lengths)

    def compute_objectives(self, log_probs, batch, stage):
        tokens_eos, lengths = batch.tokens_eos
        return label_smoothed_nll_loss(log_probs, tokens_eos, lengths, label_smoothing=0.0)

    def on_stage_end(self, stage, stage_loss, epoch=None):
        # The loss is the mean over sentences of the per-token NLL, so exp() is a per-token perplexity.
        return {"perplexity": math.exp(min(stage_loss, 50.0))}


def text_datasets(hparams: dict, manifests: dict, tokenizer) -> dict:
    """The splits' transcripts as token sequences, normalised and checked as the ASR step's targets are."""
    asr, data_root = hparams["asr_model"], {"data_root": hparams["data_folder"]}
    datasets = {split: DynamicItemDataset.from_json(manifests[split], replacements=data_root)
                for split in ("train", "valid", "test")}
    return prepare_token_targets(datasets, tokenizer, asr["text_normalizer"], asr["unknown_characters"],
                                 asr["bos_index"], asr["eos_index"], ["id", "tokens_bos", "tokens_eos"])


def main(argv):
    run = start(argv, prepare=prepare.prepare_manifests)
    hparams, lm = run.hparams, run.hparams["asr_model"]["lm"]
    tokenizer = SentencePieceTokenizer.load(hparams["asr_model"]["tokenizer_file"])
    checkpointer = speechkit.Checkpointer(hparams["save_folder"],
                                          {"lm": lm, "counter": hparams["epoch_counter"]})
    brain = LanguageModelBrain({"lm": lm}, hparams["opt_class"], hparams, run.run_opts, checkpointer)
    fit_and_evaluate(brain, hparams, text_datasets(hparams, run.manifests, tokenizer), min_key="loss")
    if brain.context.is_main:
        save_weights(lm.state_dict(), hparams["lm_file"])
        print(f"LM weights written to {hparams['lm_file']}")
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
