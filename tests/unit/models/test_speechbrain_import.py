"""SpeechBrain ECAPA-TDNN folders load into speechkit with equal embeddings: SpeechBrain's own ECAPA_TDNN is
built with random weights and statistics, saved as a ``spkrec-ecapa-voxceleb``-style folder, imported, and
both models embed the same features.

SpeechBrain imports torchaudio at import time, and torchaudio's releases pin one torch version; where no
release matches the installed torch, ``tools/speechbrain_peer.sh`` installs speechbrain and the newest
torchaudio without dependencies into a folder of their own (their Python code runs on the newer torch) and
prints it for PYTHONPATH. Without them these tests are skipped.
"""
from __future__ import annotations

import pytest
import torch

from speechkit.errors import CheckpointError, HparamsError
from speechkit.pretrained.speechbrain_import import import_speechbrain_folder, load_speechbrain_ecapa

ecapa_module = pytest.importorskip("speechbrain.lobes.models.ECAPA_TDNN", exc_type=ImportError)
features_module = pytest.importorskip("speechbrain.processing.features", exc_type=ImportError)

SIZES = dict(input_size=24, channels=[32, 32, 32, 32, 96], kernel_sizes=[5, 3, 3, 3, 1],
             dilations=[1, 2, 3, 4, 1], attention_channels=16, lin_neurons=20, res2net_scale=4, se_channels=8)

HYPERPARAMS = """\
pretrained_path: speechbrain/spkrec-ecapa-voxceleb
sample_rate: 16000
n_mels: 24
compute_features: !new:speechbrain.lobes.features.Fbank
    n_mels: !ref <n_mels>
mean_var_norm: !new:speechbrain.processing.features.InputNormalization
    norm_type: sentence
    std_norm: False
embedding_model: !new:speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN
    input_size: !ref <n_mels>
    channels: [32, 32, 32, 32, 96]
    kernel_sizes: [5, 3, 3, 3, 1]
    dilations: [1, 2, 3, 4, 1]
    attention_channels: 16
    lin_neurons: 20
    res2net_scale: 4
    se_channels: 8
mean_var_norm_emb: !new:speechbrain.processing.features.InputNormalization
    norm_type: global
    std_norm: False
modules:
    compute_features: !ref <compute_features>
    mean_var_norm: !ref <mean_var_norm>
    embedding_model: !ref <embedding_model>
    mean_var_norm_emb: !ref <mean_var_norm_emb>
"""


@pytest.fixture(scope="module")
def speechbrain_folder(tmp_path_factory):
    torch.manual_seed(0)
    model = ecapa_module.ECAPA_TDNN(**SIZES)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm1d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
            torch.nn.init.uniform_(module.weight, 0.5, 1.5)
            torch.nn.init.uniform_(module.bias, -0.2, 0.2)
    model.eval()
    norm = features_module.InputNormalization(norm_type="global", std_norm=False)
    norm.train()
    norm(torch.randn(8, 1, 20) * 2 + 1, torch.ones(8))  # global statistics of some embeddings
    norm.eval()
    folder = tmp_path_factory.mktemp("spkrec-ecapa")
    (folder / "hyperparams.yaml").write_text(HYPERPARAMS)
    torch.save(model.state_dict(), folder / "embedding_model.ckpt")
    norm._save(folder / "mean_var_norm_emb.ckpt")
    return folder, model, norm


def test_converted_model_gives_speechbrains_embeddings(speechbrain_folder):
    folder, reference, norm = speechbrain_folder
    ours, embedding_norm, n_mels, rate = load_speechbrain_ecapa(folder)
    assert (n_mels, rate) == (24, 16000)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in reference.parameters())
    ours.eval()
    feats = torch.randn(3, 150, 24)
    with torch.no_grad():
        for i in range(3):  # one item at a time: SpeechBrain pads the batch's edge, speechkit each item's
            expected = reference(feats[i:i + 1])[:, 0]
            got = ours(feats[i:i + 1], torch.tensor([150]))
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        expected = norm(reference(feats).clone(), torch.ones(3))[:, 0]
        mean, _ = embedding_norm
        got = ours(feats, torch.tensor([150] * 3)) - mean
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_imported_folder_is_a_speaker_model(speechbrain_folder, tmp_path):
    from speechkit.pretrained import SpeakerRecognition

    folder, reference, norm = speechbrain_folder
    out = import_speechbrain_folder(folder, tmp_path / "converted")
    model = SpeakerRecognition.from_hparams(str(out))
    wav = torch.randn(1, 16000) * 0.1
    feats, frames = model.mods["compute_features"](wav, torch.tensor([16000]))
    feats, frames = model.mods["mean_var_norm"](feats, frames)
    with torch.no_grad():
        expected = norm(reference(feats).clone(), torch.ones(1))[:, 0]
    torch.testing.assert_close(model.embed_batch(wav), expected, atol=1e-5, rtol=1e-5)
    assert model.threshold == 0.25


def test_a_checkpoint_that_does_not_fit_is_named(speechbrain_folder, tmp_path):
    folder, _, _ = speechbrain_folder
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "hyperparams.yaml").write_text(HYPERPARAMS.replace("lin_neurons: 20", "lin_neurons: 30"))
    (bad / "embedding_model.ckpt").write_bytes((folder / "embedding_model.ckpt").read_bytes())
    with pytest.raises(CheckpointError, match="fc.weight has shape"):
        load_speechbrain_ecapa(bad)
    (bad / "hyperparams.yaml").write_text("embedding_model: !new:speechbrain.lobes.models.X.Xvector {}\n")
    with pytest.raises(HparamsError, match="ECAPA_TDNN"):
        load_speechbrain_ecapa(bad)
