"""Complete models: shapes, configurable sizes, batch invariance, gradients, bad hyperparameters."""

from __future__ import annotations

import pytest
import torch

from speechkit.errors import DataError, HparamsError
from speechkit.models import (
    ConformerEncoder,
    CTCHead,
    LSTMLanguageModel,
    RecurrentEncoder,
    TransformerDecoder,
    TransformerEncoder,
    TransformerLanguageModel,
)
from speechkit.models.recurrent import stack_frames
from speechkit.nn import ctc_loss, label_smoothed_nll_loss
from tests.helpers.batch_invariance import assert_batch_invariant

FEATS = 24


def small_conformer(**overrides):
    sizes = dict(
        input_size=FEATS, d_model=32, num_heads=4, num_layers=2, ffn_dim=64, kernel_size=7, dropout=0.1
    )
    sizes.update(overrides)
    return ConformerEncoder(**sizes)


def utterances(*frames):
    return [torch.randn(n, FEATS) for n in frames]


@pytest.mark.parametrize("conv_norm", ["layer", "instance"])
def test_conformer_encoder_batch_invariant(conv_norm):
    encoder = small_conformer(conv_norm=conv_norm)
    outputs = assert_batch_invariant(encoder, utterances(61, 17, 40, 9))
    assert [o.shape[0] for o in outputs] == [14, 3, 9, 1]
    assert outputs[0].shape[1] == 32


def test_transformer_encoder_batch_invariant():
    encoder = TransformerEncoder(FEATS, d_model=32, num_heads=2, num_layers=2, ffn_dim=64)
    assert_batch_invariant(encoder, utterances(33, 50, 11))


@pytest.mark.parametrize("rnn, bidirectional", [("lstm", True), ("gru", False)])
def test_recurrent_encoder_batch_invariant(rnn, bidirectional):
    encoder = RecurrentEncoder(FEATS, d_model=24, hidden_size=16, num_layers=2, rnn=rnn,
                               bidirectional=bidirectional)
    outputs = assert_batch_invariant(encoder, utterances(61, 17, 40, 9))
    assert [o.shape for o in outputs] == [(15, 24), (4, 24), (10, 24), (2, 24)]


def test_recurrent_encoder_upsampling_splits_each_frame_into_consecutive_outputs():
    encoder = RecurrentEncoder(FEATS, d_model=6, hidden_size=8, num_layers=1, stride=4, upsample=2)
    outputs = assert_batch_invariant(encoder, utterances(61, 17, 9))
    assert [o.shape for o in outputs] == [(30, 6), (8, 6), (4, 6)]
    single = RecurrentEncoder(FEATS, d_model=12, hidden_size=8, num_layers=1, stride=4).eval()
    single.load_state_dict(encoder.state_dict())  # same weights: one 12-wide frame = two 6-wide ones
    x, lengths = torch.randn(2, 40, FEATS), torch.tensor([40, 23])
    with torch.no_grad():
        wide, wide_lengths = single(x, lengths)
        split, split_lengths = encoder.eval()(x, lengths)
    assert split_lengths.tolist() == (2 * wide_lengths).tolist() == [20, 10]
    assert torch.equal(split.reshape(2, 10, 12), wide)
    with pytest.raises(HparamsError, match="upsample must be >= 1"):
        RecurrentEncoder(FEATS, upsample=0)


def test_recurrent_encoder_equals_a_packed_bidirectional_lstm():
    encoder = RecurrentEncoder(FEATS, d_model=8, hidden_size=6, num_layers=2, stride=2).eval()
    reference = torch.nn.LSTM(2 * FEATS, 6, 2, batch_first=True, bidirectional=True)
    with torch.no_grad():
        for layer, directions in enumerate(encoder.layers):
            for suffix, rnn in zip(("", "_reverse"), directions):
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    getattr(reference, f"{name}_l{layer}{suffix}").copy_(getattr(rnn, f"{name}_l0"))
    x, lengths = torch.randn(3, 30, FEATS), torch.tensor([30, 17, 24])
    with torch.no_grad():
        y, y_lengths = encoder(x, lengths)
        stacked, _ = stack_frames(x, lengths, 2)
        packed = torch.nn.utils.rnn.pack_padded_sequence(stacked, y_lengths, batch_first=True,
                                                         enforce_sorted=False)
        expected, _ = torch.nn.utils.rnn.pad_packed_sequence(reference(packed)[0], batch_first=True)
        expected = encoder.proj(expected)
    for i, n in enumerate(y_lengths.tolist()):
        torch.testing.assert_close(y[i, :n], expected[i, :n], atol=1e-5, rtol=1e-5)


def test_recurrent_encoder_stacks_frames_and_zeroes_padding():
    x = torch.arange(2 * 9 * 2, dtype=torch.float32).view(2, 9, 2)
    stacked, lengths = stack_frames(x, torch.tensor([9, 5]), 3)
    assert stacked.shape == (2, 3, 6) and lengths.tolist() == [3, 1]
    assert stacked[0, 1].tolist() == x[0, 3:6].flatten().tolist()
    encoder = RecurrentEncoder(FEATS, d_model=8, hidden_size=8, num_layers=1, stride=2)
    y, y_lengths = encoder(torch.randn(2, 20, FEATS), torch.tensor([20, 9]))
    assert y_lengths.tolist() == [10, 4] and (y[1, 4:] == 0).all() and (y[1, :4] != 0).any()
    with pytest.raises(HparamsError, match="rnn must be one of"):
        RecurrentEncoder(FEATS, rnn="transformer")
    with pytest.raises(DataError, match="at least 4"):
        RecurrentEncoder(FEATS)(torch.randn(1, 3, FEATS), torch.tensor([3]))
    with pytest.raises(DataError, match=f"\\(batch, time, {FEATS}\\)"):
        RecurrentEncoder(FEATS)(torch.randn(1, 30, FEATS + 1), torch.tensor([30]))


def test_encoder_ctc_head_and_loss_train_end_to_end():
    encoder, head = small_conformer(), CTCHead(32, 7)
    x, lengths = torch.randn(2, 80, FEATS), torch.tensor([80, 50])
    encoded, encoded_lengths = encoder(x, lengths)
    log_probs = head(encoded)
    assert log_probs.dtype == torch.float32
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(2, 19))
    loss = ctc_loss(log_probs, torch.tensor([[1, 2, 3], [4, 5, 0]]), encoded_lengths, torch.tensor([3, 2]))
    loss.backward()
    grads = [p.grad for p in encoder.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_sizes_are_configurable_and_checked():
    encoder = small_conformer(d_model=48, num_heads=6, num_layers=3, ffn_dim=96, kernel_size=15)
    assert len(encoder.layers) == 3
    assert encoder.layers[0].conv.depthwise.kernel_size == (15,)
    assert encoder.layers[0].ffn1.net[0].out_features == 96
    with pytest.raises(HparamsError, match="multiple of num_heads"):
        small_conformer(d_model=30, num_heads=4)
    with pytest.raises(HparamsError, match="odd"):
        small_conformer(kernel_size=8)
    with pytest.raises(DataError, match="at least 7"):
        small_conformer()(torch.randn(1, 5, FEATS), torch.tensor([5]))


def test_bf16_autocast_forward_runs():
    encoder, head = small_conformer().eval(), CTCHead(32, 7)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        encoded, lengths = encoder(torch.randn(2, 40, FEATS), torch.tensor([40, 30]))
        log_probs = head(encoded)
    assert log_probs.dtype == torch.float32 and torch.isfinite(log_probs).all()


def test_transformer_decoder_batch_invariant_and_teacher_forcing():
    decoder = TransformerDecoder(vocab_size=12, d_model=32, num_heads=4, num_layers=2, ffn_dim=64)
    items = [(torch.randint(0, 12, (t,)), torch.randn(m, 32)) for t, m in ((5, 9), (2, 20), (8, 4))]
    assert_batch_invariant(decoder, items, output_lengths_from=0)
    tokens, memory = torch.randint(0, 12, (1, 6)), torch.randn(1, 9, 32)
    decoder.eval()
    full = decoder(tokens, torch.tensor([6]), memory, torch.tensor([9]))
    # The prediction after a prefix equals the teacher-forced prediction at that position (causality).
    step = decoder.score_next(tokens[:, :4], memory, torch.tensor([9]))
    torch.testing.assert_close(step, full[:, 3], atol=1e-5, rtol=1e-4)
    loss = label_smoothed_nll_loss(full, tokens, torch.tensor([6]), label_smoothing=0.1)
    assert torch.isfinite(loss)


@pytest.mark.parametrize("lm_class", [LSTMLanguageModel, TransformerLanguageModel])
def test_language_models_batch_invariant_and_step_interface(lm_class):
    if lm_class is LSTMLanguageModel:
        lm = LSTMLanguageModel(vocab_size=15, embedding_dim=16, hidden_size=32, num_layers=2)
    else:
        lm = TransformerLanguageModel(vocab_size=15, d_model=32, num_heads=4, num_layers=2, ffn_dim=64)
    assert_batch_invariant(lm, [torch.randint(0, 15, (n,)) for n in (7, 2, 11)], output_lengths_from=0)
    lm.eval()
    tokens = torch.randint(0, 15, (3, 5))
    with torch.no_grad():
        full = lm(tokens, torch.tensor([5, 5, 5]))
        state = lm.initial_state()
        for t in range(5):
            step, state = lm.score_next(tokens[:, : t + 1], state)
            torch.testing.assert_close(step, full[:, t], atol=1e-5, rtol=1e-4)
        picked = lm.select_state(state, torch.tensor([2, 0]))
        nxt, _ = lm.score_next(torch.cat([tokens[[2, 0]], tokens[[2, 0], :1]], 1), picked)
        reference = lm(torch.cat([tokens[[2, 0]], tokens[[2, 0], :1]], 1), torch.tensor([6, 6]))[:, -1]
    torch.testing.assert_close(nxt, reference, atol=1e-5, rtol=1e-4)


def test_language_model_rejects_bad_lengths():
    lm = LSTMLanguageModel(vocab_size=10, embedding_dim=8, hidden_size=8, num_layers=1)
    with pytest.raises(DataError, match="LM token lengths"):
        lm(torch.zeros(2, 4, dtype=torch.long), torch.tensor([4, 5]))
