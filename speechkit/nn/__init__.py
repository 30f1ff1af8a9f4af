"""Layers and losses on plain tensors with absolute lengths (no batch objects, ranks or files).

Example:
    >>> import torch
    >>> from speechkit.nn import ConformerBlock
    >>> ConformerBlock(32, 4, 64, kernel_size=7)(torch.randn(2, 9, 32), torch.tensor([9, 4])).shape
    torch.Size([2, 9, 32])
"""

from speechkit.nn.attention import MultiHeadAttention, attention_mask, scaled_dot_product_attention_aligned
from speechkit.nn.conformer import ConformerBlock, ConvolutionModule
from speechkit.nn.feedforward import FeedForward
from speechkit.nn.losses import CTCLoss, LabelSmoothedNLLLoss, ctc_loss, label_smoothed_nll_loss
from speechkit.nn.margin_losses import AAMSoftmaxLoss, AMSoftmaxLoss
from speechkit.nn.masks import check_lengths, length_mask, values_checkable, zero_padding
from speechkit.nn.normalization import MaskedInstanceNorm, masked_mean_var
from speechkit.nn.pit import PITLoss, apply_permutation, pairwise_si_snr, pit_si_snr_loss
from speechkit.nn.positional import RotaryEmbedding, SinusoidalPositionalEncoding, sinusoid_table
from speechkit.nn.stft import STFT, make_window, num_frames, power_spectrum, stft
from speechkit.nn.stft_loss import MultiResolutionSTFTLoss, multi_resolution_stft_loss, stft_distances
from speechkit.nn.subsampling import Conv2dSubsampling, subsampled_lengths
from speechkit.nn.transformer import TransformerDecoderLayer, TransformerEncoderLayer

__all__ = [
    "AAMSoftmaxLoss",
    "AMSoftmaxLoss",
    "CTCLoss",
    "ConformerBlock",
    "Conv2dSubsampling",
    "ConvolutionModule",
    "FeedForward",
    "LabelSmoothedNLLLoss",
    "MaskedInstanceNorm",
    "MultiHeadAttention",
    "MultiResolutionSTFTLoss",
    "STFT",
    "PITLoss",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "TransformerDecoderLayer",
    "TransformerEncoderLayer",
    "apply_permutation",
    "attention_mask",
    "check_lengths",
    "ctc_loss",
    "label_smoothed_nll_loss",
    "length_mask",
    "make_window",
    "masked_mean_var",
    "multi_resolution_stft_loss",
    "num_frames",
    "pairwise_si_snr",
    "pit_si_snr_loss",
    "power_spectrum",
    "scaled_dot_product_attention_aligned",
    "sinusoid_table",
    "stft",
    "stft_distances",
    "subsampled_lengths",
    "values_checkable",
    "zero_padding",
]
