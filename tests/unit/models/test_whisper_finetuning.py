"""Whisper fine-tuning pieces: teacher forcing and its loss against transformers' own training loss, the
training front end (SpecAugment on valid frames only), dropout, freezing, the training prompt's checks."""
import pytest
import torch

from speechkit.errors import HparamsError
from speechkit.features import SpecAugment
from speechkit.models.whisper.finetuning import (
    IGNORE,
    WhisperTrainingFeatures,
    set_dropout,
    teacher_forcing,
    token_cross_entropy,
)

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
transformers.logging.set_verbosity_error()

from speechkit.pretrained.whisper_finetuning import (  # noqa: E402
    load_for_finetuning,
    training_prompt,
    wer_normalizer,
)
from tests.helpers.whisper_folders import build_whisper_folder  # noqa: E402


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("whisper")
    hf_model, ids = build_whisper_folder(str(path), d_model=32, encoder_layers=1, decoder_layers=2, heads=2,
                                         ffn=64)
    return path, hf_model, ids


def test_teacher_forcing_places_the_end_of_text_after_each_items_own_tokens():
    tokens, lengths = torch.tensor([[7, 8, 9], [5, 0, 0], [4, 4, 0]]), torch.tensor([3, 1, 2])
    inputs, input_lengths, targets = teacher_forcing(tokens, lengths, [1, 2, 6], end_of_text=3)
    assert inputs.tolist() == [[1, 2, 6, 7, 8, 9], [1, 2, 6, 5, 3, 3], [1, 2, 6, 4, 4, 3]]
    assert input_lengths.tolist() == [6, 4, 5]
    assert targets.tolist() == [[IGNORE, IGNORE, 7, 8, 9, 3], [IGNORE, IGNORE, 5, 3, IGNORE, IGNORE],
                                [IGNORE, IGNORE, 4, 4, 3, IGNORE]]
    learnt = teacher_forcing(tokens, lengths, [1, 2, 6], 3, learn_prompt=True)[2]
    assert learnt[:, :2].tolist() == [[2, 6]] * 3
    with pytest.raises(ValueError, match="absolute"):
        teacher_forcing(tokens, torch.tensor([1.0, 0.5, 0.2]), [1], 3)


def test_loss_equals_transformers_training_loss(folder):
    path, hf_model, ids = folder
    loaded = load_for_finetuning(str(path))
    prompt = training_prompt(loaded, language="fr")
    assert prompt == [ids["sot"], ids["languages"]["<|fr|>"], ids["transcribe"], ids["no_timestamps"]]
    tokens, lengths = torch.tensor([[40, 41, 42, 43], [50, 51, 0, 0]]), torch.tensor([4, 2])
    inputs, input_lengths, targets = teacher_forcing(tokens, lengths, prompt, ids["eot"], learn_prompt=True)
    features = torch.randn(2, 80, 3000, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours = token_cross_entropy(loaded.model(features, inputs, input_lengths), targets)
        # transformers builds the decoder inputs itself from the labels (shifted right after the start).
        theirs = hf_model(input_features=features, labels=targets).loss
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    smoothed = token_cross_entropy(loaded.model(features, inputs, input_lengths), targets, 0.1)
    assert smoothed.item() != pytest.approx(ours.item())


def test_training_features_mask_only_valid_frames_in_training(folder):
    wavs = torch.randn(2, 32000, generator=torch.Generator().manual_seed(1)) * 0.1
    lengths = torch.tensor([32000, 16000])
    torch.manual_seed(0)
    augment = SpecAugment(freq_masks=0, time_masks=4, time_mask_width=30)
    features = WhisperTrainingFeatures(80, augment)
    plain = features.eval()(wavs, lengths)
    torch.testing.assert_close(plain, WhisperTrainingFeatures(80)(wavs, lengths))  # eval mode: no masking
    masked = features.train()(wavs, lengths)
    changed = (masked != plain).any(dim=1)  # (batch, frames)
    assert changed[0, :200].any() and changed[1, :100].any()
    assert not changed[0, 200:].any() and not changed[1, 100:].any()  # the 30 s padding is left alone
    too_long = features.eval()(torch.zeros(1, 500000), torch.tensor([500000]))  # cut to 30 s, not refused
    assert too_long.shape == (1, 80, 3000)


def test_dropout_freezing_and_the_prompts_checks(folder):
    path, _, _ = folder
    loaded = load_for_finetuning(str(path), freeze_encoder=True, dropout=0.2, attention_dropout=0.1)
    assert not any(p.requires_grad for p in loaded.model.encoder.parameters())
    assert all(p.requires_grad for p in loaded.model.decoder.parameters())
    assert loaded.model.config.dropout == 0.2 and loaded.model.decoder.layers[0].self_attn.dropout == 0.1
    tokens = torch.tensor([[5, 6, 7]])
    features = torch.randn(1, 80, 3000)
    loaded.model.train()
    assert not torch.equal(loaded.model(features, tokens), loaded.model(features, tokens))
    with pytest.raises(ValueError, match="dropout must be in"):
        set_dropout(loaded.model, dropout=1.5)
    with pytest.raises(HparamsError, match="multilingual Whisper model is fine-tuned for one language"):
        training_prompt(loaded, language=None)
    with pytest.raises(HparamsError, match="'xx' is not one of this model's languages"):
        training_prompt(loaded, language="xx")
    with pytest.raises(HparamsError, match="wer_normalizer must be one of"):
        wer_normalizer(loaded, "french")
    assert wer_normalizer(loaded, "english")("Twenty-one, Mr. X!") == "21 mister x"
