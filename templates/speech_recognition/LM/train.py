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
from pathlib import Path

import torch

import speechkit
from speechkit import distributed as dist
from speechkit.data import DynamicItemDataset, provides, takes
from speechkit.nn.losses import label_smoothed_nll_loss
from speechkit.tokenizers import SentencePieceTokenizer

sys.path.insert(0, str(Path(__file__).absolute().parent))  # not resolved: a recipe may link to this file
from prepare import prepare_manifests  # noqa: E402  (the recipe's own helper, next to this file)


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
    asr = hparams["asr_model"]

    @takes("text")
    @provides("tokens_bos", "tokens_eos")
    def text_pipeline(text):
        ids = tokenizer.encode(text)
        yield torch.tensor([asr["bos_index"]] + ids, dtype=torch.long)
        yield torch.tensor(ids + [asr["eos_index"]], dtype=torch.long)

    datasets = {}
    for split in ("train", "valid", "test"):
        dataset = DynamicItemDataset.from_json(manifests[split],
                                               replacements={"data_root": hparams["data_folder"]})
        dataset.add_dynamic_item(text_pipeline)
        dataset.set_output_keys(["id", "tokens_bos", "tokens_eos"])
        datasets[split] = dataset
    return datasets


def main(argv):
    hparams_file, run_opts, overrides = speechkit.parse_arguments(argv)
    hparams = speechkit.load_hparams(hparams_file, overrides, run_opts=run_opts)
    dist.init(run_opts)
    speechkit.create_experiment_directory(hparams["output_folder"], hparams_file, overrides,
                                          run_opts=run_opts)
    dist.run_on_main(prepare_manifests, args=(hparams,))  # builds the corpus once; the others wait
    manifests = prepare_manifests(hparams, build=False)
    tokenizer = SentencePieceTokenizer.load(hparams["asr_model"]["tokenizer_file"])
    datasets = text_datasets(hparams, manifests, tokenizer)
    lm = hparams["asr_model"]["lm"]
    recoverables = {"lm": lm, "counter": hparams["epoch_counter"]}
    checkpointer = speechkit.Checkpointer(hparams["save_folder"], recoverables)
    brain = LanguageModelBrain({"lm": lm}, hparams["opt_class"], hparams, run_opts, checkpointer)
    brain.fit(hparams["epoch_counter"], datasets["train"], datasets["valid"],
              train_loader_kwargs=hparams["train_loader_kwargs"],
              valid_loader_kwargs=hparams["eval_loader_kwargs"])
    brain.evaluate(datasets["test"], min_key="loss", test_loader_kwargs=hparams["eval_loader_kwargs"])
    if dist.is_main():
        torch.save(lm.state_dict(), hparams["lm_file"])
        print(f"LM weights written to {hparams['lm_file']}")
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
