"""Layers and losses of speechkit.nn: shapes, masks, exact lengths, batch invariance, bad inputs."""

from __future__ import annotations

import pytest
import torch

from speechkit.errors import DataError, HparamsError
from speechkit.nn import (
    ConformerBlock,
    Conv2dSubsampling,
    ConvolutionModule,
    MaskedInstanceNorm,
    MultiHeadAttention,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    TransformerDecoderLayer,
    TransformerEncoderLayer,
    ctc_loss,
    label_smoothed_nll_loss,
    length_mask,
    masked_mean_var,
    scaled_dot_product_attention_aligned,
    subsampled_lengths,
    zero_padding,
)
from tests.helpers.batch_invariance import assert_batch_invariant

D = 16


def features(*lengths, dim=D):
    return [torch.randn(n, dim) for n in lengths]


def test_length_mask_and_zero_padding():
    mask = length_mask(torch.tensor([0, 2, 3]), 4)
    assert mask.tolist() == [[False] * 4, [True, True, False, False], [True, True, True, False]]
    x = torch.full((2, 3, 2), float("nan"))
    x[0, :1] = 1.0
    x[1, :3] = 2.0
    y = zero_padding(x, torch.tensor([1, 3]))
    assert torch.equal(y[0, :, 0], torch.tensor([1.0, 0.0, 0.0]))
    assert not torch.isnan(y).any()


def test_masked_mean_var_ignores_padding():
    x = torch.tensor([[[1.0], [3.0], [100.0]]])
    mean, var = masked_mean_var(x, torch.tensor([2]))
    assert mean.item() == pytest.approx(2.0)
    assert var.item() == pytest.approx(1.0)


def test_masked_instance_norm_is_batch_invariant():
    norm = MaskedInstanceNorm(D)
    outputs = assert_batch_invariant(norm, features(5, 11, 2), output_lengths_from=0)
    assert outputs[1].mean(0).abs().max() < 1e-5  # each utterance is centred on its own frames


def test_attention_ignores_padded_keys_and_is_causal():
    mha = MultiHeadAttention(D, 4, rotary=True)
    assert_batch_invariant(lambda x, n: mha(x, key_lengths=n), features(3, 10, 7), output_lengths_from=0)
    x = torch.randn(1, 6, D)
    full = mha(x, causal=True)
    prefix = mha(x[:, :4], causal=True)
    torch.testing.assert_close(full[:, :4], prefix, atol=1e-5, rtol=1e-4)


def test_attention_zero_length_key_gives_finite_output():
    mha = MultiHeadAttention(D, 2)
    out = mha(torch.randn(2, 3, D), torch.randn(2, 5, D), key_lengths=torch.tensor([0, 5]))
    assert torch.isfinite(out).all()


def test_rotary_embedding_depends_on_relative_position_only():
    rotary = RotaryEmbedding(8)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    # Place the same q/k pair at distance 2 starting from two different absolute offsets.
    def score(offset):
        qs = torch.zeros(1, 1, offset + 3, 8)
        ks = torch.zeros(1, 1, offset + 3, 8)
        qs[..., offset + 2, :] = q[..., 0, :]
        ks[..., offset, :] = k[..., 0, :]
        rq, rk = rotary(qs, ks)
        return (rq[..., offset + 2, :] * rk[..., offset, :]).sum()

    assert score(0).item() == pytest.approx(score(7).item(), abs=1e-5)


def test_sinusoidal_positions_and_bad_size():
    pe = SinusoidalPositionalEncoding(8, scale_input=False)
    out = pe(torch.zeros(1, 4, 8))
    assert out[0, 0, 1].item() == pytest.approx(1.0)  # cos(0)
    with pytest.raises(HparamsError, match="even"):
        SinusoidalPositionalEncoding(7)


@pytest.mark.parametrize("norm", ["layer", "instance"])
def test_convolution_module_zeroes_padding_before_depthwise_conv(norm):
    conv = ConvolutionModule(D, kernel_size=7, norm=norm)
    assert_batch_invariant(conv, features(4, 12, 9), output_lengths_from=0)


def test_conformer_block_batch_invariant():
    block = ConformerBlock(D, num_heads=4, ffn_dim=32, kernel_size=5, dropout=0.1)
    assert_batch_invariant(block, features(13, 3, 8, 1), output_lengths_from=0)
    assert block.training  # the helper restores the mode it found


def test_conformer_block_rejects_even_kernel():
    with pytest.raises(HparamsError, match="odd"):
        ConformerBlock(D, 4, 32, kernel_size=4)


def test_transformer_layers_batch_invariant():
    enc = TransformerEncoderLayer(D, 2, 32)
    assert_batch_invariant(enc, features(2, 9, 5), output_lengths_from=0)
    dec = TransformerDecoderLayer(D, 2, 32)
    items = [(torch.randn(t, D), torch.randn(m, D)) for t, m in ((3, 10), (6, 4), (1, 7))]
    assert_batch_invariant(dec, items, output_lengths_from=0)


def test_subsampling_lengths_exact_and_batch_invariant():
    sub = Conv2dSubsampling(input_size=20, d_model=D, channels=8)
    for n in range(7, 40):
        y, lengths = sub(torch.randn(1, n, 20), torch.tensor([n]))
        assert y.shape[1] == lengths.item() == subsampled_lengths(torch.tensor([n])).item()
    assert_batch_invariant(sub, features(7, 30, 18, dim=20))


def test_subsampling_bad_inputs():
    sub = Conv2dSubsampling(input_size=20, d_model=D)
    with pytest.raises(DataError, match="at least 7"):
        sub(torch.randn(2, 10, 20), torch.tensor([10, 5]))
    with pytest.raises(DataError, match=r"\(batch, time, 20\)"):
        sub(torch.randn(2, 10, 21), torch.tensor([10, 5]))
    with pytest.raises(DataError, match="relative"):
        sub(torch.randn(2, 10, 20), torch.tensor([1.0, 0.5]))
    with pytest.raises(DataError, match=r"\[0, 10\]"):
        sub(torch.randn(2, 10, 20), torch.tensor([11, 8]))


def test_ctc_loss_matches_per_item_and_ignores_padding():
    torch.manual_seed(1)
    log_probs = torch.randn(3, 12, 6).log_softmax(-1)
    targets = torch.tensor([[1, 2, 3], [4, 0, 0], [5, 5, 0]])
    in_lengths, tgt_lengths = torch.tensor([12, 5, 9]), torch.tensor([3, 1, 2])
    per_item = ctc_loss(log_probs, targets, in_lengths, tgt_lengths, reduction="none")
    for i in range(3):
        alone = ctc_loss(
            log_probs[i : i + 1, : in_lengths[i]],
            targets[i : i + 1, : tgt_lengths[i]],
            in_lengths[i : i + 1],
            tgt_lengths[i : i + 1],
        )
        assert per_item[i].item() == pytest.approx(alone.item(), rel=1e-5)
    mean = ctc_loss(log_probs, targets, in_lengths, tgt_lengths)
    assert mean.item() == pytest.approx(per_item.mean().item(), rel=1e-6)
    with pytest.raises(DataError, match="reduction"):
        ctc_loss(log_probs, targets, in_lengths, tgt_lengths, reduction="avg")
    with pytest.raises(DataError, match="CTC input lengths"):
        ctc_loss(log_probs, targets, torch.tensor([13, 5, 9]), tgt_lengths)


def test_label_smoothed_nll_loss():
    log_probs = torch.randn(2, 4, 5).log_softmax(-1)
    targets = torch.tensor([[1, 2, 3, 4], [2, 2, 9, 9]])  # 9 is padding (out of vocab) and must be ignored
    lengths = torch.tensor([4, 2])
    plain = label_smoothed_nll_loss(log_probs, targets, lengths, reduction="none")
    expected = -log_probs[1, torch.arange(2), targets[1, :2]].mean()
    assert plain[1].item() == pytest.approx(expected.item(), rel=1e-6)
    smooth = label_smoothed_nll_loss(log_probs, targets, lengths, label_smoothing=0.1, reduction="none")
    uniform = -log_probs[1, :2].mean(-1).mean()
    assert smooth[1].item() == pytest.approx(0.9 * expected.item() + 0.1 * uniform.item(), rel=1e-5)
    with pytest.raises(DataError, match="targets must have shape"):
        label_smoothed_nll_loss(log_probs, targets[:, :3], lengths)


def test_depthwise_subsampling_same_lengths_and_batch_invariant():
    sub = Conv2dSubsampling(input_size=20, d_model=D, channels=8, depthwise=True)
    outputs = assert_batch_invariant(sub, features(7, 30, 18, dim=20))
    assert [o.shape[0] for o in outputs] == subsampled_lengths(torch.tensor([7, 30, 18])).tolist()


def test_helper_catches_padding_leaks():
    # A mean over the padded time axis and a convolution that reads padding both depend on the batch.
    with pytest.raises(AssertionError, match="item"):
        assert_batch_invariant(
            lambda x, n: x - x.mean(dim=1, keepdim=True), features(4, 9), output_lengths_from=0
        )
    leaky_conv = torch.nn.Conv1d(D, D, 3, padding=1)
    with pytest.raises(AssertionError, match="item"):
        assert_batch_invariant(
            lambda x, n: leaky_conv(x.transpose(1, 2)).transpose(1, 2),
            features(4, 9),
            output_lengths_from=0,
        )
    with pytest.raises(AssertionError, match="item 0"):
        assert_batch_invariant(lambda x, n: [n.max().item()] * len(n), features(4, 9))
    with pytest.raises(ValueError, match="different lengths"):
        assert_batch_invariant(lambda x, n: x, features(4, 4))


def test_head_padding_for_aligned_attention_kernels_changes_nothing():
    q, k, v = torch.randn(2, 4, 5, 36), torch.randn(2, 4, 7, 36), torch.randn(2, 4, 7, 36)
    mask = length_mask(torch.tensor([7, 3]), 7)[:, None, None, :]
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    aligned = scaled_dot_product_attention_aligned(q, k, v, mask)
    assert aligned.shape == expected.shape
    torch.testing.assert_close(aligned, expected, atol=1e-5, rtol=1e-5)
