"""`speechkit export` ships only weights that something produced: a module frozen in training and never loaded
(the LM of an ASR run with --lm_weight 0) is listed in the checkpoint, and exporting it is an error unless the
inference YAML says it is meant; a loaded or trained module exports as before, resumed runs included."""
from __future__ import annotations

import json

import pytest
import torch

import speechkit
from speechkit.checkpoints import Checkpointer, EpochCounter
from speechkit.cli import main as speechkit_main
from speechkit.errors import CheckpointError, SpeechkitError
from speechkit.export.model_folder import export_model
from speechkit.pretrained import EncoderASR
from speechkit.pretrained.loading import load_into, save_weights

YAML = """\
sample_rate: 16000
interface: EncoderASR
{extra}encoder: !new:tiny_asr.FrameToneEncoder
lm: !new:torch.nn.Linear [3, 3]
tokenizer: !new:tiny_asr.CharTokenizer
modules:
  encoder: !ref <encoder>
  lm: !ref <lm>
encoder_pipeline: [encoder]
decoding: {{blank_index: 0}}
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
    encoder: !ref <encoder>
    {lm_loadable}tokenizer: !ref <tokenizer>
  paths:
    encoder: encoder.safetensors
    {lm_path}tokenizer: tokenizer.json
"""


def inference_yaml(folder, name, with_lm=True, untrained_ok=False):
    path = folder / name
    path.write_text(YAML.format(extra="untrained_loadables: [lm]\n" if untrained_ok else "",
                                lm_loadable="lm: !ref <lm>\n    " if with_lm else "",
                                lm_path="lm: lm.safetensors\n    " if with_lm else ""))
    return path


class Tones(speechkit.Brain):
    """Trains the encoder only (the LM is frozen, as in an ASR run with --lm_weight 0)."""

    def compute_forward(self, batch, stage):
        return self.modules.encoder(batch[0], batch[1])[0]

    def compute_objectives(self, scores, batch, stage):
        return scores.pow(2).mean()


def train(tiny_asr, save, epochs, load_lm_from=None):
    """A run of ``epochs`` (resuming what ``save`` holds) on 4 tiny utterances; returns the modules."""
    modules = {"encoder": tiny_asr.FrameToneEncoder(), "lm": torch.nn.Linear(3, 3)}
    if load_lm_from is not None:
        load_into(modules["lm"], torch.load(load_lm_from, weights_only=True), load_lm_from)
    counter = EpochCounter(epochs)
    checkpointer = Checkpointer(save, {**modules, "tokenizer": tiny_asr.CharTokenizer(tiny_asr.SYMBOLS),
                                       "counter": counter})
    brain = Tones(modules, lambda p: torch.optim.SGD(p, lr=0.01), {}, {"noprogressbar": True}, checkpointer,
                  trainable_modules=["encoder"])
    wavs = torch.stack([tiny_asr.synthesize(text) for text in ("ab", "ba", "cd", "dc")])
    data = torch.utils.data.TensorDataset(wavs, torch.full((4,), wavs.shape[1]))
    brain.fit(counter, data, train_loader_kwargs={"batch_size": 2,
                                                  "collate_fn": torch.utils.data.default_collate})
    return modules, checkpointer


def test_an_untrained_lm_is_not_exported_unless_the_yaml_says_so(tiny_asr, tmp_path, capsys):
    save = tmp_path / "save"
    modules, checkpointer = train(tiny_asr, save, epochs=1)
    [checkpoint] = checkpointer.list_checkpoints()
    assert checkpoint.info["untrained"] == ["lm"]
    # A resumed run recovers the LM from the checkpoint and still knows it was never trained.
    train(tiny_asr, save, epochs=2)
    newest = Checkpointer(save).find_checkpoint()
    assert newest.info["epoch"] == 2 and newest.info["untrained"] == ["lm"]

    with_lm = inference_yaml(tmp_path, "inference.yaml")
    code = speechkit_main(["export", "--checkpoints", str(save), "--hparams", str(with_lm), "--output",
                           str(tmp_path / "model")])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{newest.path}: 'lm' was frozen and never trained or loaded" in err
    assert "untrained_loadables: [lm]" in err and "inference_no_lm.yaml" in err
    assert not (tmp_path / "model").exists()

    # Without the LM in the model folder, or with the YAML saying that initial weights are meant, it exports.
    folder = export_model(save, inference_yaml(tmp_path, "no_lm.yaml", with_lm=False), tmp_path / "no_lm")
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "encoder.safetensors",
                                                        "hyperparams.yaml", "tokenizer.json"]
    folder = export_model(save, inference_yaml(tmp_path, "meant.yaml", untrained_ok=True), tmp_path / "meant")
    assert (folder / "lm.safetensors").is_file()
    assert EncoderASR.from_hparams(str(folder)).mods["lm"].in_features == 3
    # The encoder is the trained one.
    trained = torch.load(newest.path / "encoder.ckpt", weights_only=True)
    exported = EncoderASR.from_hparams(str(folder)).mods["encoder"].state_dict()
    assert all(torch.equal(exported[k], v) for k, v in trained.items())

    with pytest.raises(SpeechkitError, match="untrained_loadables must be a list"):
        bad = tmp_path / "bad.yaml"
        bad.write_text(inference_yaml(tmp_path, "x.yaml").read_text() + "untrained_loadables: lm\n")
        export_model(save, bad, tmp_path / "bad")


def test_a_loaded_lm_is_exported(tiny_asr, tmp_path):
    lm_file = tmp_path / "lm.ckpt"
    save_weights(torch.nn.Linear(3, 3).state_dict(), lm_file)  # an LM trained elsewhere (../LM)
    train(tiny_asr, tmp_path / "save", epochs=1, load_lm_from=lm_file)
    [checkpoint] = Checkpointer(tmp_path / "save").list_checkpoints()
    assert checkpoint.info["untrained"] == []
    folder = export_model(tmp_path / "save", inference_yaml(tmp_path, "inference.yaml"), tmp_path / "model")
    exported = EncoderASR.from_hparams(str(folder)).mods["lm"].state_dict()
    assert all(torch.equal(exported[k], v) for k, v in torch.load(lm_file, weights_only=True).items())


def test_checkpoints_of_a_plain_checkpointer_claim_nothing(tiny_asr, tmp_path):
    """Without a Brain nothing says which modules learned: nothing is listed, and export takes every file."""
    model = {"encoder": tiny_asr.FrameToneEncoder(), "lm": torch.nn.Linear(3, 3),
             "tokenizer": tiny_asr.CharTokenizer(tiny_asr.SYMBOLS)}
    saved = Checkpointer(tmp_path / "save", model).save_checkpoint()
    assert json.loads((saved.path / "meta.json").read_text())["info"]["untrained"] == []
    with pytest.raises(CheckpointError, match="no checkpoint with the key 'WER'"):
        export_model(tmp_path / "save", inference_yaml(tmp_path, "i.yaml"), tmp_path / "m", min_key="WER")
    assert export_model(tmp_path / "save", inference_yaml(tmp_path, "i.yaml"), tmp_path / "m").is_dir()
