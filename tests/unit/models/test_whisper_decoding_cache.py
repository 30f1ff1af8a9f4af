"""The Whisper decoder's fast paths give the numbers of the plain ones: the cross-attention keys and values
of the cache (one product, stored in the layout a step reads) equal two separate projections, stepping with
the cache equals the whole-sequence forward, and greedy search without log-probabilities takes the same
tokens as with them."""
import pytest
import torch

from speechkit.models.whisper import WhisperConfig, WhisperModel
from speechkit.models.whisper.rules import TokenRules
from speechkit.models.whisper.search import greedy_search


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = WhisperConfig(vocab_size=60, d_model=32, encoder_layers=1, decoder_layers=2, pad_token_id=0,
                           encoder_heads=4, decoder_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                           num_mel_bins=80)
    model = WhisperModel(config).eval()
    with torch.no_grad():  # a visible v_proj bias, so that the keys' zero bias is told apart from it
        for layer in model.decoder.layers:
            layer.encoder_attn.v_proj.bias.normal_()
    return model


def _states(model, batch: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        return model.encoder(torch.randn(batch, 80, 3000, generator=generator))


def test_cross_keys_and_values_equal_two_projections_in_the_step_layout(model):
    states = _states(model, 3)
    for layer in model.decoder.layers:
        attention = layer.encoder_attn
        with torch.no_grad():
            keys, values = attention.project_cross_keys_values(states)
            expected_keys, expected_values = attention.project_keys_values(states)
        assert keys.shape == (3, 4, 8, 1500) and values.shape == (3, 4, 1500, 8)
        assert keys.is_contiguous() and values.is_contiguous()  # a step reads them without a copy
        torch.testing.assert_close(keys, expected_keys.transpose(-1, -2), atol=1e-6, rtol=0)
        torch.testing.assert_close(values, expected_values, atol=1e-6, rtol=0)


def test_steps_with_the_cache_equal_the_whole_sequence(model):
    states = _states(model, 2, seed=1)
    tokens = torch.tensor([[1, 5, 7, 9, 11, 13], [2, 6, 8, 10, 12, 14]])
    with torch.no_grad():
        expected = model.decoder(tokens, states)
        cache = model.decoder.new_cache(states, capacity=8)
        got = [model.decoder.step(tokens[:, :3], cache)]  # a prompt of 3, then one token at a time
        got += [model.decoder.step(tokens[:, i:i + 1], cache) for i in range(3, 6)]
    assert cache.length == 6
    torch.testing.assert_close(torch.stack(got, dim=1), expected[:, 2:], atol=1e-4, rtol=0)


def test_greedy_without_log_probs_takes_the_same_tokens(model):
    states = _states(model, 4, seed=2)
    rules = TokenRules(60, suppress=[3], begin_suppress=[4], prompt_length=2)
    unended = greedy_search(model.decoder, states, [1, 2], rules, -1, 0, 20, log_probs=False)
    assert unended.ended == [False] * 4 and all(len(row) == 18 for row in unended.tokens)
    eos = unended.tokens[0][3]  # the first item ends at its fourth token (or sooner), the batch goes on
    scored = greedy_search(model.decoder, states, [1, 2], rules, eos, 0, 20)
    plain = greedy_search(model.decoder, states, [1, 2], rules, eos, 0, 20, log_probs=False)
    assert plain.tokens == scored.tokens and plain.ended == scored.ended
    assert scored.ended[0] and len(scored.tokens[0]) <= 3
    assert plain.scores is None and plain.token_log_probs is None
    assert len(scored.scores) == 4 and all(score <= 0 for score in scored.scores)
