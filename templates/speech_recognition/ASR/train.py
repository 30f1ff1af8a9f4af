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
from pathlib import Path

import torch

import speechkit
from speechkit import distributed as dist
from speechkit.data import DynamicItemDataset, provides, read_audio, takes
from speechkit.data.manifest import load_manifest
from speechkit.data.trim import trim_manifest_files
from speechkit.decoding import AttentionBeamSearch, Lexicon, ctc_greedy_decode, ctc_prefix_beam_search
from speechkit.errors import HparamsError
from speechkit.metrics import ErrorRateStats
from speechkit.nn.losses import ctc_loss, label_smoothed_nll_loss
from speechkit.stage import Stage
from speechkit.tokenizers import SentencePieceTokenizer

sys.path.insert(0, str(Path(__file__).absolute().parent))  # not resolved: a recipe may link to this file
from prepare import prepare_manifests  # noqa: E402  (the recipe's own helper, next to this file)

#: Modules trained by the speech losses (CTC, attention); the LM learns from the transcripts alone.
ACOUSTIC_MODULES = frozenset({"encoder", "ctc_head", "decoder"})


class ASR(speechkit.Brain):
    """compute_forward: waveform -> features -> encoder -> CTC (and decoder, LM when they learn)."""

    def compute_forward(self, batch, stage):
        model, out = self.hparams.model, {}
        tokens_bos, bos_lengths = batch.tokens_bos
        if stage != Stage.TRAIN or self.trainable & ACOUSTIC_MODULES:
            wavs, wav_lengths = batch.sig
            feats, lengths = model["compute_features"](wavs, wav_lengths)
            feats, lengths = model["normalize"](feats, lengths)
            if stage == Stage.TRAIN and self.hparams.use_augmentation:
                feats, lengths = model["augment"](feats, lengths)
            encoded, encoded_lengths = self.modules.encoder(feats, lengths)
            out = {"encoded": encoded, "encoded_lengths": encoded_lengths,
                   "ctc_log_probs": self.modules.ctc_head(encoded)}
            if self.hparams.ctc_weight < 1.0:
                out["att_log_probs"] = self.modules.decoder(tokens_bos, bos_lengths, encoded, encoded_lengths)
        if "lm" in self.trainable:
            out["lm_log_probs"] = self.modules.lm(tokens_bos, bos_lengths)
        return out

    def compute_objectives(self, out, batch, stage):
        tokens, token_lengths = batch.tokens
        tokens_eos, eos_lengths = batch.tokens_eos
        hp = self.hparams
        loss = torch.zeros((), device=self.device)
        if "ctc_log_probs" in out:
            ctc = ctc_loss(out["ctc_log_probs"], tokens, out["encoded_lengths"], token_lengths,
                           blank_index=hp.model["blank_index"])
            loss = hp.ctc_weight * ctc
            if hp.ctc_weight < 1.0:
                att = label_smoothed_nll_loss(out["att_log_probs"], tokens_eos, eos_lengths,
                                              label_smoothing=hp.label_smoothing)
                loss = loss + (1.0 - hp.ctc_weight) * att
        if "lm_log_probs" in out:
            loss = loss + label_smoothed_nll_loss(out["lm_log_probs"], tokens_eos, eos_lengths)
        if stage != Stage.TRAIN and self.decode_now:
            hyps = self.decode(out, hp.decoding if stage == Stage.TEST else hp.valid_decoding)
            # The output layer may be larger than the tokenizer (hard_vocab_limit=False can give fewer
            # pieces than vocab_size): ids past its end are never targets, and are dropped if ever emitted.
            size = self.tokenizer.vocab_size
            texts = [" ".join(self.tokenizer.decode([t for t in h if t < size]).split()) for h in hyps]
            self.hypotheses.update(zip(batch.id, texts))
            self.wer_stats.append(batch.id, texts, batch.text)
            self.cer_stats.append(batch.id, texts, batch.text)
        return loss

    def decode(self, out, search: str):
        """Token-id hypotheses of a batch with ``search`` (greedy, ctc_beam or attention)."""
        hp, model = self.hparams, self.hparams.model
        log_probs, lengths = out["ctc_log_probs"], out["encoded_lengths"]
        lm = self.modules.lm if hp.lm_weight else None
        if search == "greedy":
            return ctc_greedy_decode(log_probs, lengths, model["blank_index"])
        if search == "ctc_beam":
            return ctc_prefix_beam_search(
                log_probs, lengths, beam_size=hp.beam_size, blank_index=model["blank_index"],
                blank_skip_threshold=0.999, lm=lm, lm_weight=hp.lm_weight, bos_index=model["bos_index"],
                eos_index=model["eos_index"], length_bonus=hp.length_bonus, lexicon=self.lexicon)
        if search == "attention":
            beam_search = AttentionBeamSearch(
                self.modules.decoder, model["bos_index"], model["eos_index"], beam_size=hp.beam_size,
                ctc_weight=hp.decode_ctc_weight, blank_index=model["blank_index"], lm=lm,
                lm_weight=hp.lm_weight)
            return beam_search(out["encoded"], lengths, log_probs)
        raise HparamsError(f"decoding must be greedy, ctc_beam or attention, got {search!r}")

    def on_stage_start(self, stage, epoch=None):
        if stage == Stage.TRAIN:
            for name, module in self.modules.items():
                if name not in self.trainable:
                    module.eval()  # frozen: no dropout, no running statistics updated
        every = max(1, int(self.hparams.valid_decoding_every))
        self.decode_now = stage == Stage.TEST or epoch is None or epoch % every == 0
        if stage != Stage.TRAIN:
            self.wer_stats, self.cer_stats = ErrorRateStats(), ErrorRateStats(cer=True)
            self.hypotheses = {}  # id -> decoded text (this process's items)

    def on_stage_end(self, stage, stage_loss, epoch=None):
        if stage == Stage.TRAIN or not self.decode_now:
            return None
        metrics = {"WER": self.wer_stats.summarize("error_rate"),
                   "CER": self.cer_stats.summarize("error_rate")}
        if stage == Stage.TEST and dist.is_main():
            self.wer_stats.write_stats(self.hparams.wer_file)
        return metrics

    def init_optimizers(self):
        """Optimize only the trainable modules, so frozen weights are never touched (not even decayed)."""
        params = [p for name in sorted(self.trainable) for p in self.modules[name].parameters()]
        self.optimizer = self.opt_class(params)
        self.optimizers_dict = {"optimizer": self.optimizer}


def freeze_all_but(modules: dict, trainable) -> set:
    """Set requires_grad from ``trainable`` (module names); returns the set of trainable names."""
    trainable = set(trainable)
    unknown = trainable - set(modules)
    if unknown:
        raise HparamsError(f"trainable_modules names unknown modules {sorted(unknown)}; "
                           f"known: {sorted(modules)}")
    for name, module in modules.items():
        module.requires_grad_(name in trainable)
    return trainable


def load_tokenizer(hparams: dict, manifest: str) -> SentencePieceTokenizer:
    """The recipe's SentencePiece model; trained on the training transcripts first if the file is missing."""
    model = hparams["model"]
    path = Path(model["tokenizer_file"])
    if not path.is_file():
        def train_tokenizer():
            trained = SentencePieceTokenizer.train(
                manifest, path.parent / "build", vocab_size=model["vocab_size"],
                model_type=model["token_type"], pad_id=model["blank_index"], unk_id=1,
                bos_id=model["bos_index"], eos_id=model["eos_index"],
                replacements={"data_root": hparams["data_folder"]}, hard_vocab_limit=False)
            trained.save(path)

        dist.run_on_main(train_tokenizer)
    tokenizer = SentencePieceTokenizer.load(path)
    if tokenizer.vocab_size > model["vocab_size"]:
        raise HparamsError(
            f"{path} has {tokenizer.vocab_size} pieces but model.vocab_size is {model['vocab_size']}")
    return tokenizer


def load_lm(hparams: dict) -> None:
    """Load the LM weights of ``lm_checkpoint`` when the file exists; required when decoding uses the LM."""
    lm_file = hparams.get("lm_checkpoint")
    if lm_file and Path(lm_file).is_file():
        hparams["model"]["lm"].load_state_dict(torch.load(lm_file, map_location="cpu", weights_only=True))
    elif hparams["lm_weight"] and "lm" not in hparams["trainable_modules"]:
        # Fail before training, not after it: decoding with an untrained LM would only add noise.
        raise HparamsError(
            f"lm_weight is {hparams['lm_weight']} but the LM weights lm_checkpoint={lm_file} do not exist: "
            "train the LM first (../LM: python train.py hparams/lm.yaml) or pass --lm_weight 0")


def transcript_lexicon(manifest: str, tokenizer, data_folder: str) -> Lexicon:
    """The words of a manifest's transcripts as the tokenizer spells them (for closed-vocabulary decoding)."""
    rows = load_manifest(manifest, {"data_root": data_folder}, check_files=False).values()
    return Lexicon.from_tokenizer(tokenizer, {word for row in rows for word in str(row["text"]).split()})


def trim_edge_silence(hparams: dict, manifests: dict) -> dict:
    """The manifests, with those of ``trim_splits`` rewritten (once, on the main process; kept for a resumed
    run) to read only the speech and ``trim_margin`` seconds around it; unchanged when ``trim_margin`` is
    null."""
    if hparams["trim_margin"] is None:
        return manifests
    unknown = sorted(set(hparams["trim_splits"]) - set(manifests))
    if unknown:
        raise HparamsError(f"trim_splits: no split {unknown[0]!r} (the splits are {sorted(manifests)})")
    chosen = {split: manifests[split] for split in hparams["trim_splits"]}
    options = {"replacements": {"data_root": hparams["data_folder"]}, "margin": hparams["trim_margin"],
               "num_workers": min(8, os.cpu_count() or 1)}
    folder = os.path.join(hparams["output_folder"], "manifests", f"trim_margin-{hparams['trim_margin']}")
    trimmed = dist.run_on_main(trim_manifest_files, args=(chosen, folder), kwargs=options)
    return {**manifests, **dist.broadcast_object(trimmed)}


def dataio_prepare(hparams: dict, manifests: dict, tokenizer) -> dict:
    """Datasets of the three splits: audio signal and token sequences, read lazily per item."""
    model = hparams["model"]

    @takes("wav")
    @provides("sig")
    def audio_pipeline(wav):
        return read_audio(wav)

    @takes("text")
    @provides("tokens_bos", "tokens_eos", "tokens")
    def text_pipeline(text):
        ids = tokenizer.encode(text)
        yield torch.tensor([model["bos_index"]] + ids, dtype=torch.long)
        yield torch.tensor(ids + [model["eos_index"]], dtype=torch.long)
        yield torch.tensor(ids, dtype=torch.long)

    datasets = {}
    for split, path in manifests.items():
        dataset = DynamicItemDataset.from_json(path, replacements={"data_root": hparams["data_folder"]})
        if split == "train":
            dataset = dataset.filtered_sorted(key_max_value={"duration": hparams["max_train_duration"]})
        dataset.add_dynamic_item(audio_pipeline)
        dataset.add_dynamic_item(text_pipeline)
        dataset.set_output_keys(["id", "sig", "text", "tokens_bos", "tokens_eos", "tokens"])
        datasets[split] = dataset
    return datasets


def build_brain(hparams: dict, run_opts, tokenizer, train_manifest: str) -> ASR:
    """The Brain with its checkpointer and tokenizer; frozen modules set from ``trainable_modules``; with
    ``closed_vocabulary``, the lexicon of the training transcripts for beam search."""
    modules = hparams["model"]["modules"]
    trainable = set(hparams["trainable_modules"])
    if hparams["ctc_weight"] >= 1.0:
        trainable.discard("decoder")  # no attention loss: the decoder would get no gradient (and stall DDP)
    trainable = freeze_all_but(modules, trainable)
    counter = hparams["epoch_counter"]
    checkpointer = speechkit.Checkpointer(hparams["save_folder"], {**modules, "counter": counter})
    brain = ASR(modules, hparams["opt_class"], hparams, run_opts, checkpointer)
    brain.trainable = trainable
    brain.tokenizer = tokenizer
    if hparams["closed_vocabulary"]:
        brain.lexicon = transcript_lexicon(train_manifest, tokenizer, hparams["data_folder"])
    else:
        brain.lexicon = None
    return brain


def make_scheduler(brain: ASR, hparams: dict, train_loader) -> object:
    """The LR schedule, built once the number of optimizer steps per epoch is known."""
    accumulation = brain.run_opts.grad_accumulation_factor
    accumulation = accumulation if isinstance(accumulation, int) else 1
    steps_per_epoch = max(1, len(train_loader) // accumulation)
    total = hparams["number_of_epochs"] * steps_per_epoch + 1
    # A short run (a smoke test, --number_of_epochs 1) keeps a warmup shorter than the whole run.
    warmup = min(hparams["warmup_steps"], max(1, total // 4))
    return hparams["lr_scheduler"](total_steps=total, warmup_steps=warmup)


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
    load_lm(hparams)
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
