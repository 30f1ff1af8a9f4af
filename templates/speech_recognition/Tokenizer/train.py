#!/usr/bin/env python3
"""Train the SentencePiece tokenizer shared by the LM and ASR steps.

Run (from this folder):
    python train.py hparams/tokenizer.yaml [--vocab_size 128] [--token_type char]
"""
from __future__ import annotations

import sys
from pathlib import Path

from speechkit.recipe import sibling_module, start
from speechkit.tokenizers import SentencePieceTokenizer

prepare = sibling_module(__file__, "prepare")  # the recipe's own data preparation, next to this file


def main(argv):
    run = start(argv, prepare=prepare.prepare_manifests)
    hparams, manifests = run.hparams, run.manifests
    target = Path(hparams["tokenizer_file"])
    tokenizer = SentencePieceTokenizer.train(
        manifests["train"], target.parent / "build", vocab_size=hparams["vocab_size"],
        model_type=hparams["token_type"], text_field=hparams["text_field"],
        replacements={"data_root": hparams["data_folder"]}, pad_id=hparams["pad_index"],
        unk_id=hparams["unk_index"], bos_id=hparams["bos_index"], eos_id=hparams["eos_index"],
        hard_vocab_limit=False, normalizer=hparams["text_normalizer"],
        unknown_characters=hparams["unknown_characters"])
    tokenizer.save(target)
    example = hparams["text_normalizer"]("The old farmer carried two baskets.")
    print(f"{target}: {tokenizer.vocab_size} pieces; {example!r} -> {tokenizer.encode_as_pieces(example)}")
    print(f"Text: {hparams['text_normalizer'].describe()}")
    print(tokenizer.training_coverage.format())
    return tokenizer


if __name__ == "__main__":
    main(sys.argv[1:])
