"""HuBERT, WavLM and data2vec-audio against transformers: the same weights give the same features, both ways.

Small random configurations saved by ``transformers`` (``save_pretrained``) load into speechkit with equal
``last_hidden_state`` (within 1e-5) and every hidden state; speechkit's model exported with
``export_encoder`` loads in transformers with equal outputs; bad config values name the file and key.
"""
from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from speechkit.errors import CheckpointError  # noqa: E402
from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model  # noqa: E402
from speechkit.pretrained.huggingface.encoders import export_encoder, load_encoder  # noqa: E402
from speechkit.pretrained.wav2vec2_features import Wav2Vec2Features  # noqa: E402
from tests.unit.pretrained.huggingface.padded_waveforms import waveforms  # noqa: E402

ATOL = 1e-5
COMMON = dict(conv_dim=[24, 24, 32], conv_kernel=[10, 3, 3], conv_stride=[5, 2, 2], hidden_size=32,
              num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
              num_conv_pos_embedding_groups=4, mask_time_prob=0.0, layerdrop=0.0)
CASES = {
    "hubert": ("HubertConfig", "HubertModel", dict(num_conv_pos_embeddings=6)),
    "hubert-stable-no-norm": ("HubertConfig", "HubertModel",
                              dict(num_conv_pos_embeddings=6, do_stable_layer_norm=True,
                                   feat_extract_norm="layer", conv_bias=True, feat_proj_layer_norm=False)),
    "wavlm": ("WavLMConfig", "WavLMModel", dict(num_conv_pos_embeddings=6, num_buckets=16,
                                                max_bucket_distance=40)),
    "wavlm-stable": ("WavLMConfig", "WavLMModel", dict(num_conv_pos_embeddings=5, num_buckets=16,
                                                       max_bucket_distance=40, do_stable_layer_norm=True,
                                                       feat_extract_norm="layer", conv_bias=True)),
    "data2vec-audio": ("Data2VecAudioConfig", "Data2VecAudioModel",
                       dict(conv_pos_kernel_size=5, num_conv_pos_embeddings=3)),
}


def hf_model(case: str, seed: int = 1):
    config_class, model_class, extra = CASES[case]
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**COMMON, **extra)).eval()
    with torch.no_grad():  # random, away from the initial values: biases and norms off 0 and 1
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    return model


def assert_same_outputs(ours: Wav2Vec2Model, theirs, lengths=(3000, 2200)):
    """Each item alone through transformers (no padding there) against speechkit's padded batch."""
    wav, lengths_tensor = waveforms(list(lengths))
    with torch.no_grad():
        got = ours(wav, lengths_tensor)
        for index, length in enumerate(lengths):
            expected = theirs(wav[index:index + 1, :length], output_hidden_states=True)
            frames = int(got.lengths[index])
            assert expected.last_hidden_state.shape[1] == frames
            torch.testing.assert_close(got.output[index, :frames], expected.last_hidden_state[0], atol=ATOL,
                                       rtol=0)
            if not ours.config.layer_norm_first:  # pre-norm: the last hidden state is after the final norm
                for layer, hidden in enumerate(expected.hidden_states):
                    torch.testing.assert_close(got.hidden_states[layer][index, :frames], hidden[0], atol=ATOL,
                                               rtol=0, msg=lambda m, layer=layer: f"layer {layer}: {m}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_transformers_folder_loads_with_equal_features(tmp_path, case):
    theirs = hf_model(case)
    theirs.save_pretrained(tmp_path / "hf")
    ours, extra, model_type = load_encoder(tmp_path / "hf")
    assert model_type == theirs.config.model_type and extra == {}
    assert_same_outputs(ours.eval(), theirs)
    # The features interface reads the folder too; layer=None is last_hidden_state.
    features = Wav2Vec2Features.from_huggingface(tmp_path / "hf")
    wav, lengths = waveforms([2600])
    normalized = (wav - wav.mean()) / torch.sqrt(wav.var(unbiased=False) + 1e-7)
    with torch.no_grad():
        expected = theirs(normalized).last_hidden_state
    got, _ = features.extract_batch(wav, lengths)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_exported_encoder_loads_in_transformers_with_equal_features(tmp_path, case):
    reference = hf_model(case, seed=2)
    reference.save_pretrained(tmp_path / "reference")
    config, _, model_type = load_encoder(tmp_path / "reference")[0].config, None, reference.config.model_type
    torch.manual_seed(3)
    ours = Wav2Vec2Model(config).eval()
    with torch.no_grad():
        for parameter in ours.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    export_encoder(ours, tmp_path / "exported", model_type)
    written = json.loads((tmp_path / "exported" / "config.json").read_text())
    assert written["model_type"] == model_type
    theirs = type(reference).from_pretrained(tmp_path / "exported").eval()
    assert_same_outputs(ours, theirs)
    # And back: the same tensors.
    again, _, _ = load_encoder(tmp_path / "exported")
    for name, tensor in ours.state_dict().items():
        assert torch.equal(again.state_dict()[name], tensor), name


def test_ctc_head_of_a_task_model_comes_back_as_extra(tmp_path):
    torch.manual_seed(0)
    model = transformers.WavLMForCTC(transformers.WavLMConfig(**COMMON, num_conv_pos_embeddings=6,
                                                              num_buckets=16, max_bucket_distance=40,
                                                              vocab_size=7)).eval()
    model.save_pretrained(tmp_path / "ctc")
    ours, extra, _ = load_encoder(tmp_path / "ctc")
    assert sorted(extra) == ["lm_head.bias", "lm_head.weight"]
    export_encoder(ours, tmp_path / "out", "wavlm", extra=extra)
    back = transformers.WavLMForCTC.from_pretrained(tmp_path / "out").eval()
    wav, _ = waveforms([2000])
    with torch.no_grad():
        torch.testing.assert_close(back(wav).logits, model(wav).logits, atol=ATOL, rtol=0)


@pytest.mark.parametrize("key, value, message", [
    ("hidden_size", "32", "hidden_size'? must be an integer"),
    ("num_buckets", -1, "num_buckets must be an integer >= 0"),
    ("num_buckets", 10**9, "num_buckets must be an integer <= 100000"),
    ("max_bucket_distance", 1.5, "max_bucket_distance must be an integer"),
    ("conv_dim", [24, 0, 32], r"conv_dim(\[1\]'| must be a non-empty list)"),
    ("do_stable_layer_norm", "yes", "do_stable_layer_norm'? must be true or false"),
    ("hidden_act", "relu", "hidden_act='relu' is not supported"),
    ("num_attention_heads", 5, "not divisible by num_heads"),
])
def test_bad_config_values_name_the_file_and_key(tmp_path, key, value, message):
    hf_model("wavlm").save_pretrained(tmp_path / "hf")
    path = tmp_path / "hf" / "config.json"
    config = json.loads(path.read_text())
    config[key] = value
    path.write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=message) as error:
        load_encoder(tmp_path / "hf")
    assert "config.json" in str(error.value)


def test_data2vec_positional_layers_are_bounded(tmp_path):
    hf_model("data2vec-audio").save_pretrained(tmp_path / "hf")
    path = tmp_path / "hf" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "num_conv_pos_embeddings": 1000}))
    with pytest.raises(CheckpointError, match="num_conv_pos_embeddings .*must be in \\[1, 64\\], got 1000"):
        load_encoder(tmp_path / "hf")


def test_unknown_model_type_and_wrong_layout_are_refused(tmp_path):
    hf_model("hubert").save_pretrained(tmp_path / "hf")
    path = tmp_path / "hf" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "model_type": "whisper"}))
    with pytest.raises(CheckpointError, match="model_type 'whisper'"):
        load_encoder(tmp_path / "hf")
    plain = Wav2Vec2Model(Wav2Vec2Config.preset("small", num_layers=1))
    with pytest.raises(Exception, match="layout of hubert, it cannot be written as wavlm"):
        export_encoder(plain, tmp_path / "out", "wavlm")
