#!/usr/bin/env python3
"""Train the SentencePiece tokenizer shared by the LM and ASR steps.

Run (from this folder):
    python train.py hparams/tokenizer.yaml [--vocab_size 128] [--token_type char]
"""
from __future__ import annotations

import sys
from pathlib import Path

import speechkit
from speechkit.tokenizers import SentencePieceTokenizer

sys.path.insert(0, str(Path(__file__).absolute().parent))  # not resolved: a recipe may link to this file
from prepare import prepare_manifests  # noqa: E402  (the recipe's own helper, next to this file)


def main(argv):
    hparams_file, run_opts, overrides = speechkit.parse_arguments(argv)
    hparams = speechkit.load_hparams(hparams_file, overrides, run_opts=run_opts)
    manifests = prepare_manifests(hparams)
    target = Path(hparams["tokenizer_file"])
    tokenizer = SentencePieceTokenizer.train(
        manifests["train"], target.parent / "build", vocab_size=hparams["vocab_size"],
        model_type=hparams["token_type"], text_field=hparams["text_field"],
        replacements={"data_root": hparams["data_folder"]}, pad_id=hparams["pad_index"],
        unk_id=hparams["unk_index"], bos_id=hparams["bos_index"], eos_id=hparams["eos_index"],
        hard_vocab_limit=False)
    tokenizer.save(target)
    example = "THE OLD FARMER CARRIED TWO BASKETS"
    print(f"{target}: {tokenizer.vocab_size} pieces; {example!r} -> {tokenizer.encode_as_pieces(example)}")
    return tokenizer


if __name__ == "__main__":
    main(sys.argv[1:])
