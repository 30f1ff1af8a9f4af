"""wav2vec 2.0 against transformers: the same weights give the same features and pretraining logits.

Both directions: a transformers folder loaded into speechkit, and speechkit's model exported and loaded by
transformers. Random weights in a small config, both architectures (group-norm features + post-norm
Transformer as in BASE, layer-norm features + pre-norm Transformer as in LARGE).
"""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from speechkit.models.wav2vec2 import (  # noqa: E402
    Wav2Vec2Config,
    Wav2Vec2Pretraining,
    contrastive_logits,
    perplexity,
    sample_negatives,
    span_mask,
)
from speechkit.pretrained.huggingface.wav2vec2 import (  # noqa: E402
    config_to_huggingface,
    export_wav2vec2,
    load_wav2vec2,
)
from tests.unit.pretrained.huggingface.padded_waveforms import waveforms  # noqa: E402

ATOL = 1e-5


def small_config(variant: str) -> Wav2Vec2Config:
    layer = variant == "large"
    return Wav2Vec2Config(conv_channels=(24, 24, 32), conv_kernels=(10, 3, 3), conv_strides=(5, 2, 2),
                          conv_bias=layer, feature_norm="layer" if layer else "group", d_model=32,
                          num_layers=2, num_heads=4, ffn_dim=48, layer_norm_first=layer, pos_conv_kernel=6,
                          pos_conv_groups=4,
                          codebook_groups=2, codebook_entries=8, codevector_dim=16, final_dim=12,
                          num_negatives=5, mask_prob=0.3, mask_length=3, mask_min_spans=1)


def hf_model(config: Wav2Vec2Config, seed: int):
    torch.manual_seed(seed)
    hf_config = transformers.Wav2Vec2Config(**config_to_huggingface(config, "Wav2Vec2ForPreTraining"))
    model = transformers.Wav2Vec2ForPreTraining(hf_config).eval()
    with torch.no_grad():  # random, not the initial values: biases and norms away from 0 and 1
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    return model


def compare_encoders(ours, theirs, wav, lengths, padded: bool):
    with torch.no_grad():
        attention = (torch.arange(wav.shape[1])[None] < lengths[:, None]).long() if padded else None
        expected = theirs.wav2vec2(wav, attention_mask=attention, output_hidden_states=True)
        got = ours.wav2vec2(wav, lengths)
    for index, frames in enumerate(got.lengths.tolist()):
        torch.testing.assert_close(got.output[index, :frames], expected.last_hidden_state[index, :frames],
                                   atol=ATOL, rtol=0)
        torch.testing.assert_close(got.features[index, :frames], expected.extract_features[index, :frames],
                                   atol=ATOL, rtol=0)
        if not ours.config.layer_norm_first:
            for layer, hidden in enumerate(expected.hidden_states):
                torch.testing.assert_close(got.hidden_states[layer][index, :frames], hidden[index, :frames],
                                           atol=ATOL, rtol=0,
                                           msg=lambda m, layer=layer: f"layer {layer}: {m}")


@pytest.mark.parametrize("variant", ["base", "large"])
def test_transformers_folder_loads_with_equal_features_and_logits(tmp_path, variant):
    config = small_config(variant)
    theirs = hf_model(config, seed=1)
    theirs.save_pretrained(tmp_path / "hf")
    ours, extra = load_wav2vec2(tmp_path / "hf")
    assert isinstance(ours, Wav2Vec2Pretraining) and extra == {}
    ours.eval()
    # The layer-norm variant is exactly batch invariant in transformers too, so compare it padded; the
    # group-norm one takes statistics over padding there, so compare full-length items.
    lengths = [2400, 1730, 2400] if variant == "large" else [2400, 2400]
    wav, lengths = waveforms(lengths)
    compare_encoders(ours, theirs, wav, lengths, padded=variant == "large")

    frames = ours.wav2vec2.output_lengths(lengths)
    generator = torch.Generator().manual_seed(3)
    mask = span_mask(frames, int(frames.max()), 0.3, 3, 1, generator)
    negatives = sample_negatives(mask, 5, generator)
    flat_negatives = negatives + (torch.arange(len(frames)) * mask.shape[1]).view(-1, 1, 1)
    with torch.no_grad():
        attention = None
        if variant == "large":
            attention = (torch.arange(wav.shape[1])[None] < lengths[:, None]).long()
        expected = theirs(wav, attention_mask=attention, mask_time_indices=mask,
                          sampled_negative_indices=flat_negatives)
        got = ours(wav, lengths, mask=mask, negatives=negatives)
    expected_logits = contrastive_logits(expected.projected_states, expected.projected_quantized_states,
                                         negatives, theirs.config.contrastive_logits_temperature)
    torch.testing.assert_close(got.logits[mask], expected_logits[mask], atol=ATOL, rtol=0)
    torch.testing.assert_close(got.contrastive_loss, expected.contrastive_loss, atol=1e-4, rtol=1e-6)
    # transformers averages code usage over the masked frames; the same selection gives the same number.
    code_probs = torch.nn.functional.one_hot(
        ours.quantizer.weight_proj(got.encoder.features).view(-1, 2, 8).argmax(-1), 8).float()
    torch.testing.assert_close(perplexity(code_probs, mask), expected.codevector_perplexity,
                               atol=ATOL, rtol=0)


@pytest.mark.parametrize("variant", ["base", "large"])
def test_exported_folder_loads_in_transformers_with_equal_outputs(tmp_path, variant):
    config = small_config(variant)
    torch.manual_seed(5)
    ours = Wav2Vec2Pretraining(config).eval()
    with torch.no_grad():
        for parameter in ours.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    export_wav2vec2(ours, tmp_path / "exported")
    theirs = transformers.Wav2Vec2ForPreTraining.from_pretrained(tmp_path / "exported").eval()
    wav, lengths = waveforms([2400, 2400], seed=4)
    compare_encoders(ours, theirs, wav, lengths, padded=False)
    # And back: the round trip keeps every tensor.
    again, _ = load_wav2vec2(tmp_path / "exported")
    for name, tensor in ours.state_dict().items():
        assert torch.equal(again.state_dict()[name], tensor), name


def test_weights_that_do_not_fit_the_model_are_refused_naming_the_keys_and_nothing_is_loaded():
    from speechkit.errors import CheckpointError
    from speechkit.pretrained.huggingface.wav2vec2 import load_whole

    model = torch.nn.Linear(2, 3)
    before = {key: value.clone() for key, value in model.state_dict().items()}
    state = {"weight": torch.zeros(3, 3), "scale": torch.ones(1)}  # a wrong shape, no bias, one key too many
    refusal = (r"^w.safetensors: does not fit \(missing \['bias'\], unexpected \['scale'\], "
               r"wrong shape \['weight'\]\)$")
    with pytest.raises(CheckpointError, match=refusal):
        load_whole(model, state, "w.safetensors: does not fit")
    assert all(torch.equal(model.state_dict()[key], value) for key, value in before.items())
    load_whole(model, {"weight": torch.ones(3, 2), "bias": torch.ones(3)}, "unused")
    assert torch.equal(model.weight, torch.ones(3, 2))
