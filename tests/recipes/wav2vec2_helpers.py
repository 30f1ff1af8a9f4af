"""Helpers of the tests of recipes/SynthSpeech/wav2vec2 and of the ssl_finetune template that starts from its
encoders: a tiny encoder's command-line sizes, a copy of the recipe where it stands in the repository, and a
pretraining of a few updates."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.recipes.recipe_helpers import run_script

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "SynthSpeech" / "wav2vec2"
#: A model small enough for a test (the encoder's sizes and the pretraining heads').
TINY_MODEL = {"num_layers": 1, "d_model": 32, "num_heads": 2, "ffn_dim": 64, "conv_channels": [32] * 7,
              "pos_conv_kernel": 8, "pos_conv_groups": 4, "codebook_entries": 8, "codevector_dim": 16,
              "final_dim": 16, "num_negatives": 10}
#: The fields of TINY_MODEL that size the encoder alone (what fine-tuning and the probe must be given).
ENCODER_FIELDS = ("num_layers", "d_model", "num_heads", "ffn_dim", "conv_channels", "pos_conv_kernel",
                  "pos_conv_groups")
TINY_ENCODER = {name: value for name, value in TINY_MODEL.items() if name in ENCODER_FIELDS}


def options(model: dict) -> list:
    """``--config.<field> <value>`` for each field of ``model``, after the options every test run takes."""
    arguments = ["--noprogressbar", "--train_loader_kwargs.num_workers", "0"]
    for name, value in model.items():
        arguments += [f"--config.{name}", json.dumps(value).replace(" ", "")]
    return arguments


def copy_recipe(tmp_path: Path, sgd: bool = False) -> Path:
    # Where they stand in the repository: finetune.yaml extends the ssl_finetune template's train.yaml.
    recipe = tmp_path / "recipes" / "SynthSpeech" / "wav2vec2"
    # Copies the linked prepare.py's content; not a user's results/ there (its checkpoints would be resumed).
    shutil.copytree(RECIPE, recipe, ignore=shutil.ignore_patterns("results"))
    template = RECIPE.parents[2] / "templates" / "ssl_finetune" / "hparams"
    shutil.copytree(template, tmp_path / "templates" / "ssl_finetune" / "hparams")
    if sgd:  # plain SGD: the update is linear in the gradient, so accumulation must match to rounding
        yaml = recipe / "hparams" / "pretrain.yaml"
        text = yaml.read_text().replace("!name:torch.optim.AdamW", "!name:torch.optim.SGD")
        text = "\n".join(line for line in text.splitlines()
                         if not line.strip().startswith(("betas:", "eps:", "weight_decay:")))
        yaml.write_text(text + "\n")
    return recipe


def pretrain_tiny(recipe: Path, data_folder: Path, *extra: str) -> Path:
    """One epoch of pretrain.py (the YAML's objective unless ``extra`` says otherwise) of TINY_MODEL on
    ``data_folder`` in batches of 3 s; the saved ``encoder.ckpt``."""
    run_script(recipe / "pretrain.py", ["hparams/pretrain.yaml", "--data_folder", str(data_folder),
                                        *options(TINY_MODEL), "--number_of_epochs", "1", "--max_tokens",
                                        "48000", "--global_batch_seconds", "6", *extra])
    return recipe / "results" / "pretrain" / "1234" / "encoder.ckpt"
