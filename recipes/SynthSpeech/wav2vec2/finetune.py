#!/usr/bin/env python3
"""Fine-tune a pretrained encoder with a CTC head on a few labelled utterances: pretrain.py's encoder of
any objective (wav2vec 2.0, HuBERT, BEST-RQ: the same layout), or a published wav2vec 2.0, HuBERT, WavLM or
data2vec-audio checkpoint in the transformers format.

Run (from this folder):
    python finetune.py hparams/finetune.yaml                                    # from pretrain.py's encoder
    python finetune.py hparams/finetune.yaml --pretrained_encoder results/pretrain/hubert/encoder.ckpt \
        --output_folder results/finetune/hubert
    python finetune.py hparams/finetune.yaml --pretrained_encoder null --output_folder results/scratch
    python finetune.py hparams/finetune.yaml --huggingface_encoder facebook/wav2vec2-base  # a published one

The feature encoder stays frozen, the Transformer too for the first freeze_encoder_updates updates (only the
head learns); time and channel masking regularize; the rate follows a tri-stage schedule. The test set is
decoded with CTC prefix beam search over the training words (and the LM of ../LM with --lm_weight).
"""
from __future__ import annotations

import contextlib
import sys

import torch

import speechkit
from speechkit.data import DynamicItemDataset, provides, read_audio, takes
from speechkit.decoding import Lexicon, ctc_greedy_decode, ctc_prefix_beam_search
from speechkit.metrics import ErrorRateStats
from speechkit.nn.losses import ctc_loss
from speechkit.pretrained.huggingface_encoders import load_encoder
from speechkit.pretrained.loading import load_into, load_weights
from speechkit.recipe import fit_and_evaluate, sibling_module, start
from speechkit.stage import Stage
from speechkit.tokenizers import SentencePieceTokenizer

prepare = sibling_module(__file__, "prepare")  # links to ../ASR/prepare.py: the same corpus


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
            hyps = self.decode(log_probs, lengths, stage)
            # vocab_size is an upper bound: ids past the tokenizer's end are never targets; drop them.
            size = self.tokenizer.vocab_size
            texts = [" ".join(self.tokenizer.decode([t for t in hyp if t < size]).split()) for hyp in hyps]
            self.wer_stats.append(batch.id, texts, batch.text)
            self.cer_stats.append(batch.id, texts, batch.text)
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
        if stage != Stage.TRAIN:
            self.wer_stats, self.cer_stats = ErrorRateStats(), ErrorRateStats(cer=True)

    def on_stage_end(self, stage, stage_loss, epoch=None):
        if stage == Stage.TRAIN:
            return None
        if stage == Stage.TEST and self.context.is_main:
            self.wer_stats.write_stats(self.hparams.wer_file)
        return {"WER": self.wer_stats.summarize("error_rate"), "CER": self.cer_stats.summarize("error_rate")}


def build_encoder(hparams: dict):
    """The YAML's encoder with pretrain.py's weights (``pretrained_encoder``), or a transformers folder's
    encoder (``huggingface_encoder``: wav2vec2, hubert, wavlm or data2vec-audio) with the YAML's fine-tuning
    masking; random with neither."""
    encoder = hparams["encoder"]
    if hparams["huggingface_encoder"]:
        loaded, _, _ = load_encoder(hparams["huggingface_encoder"], hparams["save_folder"] + "/huggingface")
        encoder = getattr(loaded, "wav2vec2", loaded)
        masking = {name: getattr(hparams["config"], name) for name in (
            "mask_prob", "mask_length", "mask_channel_prob", "mask_channel_length")}
        encoder.config = encoder.config.replace(**masking)
    elif hparams["pretrained_encoder"]:
        load_into(encoder, load_weights(hparams["pretrained_encoder"]), hparams["pretrained_encoder"])
    # Frozen from the start (fairseq's feature_grad_mult 0). A part of `encoder`, so not a trainable_modules
    # entry: Brain leaves parameters without requires_grad out of the optimizer (and DDP), in train mode.
    encoder.feature_encoder.requires_grad_(False)
    return encoder


def dataio_prepare(hparams: dict, manifests: dict, tokenizer) -> dict:
    @takes("wav")
    @provides("sig")
    def audio_pipeline(wav):
        return read_audio(wav)

    @takes("text")
    @provides("tokens")
    def text_pipeline(text):
        return torch.tensor(tokenizer.encode(text), dtype=torch.long)

    datasets = {}
    for split, path in manifests.items():
        dataset = DynamicItemDataset.from_manifest(path, replacements={"data_root": hparams["data_folder"]})
        if split == "train":  # the labelled subset: the first num_labelled utterances of the manifest
            dataset = dataset.filtered_sorted(key_max_value={"duration": hparams["max_duration"]},
                                              select_n=hparams["num_labelled"])
        elif split == "valid":  # a subset is enough to follow training; the test set is scored whole
            dataset = dataset.filtered_sorted(select_n=hparams["valid_utterances"])
        dataset.add_dynamic_item(audio_pipeline)
        dataset.add_dynamic_item(text_pipeline)
        dataset.set_output_keys(["id", "sig", "text", "tokens"])
        datasets[split] = dataset
    return datasets


def main(argv):
    run = start(argv, prepare=prepare.prepare_manifests)
    hparams, data_root = run.hparams, {"data_root": run.hparams["data_folder"]}
    # The character tokenizer of ../Tokenizer; trained here on the training transcripts when missing.
    tokenizer = SentencePieceTokenizer.load_or_train(
        hparams["tokenizer_file"], run.manifests["train"], vocab_size=hparams["vocab_size"],
        model_type="char", pad_id=hparams["blank_index"], unk_id=1, bos_id=hparams["bos_index"],
        eos_id=hparams["eos_index"], replacements=data_root, hard_vocab_limit=False)
    datasets = dataio_prepare(hparams, run.manifests, tokenizer)
    modules = {"normalize": hparams["normalize"], "encoder": build_encoder(hparams),
               "ctc_head": hparams["ctc_head"]}
    checkpointer = speechkit.Checkpointer(hparams["save_folder"],
                                          {**modules, "counter": hparams["epoch_counter"]})
    # The tri-stage lr_scheduler of the YAML gets the run's optimizer steps from Brain when fit starts.
    brain = CTCFineTuning(modules, hparams["opt_class"], hparams, run.run_opts, checkpointer)
    brain.tokenizer = tokenizer
    brain.lexicon = (Lexicon.from_manifest(run.manifests["train"], tokenizer, data_root)
                     if hparams["closed_vocabulary"] else None)
    brain.lm = None
    if hparams["lm_weight"]:
        load_into(hparams["lm"], load_weights(hparams["lm_checkpoint"]), hparams["lm_checkpoint"])
        brain.lm = hparams["lm"].to(brain.device).eval()
    fit_and_evaluate(brain, hparams, datasets, min_key="WER")
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
