"""Complete models: ASR encoders (Conformer, Transformer, recurrent), a CTC head, an attention decoder, LMs,
a separator (Conv-TasNet), vocoders (mel spectrogram to waveform).

Example:
    >>> import torch
    >>> from speechkit.models import ConformerEncoder, CTCHead
    >>> enc, head = ConformerEncoder(80, 64, 4, 2, 128, 15), CTCHead(64, 30)
    >>> y, lengths = enc(torch.randn(1, 100, 80), torch.tensor([100]))
    >>> head(y).shape
    torch.Size([1, 24, 30])
"""

from speechkit.models.conv_tasnet import ConvTasNet
from speechkit.models.decoder import TransformerDecoder
from speechkit.models.encoders import ConformerEncoder, CTCHead, TransformerEncoder
from speechkit.models.istft_vocoder import ISTFTGenerator
from speechkit.models.language_models import LSTMLanguageModel, TransformerLanguageModel
from speechkit.models.recurrent import RecurrentEncoder, stack_frames
from speechkit.models.vocoder import MelGenerator, MelSpectrogram, griffin_lim

__all__ = [
    "CTCHead",
    "ConvTasNet",
    "ConformerEncoder",
    "ISTFTGenerator",
    "LSTMLanguageModel",
    "MelGenerator",
    "MelSpectrogram",
    "RecurrentEncoder",
    "TransformerDecoder",
    "TransformerEncoder",
    "TransformerLanguageModel",
    "griffin_lim",
    "stack_frames",
]
