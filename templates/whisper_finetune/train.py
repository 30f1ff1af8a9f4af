#!/usr/bin/env python3
"""Fine-tune a Whisper model (a transformers folder: a Hub id, a local folder or a URL) on your own
transcribed audio, and write the result as a Whisper folder.

Run (from this folder):
    python train.py hparams/train.yaml --whisper openai/whisper-small --language en
    python train.py hparams/train.yaml --freeze_encoder True --precision bf16   # decoder only, bf16
    torchrun --nproc_per_node=2 train.py hparams/train.yaml                      # several processes

The decoder learns each transcript after the prompt of the request (start of transcript, language, task,
no timestamps) with teacher-forced cross-entropy (label smoothing optional); the waveform augmentations and
SpecAugment on the log-mels regularize; the rate warms up then decays. Valid and test sets are decoded with
speechkit's Whisper search and scored (WER) after Whisper's text normalisation. The best kept checkpoint by
valid WER is written to ``export_folder`` in the transformers format (``speechkit transcribe``/``serve``).
"""
from __future__ import annotations

import sys

import torch

import speechkit
from speechkit.data import DynamicItemDataset
from speechkit.errors import DataError
from speechkit.metrics import TranscriptErrorRates
from speechkit.models.whisper.finetuning import WhisperTrainingFeatures, teacher_forcing, token_cross_entropy
from speechkit.models.whisper.transcribe import DecodingOptions, WhisperTranscriber
from speechkit.pretrained.huggingface.whisper import export_whisper
from speechkit.pretrained.whisper_finetuning import load_for_finetuning, training_prompt, wer_normalizer
from speechkit.recipe import fit_and_evaluate, sibling_module, start
from speechkit.stage import Stage

prepare = sibling_module(__file__, "prepare")  # the recipe's own data preparation, next to this file


class WhisperFineTuning(speechkit.Brain):
    def compute_forward(self, batch, stage):
        hp, (wavs, lengths) = self.hparams, batch.sig
        if stage == Stage.TRAIN and hp.waveform_augmentation is not None:
            wavs, lengths = hp.waveform_augmentation(wavs, lengths, self.item_seeds(batch.id))
        features = self.modules.features(wavs, lengths)  # SpecAugment in training mode only
        inputs, input_lengths, targets = teacher_forcing(*batch.tokens, self.prompt, self.end_of_text,
                                                         hp.learn_prompt)
        return self.modules.whisper(features, inputs, input_lengths), targets, features

    def compute_objectives(self, out, batch, stage):
        logits, targets, features = out
        loss = token_cross_entropy(logits, targets, self.hparams.label_smoothing)
        if stage != Stage.TRAIN:
            transcripts = self.transcriber.decode_features(features, [self.hparams.language] * len(batch.id),
                                                           self.decoding)
            self.error_rates.append(batch.id, [t.text for t in transcripts], batch.text)
        return loss

    def on_stage_start(self, stage, epoch=None):
        if stage != Stage.TRAIN:  # decoding runs on the model itself (no DDP wrapper outside training)
            self.transcriber = WhisperTranscriber(self.modules.whisper, self.folder.generation,
                                                  self.folder.tokenizer)
            self.error_rates = TranscriptErrorRates(normalizer=self.normalizer)

    def on_stage_end(self, stage, stage_loss, epoch=None):
        if stage == Stage.TRAIN:
            return None
        # summarize gathers every process's utterances (a collective), so the WER file holds them all.
        rates = self.error_rates.summarize()
        if stage == Stage.TEST and self.context.is_main:
            self.error_rates.write_stats(self.hparams.wer_file)
        return rates


def dataio_prepare(hparams: dict, manifests: dict, tokenizer, room: int) -> dict:
    """Datasets of the splits: audio, and the transcript's tokens (with the leading space Whisper's text
    starts with); a transcript longer than the decoder's ``room`` tokens is refused, naming its id."""

    def text_pipeline(utterance_id, text):
        tokens = tokenizer.encode(" " + " ".join(str(text).split()))
        if len(tokens) > room:
            raise DataError(f"utterance {utterance_id}: its transcript is {len(tokens)} tokens, more than "
                            f"the {room} the Whisper decoder has room for after the prompt")
        return torch.tensor(tokens, dtype=torch.long)

    datasets = {}
    for split, path in manifests.items():
        dataset = DynamicItemDataset.from_manifest(path, replacements={"data_root": hparams["data_folder"]})
        if split == "train":
            dataset = dataset.filtered_sorted(key_max_value={"duration": hparams["max_duration"]})
        elif split == "valid":
            dataset = dataset.filtered_sorted(select_n=hparams["valid_utterances"])
        dataset.add_dynamic_item(hparams["audio_policy"], takes=["wav"], provides=["sig"])  # 16 kHz mono
        dataset.add_dynamic_item(text_pipeline, takes=["id", "text"], provides=["tokens"])
        dataset.set_output_keys(["id", "sig", "text", "tokens"])
        datasets[split] = dataset
    return datasets


def main(argv):
    run = start(argv, prepare=prepare.prepare_manifests)
    hparams = run.hparams
    folder = load_for_finetuning(hparams["whisper"], hparams["save_folder"] + "/whisper",
                                 freeze_encoder=hparams["freeze_encoder"], dropout=hparams["dropout"])
    prompt = training_prompt(folder, hparams["language"], hparams["task"])
    room = folder.model.config.max_target_positions - len(prompt) - 1  # the end of text needs a position
    datasets = dataio_prepare(hparams, run.manifests, folder.tokenizer, room)
    modules = {"whisper": folder.model,
               "features": WhisperTrainingFeatures(folder.model.config.num_mel_bins, hparams["specaugment"])}
    checkpointer = speechkit.Checkpointer(hparams["save_folder"],
                                          {"whisper": folder.model, "counter": hparams["epoch_counter"]})
    brain = WhisperFineTuning(modules, hparams["opt_class"], hparams, run.run_opts, checkpointer)
    brain.folder, brain.prompt, brain.end_of_text = folder, prompt, folder.generation.eos_token_id
    brain.normalizer = wer_normalizer(folder, hparams["wer_normalizer"])
    brain.decoding = DecodingOptions(language=hparams["language"], task=hparams["task"],
                                     beam_size=hparams["beam_size"], max_new_tokens=hparams["max_new_tokens"])
    fit_and_evaluate(brain, hparams, datasets, min_key="WER")  # the test set with the best checkpoint
    if brain.context.is_main:  # the best checkpoint, written back in the transformers format
        export_whisper(folder, hparams["export_folder"])
    return brain


if __name__ == "__main__":
    main(sys.argv[1:])
