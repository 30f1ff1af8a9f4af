#!/usr/bin/env python3
"""Fine-tune a pretrained self-supervised encoder (wav2vec 2.0, HuBERT, WavLM, data2vec-audio) with a CTC
head on your own transcribed audio.

Run (from this folder):
    python train.py hparams/train.yaml --huggingface_encoder facebook/hubert-base-ls960  # a published one
    python train.py hparams/train.yaml --huggingface_encoder path/to/transformers/folder
    python train.py hparams/train.yaml --pretrained_encoder encoder.ckpt   # speechkit's own pretraining
    python train.py hparams/train.yaml                                     # the YAML's encoder, random

The feature encoder stays frozen, the Transformer too for the first ``freeze_encoder_updates`` updates (only
the head learns); time and channel masking and layer drop regularize; the rate follows a tri-stage schedule.
The test set is decoded with CTC prefix beam search (over the training words with ``closed_vocabulary``,
plus an LM with ``lm_weight``). At the end the run writes ``<output_folder>/inference.yaml``, the model
folder's hyperparams for ``speechkit export`` (the encoder's sizes filled in).
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import torch

import speechkit
from speechkit.data import DynamicItemDataset
from speechkit.decoding import Lexicon, ctc_greedy_decode, ctc_prefix_beam_search
from speechkit.metrics import TranscriptErrorRates
from speechkit.nn.losses import ctc_loss
from speechkit.pretrained.huggingface.encoders import load_encoder, write_inference_yaml
from speechkit.pretrained.loading import load_encoder_checkpoint, load_language_model
from speechkit.recipe import fit_and_evaluate, sibling_module, start
from speechkit.stage import Stage
from speechkit.tokenizers import SentencePieceTokenizer, prepare_token_targets
from speechkit.tokenizers.items import hypothesis_texts

prepare = sibling_module(__file__, "prepare")  # the recipe's own data preparation, next to this file

#: Settings of the fine-tuning run that replace a loaded encoder's own (a published config masks for
#: pretraining, not for fine-tuning).
FINETUNING_SETTINGS = ("mask_prob", "mask_length", "mask_channel_prob", "mask_channel_length", "layer_drop")


class CTCFineTuning(speechkit.Brain):
    def compute_forward(self, batch, stage):
        wavs, lengths = self.modules.normalize(*batch.sig)
        frozen = stage == Stage.TRAIN and self.optimizer_steps < self.hparams.freeze_encoder_updates
        with torch.no_grad() if frozen else contextlib.nullcontext():
            encoded = self.modules.encoder(wavs, lengths)
        return self.modules.ctc_head(encoded.output), encoded.lengths

    def compute_objectives(self, out, batch, stage):
        (log_probs, lengths), (tokens, token_lengths) = out, batch.tokens
        loss = ctc_loss(log_probs, tokens, lengths, token_lengths, blank_index=self.hparams.blank_index)
        if stage != Stage.TRAIN:
            texts = hypothesis_texts(self.tokenizer, self.decode(log_probs, lengths, stage))
            self.error_rates.append(batch.id, texts, batch.text)
        return loss

    def decode(self, log_probs, lengths, stage):
        hp = self.hparams
        if stage == Stage.VALID or hp.decoding == "greedy":
            return ctc_greedy_decode(log_probs, lengths, hp.blank_index)
        return ctc_prefix_beam_search(
            log_probs, lengths, beam_size=hp.beam_size, blank_index=hp.blank_index,
            blank_skip_threshold=0.999, lm=self.lm, lm_weight=hp.lm_weight, bos_index=hp.bos_index,
            eos_index=hp.eos_index, length_bonus=hp.length_bonus, lexicon=self.lexicon)

    def on_stage_start(self, stage, epoch=None):
        if stage != Stage.TRAIN:  # scored on normalised text, as the targets were trained
            self.error_rates = TranscriptErrorRates(normalizer=self.hparams.text_normalizer)

    def on_stage_end(self, stage, stage_loss, epoch=None):
        if stage == Stage.TRAIN:
            return None
        rates = self.error_rates.summarize()  # every process's utterances (a collective): the file holds all
        if stage == Stage.TEST and self.context.is_main:
            self.error_rates.write_stats(self.hparams.wer_file)
        return rates


def build_encoder(hparams: dict):
    """A transformers folder's encoder (``huggingface_encoder``: wav2vec2, hubert, wavlm or data2vec-audio;
    local, Hub id or URL), or the YAML's encoder with speechkit's pretrained weights (``pretrained_encoder``),
    or the YAML's encoder at random; with the YAML ``config``'s fine-tuning settings (masking, layer drop)."""
    encoder = hparams["encoder"]
    if hparams["huggingface_encoder"]:
        loaded, _, _ = load_encoder(hparams["huggingface_encoder"], hparams["save_folder"] + "/huggingface")
        encoder = getattr(loaded, "wav2vec2", loaded)
        settings = {name: getattr(hparams["config"], name) for name in FINETUNING_SETTINGS}
        encoder.config = encoder.config.replace(**settings)
    elif hparams["pretrained_encoder"]:
        load_encoder_checkpoint(encoder, hparams["pretrained_encoder"])  # sizes checked by config field
    # Frozen from the start (fairseq's feature_grad_mult 0). A part of `encoder`, so not a trainable_modules
    # entry: Brain leaves parameters without requires_grad out of the optimizer (and DDP), in train mode.
    encoder.feature_encoder.requires_grad_(False)
    return encoder


def dataio_prepare(hparams: dict, manifests: dict, tokenizer) -> dict:
    """Audio through the audio policy; CTC targets from the normalised text (unspellable characters are
    refused unless ``unknown_characters`` says otherwise)."""
    datasets = {}
    for split, path in manifests.items():
        dataset = DynamicItemDataset.from_manifest(path, replacements={"data_root": hparams["data_folder"]})
        if split == "train":  # the labelled subset: the first num_labelled utterances of the manifest
            dataset = dataset.filtered_sorted(key_max_value={"duration": hparams["max_duration"]},
                                              select_n=hparams["num_labelled"])
        elif split == "valid":  # a subset is enough to follow training; the test set is scored whole
            dataset = dataset.filtered_sorted(select_n=hparams["valid_utterances"])
        dataset.add_dynamic_item(hparams["audio_policy"], takes=["wav"], provides=["sig"])
        datasets[split] = dataset
    return prepare_token_targets(
        datasets, tokenizer, hparams["text_normalizer"], hparams["unknown_characters"], hparams["bos_index"],
        hparams["eos_index"], output_keys=["id", "sig", "text", "tokens"])


def main(argv):
    run = start(argv, prepare=prepare.prepare_manifests)
    hparams, data_root = run.hparams, {"data_root": run.hparams["data_folder"]}
    encoder = build_encoder(hparams)  # first: a checkpoint that does not fit stops the run before any work
    # Trained on the training transcripts unless tokenizer_file exists (the ASR template's: to share its LM).
    tokenizer = SentencePieceTokenizer.load_or_train(
        hparams["tokenizer_file"], run.manifests["train"], vocab_size=hparams["vocab_size"],
        model_type=hparams["token_type"], pad_id=hparams["blank_index"], unk_id=1,
        bos_id=hparams["bos_index"], eos_id=hparams["eos_index"], replacements=data_root,
        hard_vocab_limit=hparams["token_type"] != "char", normalizer=hparams["text_normalizer"],
        unknown_characters=hparams["unknown_characters"])
    datasets = dataio_prepare(hparams, run.manifests, tokenizer)
    modules = {"normalize": hparams["normalize"], "encoder": encoder,
               "ctc_head": hparams["ctc_head"](d_model=encoder.config.d_model)}
    checkpointer = speechkit.Checkpointer(hparams["save_folder"],
                                          {**modules, "counter": hparams["epoch_counter"]})
    # The tri-stage lr_scheduler of the YAML gets the run's optimizer steps from Brain when fit starts.
    brain = CTCFineTuning(modules, hparams["opt_class"], hparams, run.run_opts, checkpointer)
    brain.tokenizer = tokenizer
    brain.lexicon = (Lexicon.from_manifest(run.manifests["train"], tokenizer, data_root,
                                           normalizer=hparams["text_normalizer"])
                     if hparams["closed_vocabulary"] else None)
    lm_loaded = load_language_model(hparams["lm"], hparams["lm_checkpoint"], hparams["lm_weight"])
    brain.lm = hparams["lm"].to(brain.device).eval() if lm_loaded and hparams["lm_weight"] else None
    fit_and_evaluate(brain, hparams, datasets, min_key="WER")
    if brain.context.is_main:
        write_inference_yaml(hparams["inference_hparams"], Path(hparams["output_folder"]) / "inference.yaml",
                             encoder.config, hparams["vocab_size"])
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
