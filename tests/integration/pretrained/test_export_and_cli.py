"""speechkit export / fetch / transcribe: a checkpoint becomes a model folder used from any source."""
from __future__ import annotations

import pytest
import soundfile
import torch

from speechkit.checkpoints import Checkpointer
from speechkit.cli import main as speechkit_main
from speechkit.errors import CheckpointError
from speechkit.pretrained import EncoderASR

INFERENCE_YAML = """\
sample_rate: 16000
interface: EncoderASR
encoder: !new:tiny_asr.FrameToneEncoder
tokenizer: !new:tiny_asr.CharTokenizer
modules:
  encoder: !ref <encoder>
encoder_pipeline: [encoder]
decoding: {blank_index: 0}
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
    encoder: !ref <encoder>
    tokenizer: !ref <tokenizer>
  paths:
    encoder: encoder.safetensors
    tokenizer: tokenizer.json
"""


@pytest.fixture
def trained(tiny_asr, tmp_path):
    """A recipe's checkpoints folder: a poor checkpoint (WER 80) and a good one (WER 3)."""
    model = torch.nn.ModuleDict({"encoder": tiny_asr.FrameToneEncoder(), "head": torch.nn.Linear(2, 2)})
    tokenizer = tiny_asr.CharTokenizer(tiny_asr.SYMBOLS)
    checkpointer = Checkpointer(tmp_path / "save", {"model": model, "tokenizer": tokenizer})
    checkpointer.save_checkpoint(meta={"WER": 80.0}, epoch=1)
    model["encoder"].load_state_dict(tiny_asr.true_weights())
    checkpointer.save_checkpoint(meta={"WER": 3.0}, epoch=2)
    with torch.no_grad():
        model["encoder"].basis.mul_(-0.5).add_(1.0)  # the newest checkpoint is worse again
    checkpointer.save_checkpoint(meta={"WER": 50.0}, epoch=3)
    (tmp_path / "inference.yaml").write_text(INFERENCE_YAML)
    return tmp_path


def _export(root, *extra):
    return speechkit_main(["export", "--checkpoints", str(root / "save"), "--hparams",
                           str(root / "inference.yaml"), "--output", str(root / "exported"),
                           "--min-key", "WER", "--map", "encoder=model:encoder.", *extra])


def test_export_best_checkpoint_then_load_from_each_source(trained, tiny_asr, file_server, hub_server,
                                                            capsys, caplog):
    assert _export(trained) == 0
    # The test model's classes are not on the allowlist: the export says remote copies need trust.
    assert "will not load without allow=[...] or trust_remote_code=True" in caplog.text
    assert "!new:tiny_asr.FrameToneEncoder" in caplog.text
    folder = trained / "exported"
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "encoder.safetensors",
                                                         "hyperparams.yaml", "tokenizer.json"]
    card = (folder / "README.md").read_text()
    assert "| WER | 3.0 |" in card and "epoch 2" in card and "encoder.safetensors" in card
    wav = tiny_asr.synthesize("bad cafe")
    lengths = torch.tensor([len(wav)])
    local = EncoderASR.from_hparams(str(folder))
    for path in folder.iterdir():
        file_server.files[f"/m/exported/{path.name}"] = path.read_bytes()
    hub_server.repos["org/exported"] = {"main": {p.name: p.read_bytes() for p in folder.iterdir()}}
    url = EncoderASR.from_hparams(f"{file_server.url}/m/exported", savedir=trained / "u",
                                  trust_remote_code=True)
    hub = EncoderASR.from_hparams("org/exported", savedir=trained / "h", trust_remote_code=True)
    for model in (local, url, hub):
        assert model.transcribe_batch(wav.unsqueeze(0), lengths)[0] == ["bad cafe"]
    # An existing folder is kept unless --force.
    assert _export(trained) == 1
    assert "already exists" in capsys.readouterr().err
    assert _export(trained, "--force") == 0


def test_an_inference_yaml_extending_another_is_written_as_a_file_of_its_own(trained, tiny_asr):
    # A recipe's inference.yaml that extends the template's (a top-level !include) cannot point there from a
    # model folder: the folder gets the extended file with the recipe's keys applied.
    (trained / "template").mkdir()
    (trained / "template" / "inference.yaml").write_text(INFERENCE_YAML)
    (trained / "inference.yaml").write_text("!include:template/inference.yaml\nsample_rate: 8000\n")
    assert _export(trained) == 0
    written = (trained / "exported" / "hyperparams.yaml").read_text()
    assert "!include" not in written and "sample_rate: 8000" in written
    model = EncoderASR.from_hparams(str(trained / "exported"))
    assert model.hparams["sample_rate"] == 8000


def test_export_errors_name_what_is_missing(trained, capsys):
    code = speechkit_main(["export", "--checkpoints", str(trained / "save"), "--hparams",
                           str(trained / "inference.yaml"), "--output", str(trained / "x")])
    assert code == 1 and "has no encoder.ckpt for loadable 'encoder'" in capsys.readouterr().err
    assert not (trained / "x").exists()
    with pytest.raises(CheckpointError, match="no checkpoint with the key 'BLEU'"):
        from speechkit.export.model_folder import export_model
        export_model(trained / "save", trained / "inference.yaml", trained / "y", max_key="BLEU")


def test_fetch_command_prefetches_whole_model_for_offline_use(trained, tiny_asr, hub_server, capsys,
                                                               monkeypatch):
    assert _export(trained) == 0
    capsys.readouterr()
    folder = trained / "exported"
    hub_server.repos["org/exported"] = {"main": {p.name: p.read_bytes() for p in folder.iterdir()}}
    assert speechkit_main(["fetch", "org/exported", "--savedir", str(trained / "pre")]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in listed] == ["hyperparams.yaml", "encoder", "tokenizer"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a compute node without network, same cache
    before = sum(hub_server.counts.values())
    wav_path = trained / "utt.wav"
    soundfile.write(wav_path, tiny_asr.synthesize("fed a bee").numpy(), 16000)
    code = speechkit_main(["transcribe", "org/exported", str(wav_path), "--savedir", str(trained / "run"),
                           "--trust-remote-code"])
    assert code == 0 and capsys.readouterr().out == f"{wav_path}\tfed a bee\n"
    assert sum(hub_server.counts.values()) == before
    assert speechkit_main(["fetch", "org/exported", "nothere.bin", "--savedir", str(trained / "pre")]) == 1
    assert "offline" in capsys.readouterr().err


def test_transcribe_command_refuses_untrusted_remote_yaml(trained, hub_server, capsys):
    assert _export(trained) == 0
    folder = trained / "exported"
    hub_server.repos["org/exported"] = {"main": {p.name: p.read_bytes() for p in folder.iterdir()}}
    code = speechkit_main(["transcribe", "org/exported", "x.wav", "--savedir", str(trained / "run")])
    err = capsys.readouterr().err
    assert code == 1 and "!new:tiny_asr.FrameToneEncoder" in err and "hyperparams.yaml" in err


def test_export_an_averaged_or_a_chosen_checkpoint(trained, tiny_asr, capsys):
    assert speechkit_main(["average-checkpoints", str(trained / "save"), "--num", "2", "--min-key", "WER",
                           "--output", str(trained / "avg")]) == 0
    args = ["export", "--hparams", str(trained / "inference.yaml"), "--map", "encoder=model:encoder.",
            "--file", f"tokenizer={trained / 'tokenizer.json'}"]
    tiny_asr.CharTokenizer(tiny_asr.SYMBOLS).save_checkpoint(trained / "tokenizer.json")  # not averaged
    assert speechkit_main([*args, "--checkpoints", str(trained / "avg"), "--output", str(trained / "m")]) == 0
    card = (trained / "m" / "README.md").read_text()
    assert "the average of 2 checkpoints" in card
    averaged = torch.load(trained / "avg" / "model.ckpt", weights_only=True)
    exported = EncoderASR.from_hparams(str(trained / "m")).mods["encoder"].state_dict()
    assert torch.equal(exported["basis"], averaged["encoder.basis"])
    # One checkpoint of the run, given by its path (here the newest, not the best).
    newest = Checkpointer(trained / "save").list_checkpoints()[-1]
    assert speechkit_main([*args, "--checkpoints", str(newest.path), "--output", str(trained / "n")]) == 0
    assert f"from `{newest.path.name}` (chosen by path), epoch 3" in (trained / "n" / "README.md").read_text()
    assert speechkit_main([*args, "--checkpoints", str(newest.path), "--min-key", "WER", "--output",
                           str(trained / "o")]) == 1
    assert "is one checkpoint: there is nothing to choose by 'WER'" in capsys.readouterr().err
