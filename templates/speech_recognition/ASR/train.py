#!/usr/bin/env python3
"""Train a speech recognizer: encoder + CTC (+ attention decoder), decoded greedily or by beams with an LM.

Run (from this folder):
    python train.py hparams/train.yaml                       # builds the corpus on first use
    python train.py hparams/train.yaml --precision bf16 --number_of_epochs 2
    torchrun --nproc_per_node=2 train.py hparams/train.yaml  # several processes

The model lives in hparams/ASR.yaml (included by train.yaml and finetune.yaml). Only the modules listed in
``trainable_modules`` learn; the others stay frozen, so the same script fine-tunes (see finetune.py).
"""
from __future__ import annotations

import os
import sys

import torch

import speechkit
from speechkit.data import DynamicItemDataset
from speechkit.data.trim import trim_splits_once
from speechkit.decoding import Lexicon, WordList, decode
from speechkit.distributed import run_on_main
from speechkit.metrics import TranscriptErrorRates
from speechkit.nn.losses import ctc_loss, label_smoothed_nll_loss
from speechkit.pretrained.loading import load_language_model
from speechkit.recipe import fit_and_evaluate, sibling_module, start
from speechkit.stage import Stage
from speechkit.tokenizers import SentencePieceTokenizer, prepare_token_targets
from speechkit.tokenizers.items import hypothesis_texts

prepare = sibling_module(__file__, "prepare")  # the recipe's own data preparation, next to this file

#: Modules trained by the speech losses (CTC, attention); the LM learns from the transcripts alone.
ACOUSTIC_MODULES = frozenset({"encoder", "ctc_head", "decoder"})


class ASR(speechkit.Brain):
    """compute_forward: waveform -> features -> encoder -> CTC (and decoder, LM when they learn)."""

    def compute_forward(self, batch, stage):
        hp, out = self.hparams, {}
        tokens_bos, bos_lengths = batch.tokens_bos
        if stage != Stage.TRAIN or self.trainable_modules & ACOUSTIC_MODULES:
            wavs, wav_lengths = batch.sig
            if stage == Stage.TRAIN and getattr(hp, "waveform_augmentation", None) is not None:
                wavs, wav_lengths = hp.waveform_augmentation(wavs, wav_lengths, self.item_seeds(batch.id))
            feats, lengths = hp.model["normalize"](*hp.model["compute_features"](wavs, wav_lengths))
            if stage == Stage.TRAIN and hp.use_augmentation:
                feats, lengths = hp.model["augment"](feats, lengths)
            encoded, encoded_lengths = self.modules.encoder(feats, lengths)
            out = {"encoded": encoded, "encoded_lengths": encoded_lengths,
                   "ctc_log_probs": self.modules.ctc_head(encoded)}
            if self.hparams.ctc_weight < 1.0:
                out["att_log_probs"] = self.modules.decoder(tokens_bos, bos_lengths, encoded, encoded_lengths)
        if "lm" in self.trainable_modules:
            out["lm_log_probs"] = self.modules.lm(tokens_bos, bos_lengths)
        return out

    def compute_objectives(self, out, batch, stage):
        (tokens, token_lens), (tokens_eos, eos_lengths) = batch.tokens, batch.tokens_eos
        hp, loss = self.hparams, torch.zeros((), device=self.device)
        if "ctc_log_probs" in out:
            loss = hp.ctc_weight * ctc_loss(out["ctc_log_probs"], tokens, out["encoded_lengths"], token_lens,
                                            blank_index=hp.model["blank_index"])
            if hp.ctc_weight < 1.0:
                att = label_smoothed_nll_loss(out["att_log_probs"], tokens_eos, eos_lengths,
                                              label_smoothing=hp.label_smoothing)
                loss = loss + (1.0 - hp.ctc_weight) * att
        if "lm_log_probs" in out:
            loss = loss + label_smoothed_nll_loss(out["lm_log_probs"], tokens_eos, eos_lengths)
        if stage != Stage.TRAIN and self.decode_now:
            indices = {f"{name}_index": hp.model[f"{name}_index"] for name in ("blank", "bos", "eos")}
            hyps = decode(hp.decoding if stage == Stage.TEST else hp.valid_decoding, out["ctc_log_probs"],
                          out["encoded_lengths"], **indices, beam_size=hp.beam_size, lm=self.modules.lm,
                          lm_weight=hp.lm_weight, length_bonus=hp.length_bonus, lexicon=self.lexicon,
                          encoded=out["encoded"], decoder=self.modules.decoder,
                          ctc_weight=hp.decode_ctc_weight)
            texts = hypothesis_texts(self.tokenizer, hyps)
            self.hypotheses.update(zip(batch.id, texts))  # id -> decoded text (this process's items)
            self.error_rates.append(batch.id, texts, batch.text)
        return loss

    def on_stage_start(self, stage, epoch=None):
        every = max(1, int(self.hparams.valid_decoding_every))
        self.decode_now = stage == Stage.TEST or epoch is None or epoch % every == 0
        if stage != Stage.TRAIN:  # scored on normalised text, as the targets were trained
            self.error_rates = TranscriptErrorRates(self.hparams.model["text_normalizer"])
            self.hypotheses = {}

    def on_stage_end(self, stage, stage_loss, epoch=None):
        if stage == Stage.TRAIN or not self.decode_now:
            return None
        rates = self.error_rates.summarize()  # every process's utterances (a collective): the file holds all
        if stage == Stage.TEST and self.context.is_main:
            self.error_rates.write_stats(self.hparams.wer_file)
        return rates


def dataio_prepare(hparams: dict, manifests: dict, tokenizer) -> dict:
    """The splits' datasets, edge silence trimmed (train.yaml): audio and the normalised text's tokens, read
    lazily; characters the tokenizer cannot spell are counted first (refused unless unknown_characters)."""
    model, data_root = hparams["model"], {"data_root": hparams["data_folder"]}
    manifests = trim_splits_once(manifests, hparams["trim_splits"], os.path.join(hparams["output_folder"],
                                 "manifests"), data_root, margin=hparams["trim_margin"],
                                 num_workers=min(8, os.cpu_count() or 1))
    datasets = {}
    for split, path in manifests.items():
        dataset = DynamicItemDataset.from_json(path, replacements=data_root)
        if split == "train":
            dataset = dataset.filtered_sorted(key_max_value={"duration": hparams["max_train_duration"]})
        dataset.add_dynamic_item(hparams["audio_policy"], takes=["wav"], provides=["sig"])
        datasets[split] = dataset
    return prepare_token_targets(datasets, tokenizer, model["text_normalizer"], model["unknown_characters"],
                                 model["bos_index"], model["eos_index"],
                                 output_keys=["id", "sig", "text", "tokens_bos", "tokens_eos", "tokens"])


def build_brain(hparams: dict, run_opts, manifests: dict) -> ASR:
    """The Brain, its tokenizer (trained on the training transcripts if missing) and lexicon."""
    model, data_root = hparams["model"], {"data_root": hparams["data_folder"]}
    tokenizer = SentencePieceTokenizer.load_or_train(
        model["tokenizer_file"], manifests["train"], vocab_size=model["vocab_size"],
        model_type=model["token_type"], pad_id=model["blank_index"], unk_id=1, bos_id=model["bos_index"],
        eos_id=model["eos_index"], replacements=data_root, hard_vocab_limit=False,
        normalizer=model["text_normalizer"], unknown_characters=model["unknown_characters"])
    # No attention loss: the decoder would get no gradient (and stall DDP), so it stays frozen.
    trainable = [m for m in hparams["trainable_modules"] if m != "decoder" or hparams["ctc_weight"] < 1.0]
    load_language_model(model["lm"], hparams.get("lm_checkpoint"), hparams["lm_weight"], "lm" in trainable)
    modules, counter = model["modules"], hparams["epoch_counter"]
    checkpointer = speechkit.Checkpointer(hparams["save_folder"], {**modules, "counter": counter})
    brain = ASR(modules, hparams["opt_class"], hparams, run_opts, checkpointer, trainable_modules=trainable)
    brain.tokenizer, brain.lexicon = tokenizer, None
    if hparams["closed_vocabulary"]:  # its words go to vocabulary.txt too (hparams/inference_vocabulary.yaml)
        words = WordList.from_manifest(manifests["train"], data_root, normalizer=model["text_normalizer"])
        run_on_main(words.save, args=(os.path.join(hparams["output_folder"], "vocabulary.txt"),))
        brain.lexicon = Lexicon.from_tokenizer(tokenizer, words.words)
    return brain


def main(argv):
    run = start(argv, prepare=prepare.prepare_manifests)
    brain = build_brain(run.hparams, run.run_opts, run.manifests)
    datasets = dataio_prepare(run.hparams, run.manifests, brain.tokenizer)
    fit_and_evaluate(brain, run.hparams, datasets, min_key="WER")
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
