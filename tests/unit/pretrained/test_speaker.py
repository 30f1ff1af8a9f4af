"""SpeakerRecognition: embeddings batch-invariant and equal to the modules', verify_files against its
threshold, bad folders named (the commands: tests/unit/commands/test_verify.py, test_embed.py)."""
from __future__ import annotations

import pytest
import torch

from speechkit.errors import HparamsError
from speechkit.pretrained import Pretrained, SpeakerRecognition
from tests.helpers.job_models import SPEAKER_HYPERPARAMS
from tests.unit.pretrained import speaker_files

# Shared fixtures: pytest finds them under these names.
folder, audio = speaker_files.folder, speaker_files.audio


def test_embeddings_are_the_modules_and_batch_invariant(folder, audio):
    model = Pretrained.from_hparams(str(folder))
    assert isinstance(model, SpeakerRecognition) and model.threshold == 0.4
    waves = [model.load_audio(p) for p in audio]
    lengths = torch.tensor([w.shape[0] for w in waves])
    batch = torch.zeros(3, int(lengths.max()))
    for i, wave in enumerate(waves):
        batch[i, : wave.shape[0]] = wave
    together = model.embed_batch(batch, lengths)
    for i, path in enumerate(audio):
        torch.testing.assert_close(model.embed_file(path), together[i], atol=1e-5, rtol=1e-4)
    feats, frames = model.mods["compute_features"](waves[0].unsqueeze(0), lengths[:1])
    feats, frames = model.mods["mean_var_norm"](feats, frames)
    torch.testing.assert_close(model.mods["embedding_model"](feats, frames)[0], together[0], atol=1e-5,
                               rtol=1e-4)
    score, same = model.verify_files(audio[0], audio[0])
    assert score == pytest.approx(1.0, abs=1e-5) and same
    score, same = model.verify_files(audio[0], audio[1])
    assert same == (score >= 0.4) and -1.0 <= score <= 1.0


def test_bad_folders_are_named(tmp_path, folder):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "embedding_model.safetensors").write_bytes((folder / "embedding_model.safetensors").read_bytes())
    (bad / "hyperparams.yaml").write_text(SPEAKER_HYPERPARAMS.replace("threshold: 0.4", "threshold: 3"))
    with pytest.raises(HparamsError, match="threshold must be a cosine score"):
        Pretrained.from_hparams(str(bad))
    without = SPEAKER_HYPERPARAMS.replace("  compute_features: !ref <compute_features>\n", "")
    (bad / "hyperparams.yaml").write_text(without)
    with pytest.raises(HparamsError, match="'compute_features'"):
        Pretrained.from_hparams(str(bad))
