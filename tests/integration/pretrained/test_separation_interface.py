"""SeparationModel round trip: a checkpoint -> ``speechkit export`` -> load from a path, a URL and a Hub
repo -> ``separate_file`` / ``separate_batch`` / ``speechkit separate`` give the model's own output."""
from __future__ import annotations

import pytest
import soundfile
import torch

import speechkit
from speechkit.cli import main as speechkit_main
from speechkit.data import audio
from speechkit.errors import HparamsError
from speechkit.models import ConvTasNet
from speechkit.pretrained import SeparationModel

SIZES = dict(enc_dim=16, kernel_size=16, bottleneck_dim=8, hidden_dim=16, conv_kernel=3, blocks_per_repeat=2,
             repeats=1)
INFERENCE = """interface: SeparationModel
sample_rate: 8000
num_speakers: 2
separator: !new:speechkit.models.ConvTasNet
    num_speakers: 2
""" + "".join(f"    {k}: {v}\n" for k, v in SIZES.items()) + """modules:
    separator: !ref <separator>
pretrainer: !new:speechkit.pretrained.Pretrainer
    loadables:
        separator: !ref <separator>
    paths:
        separator: separator.safetensors
"""


@pytest.fixture
def exported(tmp_path):
    torch.manual_seed(0)
    model = ConvTasNet(num_speakers=2, **SIZES)
    speechkit.Checkpointer(tmp_path / "save", {"separator": model}).save_and_keep_only(meta={"loss": -4.0})
    (tmp_path / "inference.yaml").write_text(INFERENCE)
    code = speechkit_main(["export", "--checkpoints", str(tmp_path / "save"), "--hparams",
                           str(tmp_path / "inference.yaml"), "--min-key", "loss", "--output",
                           str(tmp_path / "model")])
    assert code == 0
    card = (tmp_path / "model" / "README.md").read_text()
    assert "SeparationModel.from_hparams" in card and "speechkit separate" in card
    return model.eval(), tmp_path / "model"


def test_round_trip_from_path_url_and_hub(exported, tmp_path, file_server, hub_server):
    model, folder = exported
    for path in folder.iterdir():
        file_server.files[f"/m/sep/{path.name}"] = path.read_bytes()
    hub_server.repos["org/sep"] = {"main": {p.name: p.read_bytes() for p in folder.iterdir()}}
    # Remote folders go through the YAML allowlist (no trust_remote_code).
    loaded = [SeparationModel.from_hparams(str(folder)),
              SeparationModel.from_hparams(f"{file_server.url}/m/sep", savedir=tmp_path / "u"),
              SeparationModel.from_hparams("org/sep", savedir=tmp_path / "h")]
    mixture = torch.randn(1, 1200)
    with torch.no_grad():
        expected = model(mixture, torch.tensor([1200]))
    for separator in loaded:
        torch.testing.assert_close(separator.separate_batch(mixture), expected)


def test_separate_file_resamples_and_matches_the_batch(exported, tmp_path):
    _, folder = exported
    separator = SeparationModel.from_hparams(str(folder))
    wave16 = (0.1 * torch.randn(3200)).clamp(-1, 1)
    soundfile.write(tmp_path / "a.wav", wave16.numpy(), 16000, subtype="FLOAT")
    sources = separator.separate_file(tmp_path / "a.wav")
    wave8 = audio.resample(wave16, 16000, 8000)
    assert sources.shape == (2, wave8.shape[0])
    torch.testing.assert_close(sources, separator.separate_batch(wave8.unsqueeze(0))[0])
    other = torch.randn(2500)
    padded = torch.zeros(2, 2500)
    padded[0, : wave8.shape[0]], padded[1] = wave8, other
    batched = separator.separate_batch(padded, torch.tensor([wave8.shape[0], 2500]))
    torch.testing.assert_close(batched[0, :, : wave8.shape[0]], sources, atol=1e-5, rtol=1e-4)


def test_cli_writes_one_file_per_speaker(exported, tmp_path, capsys):
    _, folder = exported
    for name in ("x", "y"):
        soundfile.write(tmp_path / f"{name}.wav", (0.1 * torch.randn(900)).numpy(), 8000)
    code = speechkit_main(["separate", str(folder), str(tmp_path / "x.wav"), str(tmp_path / "y.wav"),
                           "--out", str(tmp_path / "out"), "--batch-size", "2"])
    assert code == 0
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["x_s1.wav", "x_s2.wav", "y_s1.wav", "y_s2.wav"]
    assert soundfile.info(tmp_path / "out" / "x_s1.wav").frames == 900


def test_a_folder_without_separator_is_refused(tmp_path):
    (tmp_path / "hyperparams.yaml").write_text("interface: SeparationModel\nsample_rate: 8000\n"
                                               "num_speakers: 2\nmodules: {}\n")
    with pytest.raises(HparamsError, match="separator"):
        SeparationModel.from_hparams(str(tmp_path))
