"""A tiny CTC recognizer model folder (fbank, normalization, recurrent encoder, CTC head) for the export and
streaming tests: random weights, global normalization statistics from random audio, 16 mel bins.

``streaming=True`` gives the streaming layout (unidirectional encoder, global statistics); otherwise the
offline one (bidirectional encoder, per-utterance normalization).
"""
from __future__ import annotations

from pathlib import Path

import torch

from tests.integration.pretrained import tiny_asr

SIZES = dict(n_mels=16, d_model=16, hidden_size=12, num_layers=2, stride=4, upsample=2)
HYPERPARAMS = """\
interface: EncoderASR
sample_rate: 16000
compute_features: !new:speechkit.features.Fbank
  n_mels: {n_mels}
normalize: {normalize}
encoder: !new:speechkit.models.RecurrentEncoder
  input_size: {n_mels}
  d_model: {d_model}
  hidden_size: {hidden_size}
  num_layers: {num_layers}
  stride: {stride}
  upsample: {upsample}
  bidirectional: {bidirectional}
ctc_head: !new:speechkit.models.CTCHead
  d_model: {d_model}
  vocab_size: {vocab}
tokenizer: !new:tests.integration.pretrained.tiny_asr.CharTokenizer
modules:
  compute_features: !ref <compute_features>
  normalize: !ref <normalize>
  encoder: !ref <encoder>
  ctc_head: !ref <ctc_head>
encoder_pipeline: [compute_features, normalize, encoder, ctc_head]
decoding:
  blank_index: 0
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
{loadables}    encoder: !ref <encoder>
    ctc_head: !ref <ctc_head>
    tokenizer: !ref <tokenizer>
  paths:
{paths}    encoder: encoder.safetensors
    ctc_head: ctc_head.safetensors
    tokenizer: tokenizer.json
"""


LM_HYPERPARAMS = """\
lm: !new:speechkit.models.LSTMLanguageModel
  vocab_size: {vocab}
  embedding_dim: 8
  hidden_size: 16
  num_layers: 2
decoder: !new:speechkit.decoding.CTCPrefixBeamSearch
  beam_size: 6
  blank_index: 0
  blank_skip_threshold: 0.999
  lm: !ref <lm>
  lm_weight: 0.6
  length_bonus: 1.0
  bos_index: 0
  eos_index: 0
"""


def write_recognizer(folder, streaming: bool = True, seed: int = 0, lm: bool = False) -> Path:
    """Write the model folder and return it; ``lm=True`` adds a random LSTM LM and the template's kind of
    final decoding, a CTC prefix beam search fused with it (the blank id doubles as the LM's sentence
    boundary)."""
    from speechkit.features import Fbank, GlobalNormalization
    from speechkit.models import CTCHead, RecurrentEncoder
    from speechkit.pretrained.loading import save_weights

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    vocab = len(tiny_asr.SYMBOLS)
    sizes = dict(SIZES)
    n_mels = sizes.pop("n_mels")
    encoder = RecurrentEncoder(n_mels, bidirectional=not streaming, **sizes)
    head = CTCHead(sizes["d_model"], vocab)
    with torch.no_grad():
        head.proj.weight.mul_(4.0)  # confident frames: transcripts that are not all blank
    save_weights(encoder.state_dict(), folder / "encoder.safetensors")
    save_weights(head.state_dict(), folder / "ctc_head.safetensors")
    tiny_asr.CharTokenizer(tiny_asr.SYMBOLS).save_checkpoint(folder / "tokenizer.json")
    if streaming:
        norm = GlobalNormalization(n_mels).train()
        feats, frames = Fbank(n_mels=n_mels)(0.1 * torch.randn(4, 16000), torch.tensor([16000] * 4))
        norm(feats, frames)
        save_weights(norm.state_dict(), folder / "normalize.safetensors")
        normalize = f"!new:speechkit.features.GlobalNormalization\n  num_features: {n_mels}"
        loadables, paths = "    normalize: !ref <normalize>\n", "    normalize: normalize.safetensors\n"
    else:
        normalize, loadables, paths = "!new:speechkit.features.UtteranceNormalization", "", ""
    if lm:
        from speechkit.models import LSTMLanguageModel

        language_model = LSTMLanguageModel(vocab_size=vocab, embedding_dim=8, hidden_size=16, num_layers=2)
        save_weights(language_model.state_dict(), folder / "lm.safetensors")
        loadables, paths = loadables + "    lm: !ref <lm>\n", paths + "    lm: lm.safetensors\n"
    text = HYPERPARAMS.format(n_mels=n_mels, normalize=normalize, bidirectional=not streaming, vocab=vocab,
                              loadables=loadables, paths=paths, **sizes)
    if lm:
        text = LM_HYPERPARAMS.format(vocab=vocab) + text.replace(
            "  ctc_head: !ref <ctc_head>\nencoder_pipeline",
            "  ctc_head: !ref <ctc_head>\n  lm: !ref <lm>\nencoder_pipeline")
    (folder / "hyperparams.yaml").write_text(text)
    return folder


def speech_like(lengths, seed: int = 0) -> tuple:
    """A padded (batch, time) batch of tones and noise with ``lengths`` samples each, and the lengths."""
    generator = torch.Generator().manual_seed(seed)
    lengths = [int(n) for n in lengths]
    wavs = torch.zeros(len(lengths), max(lengths))
    for i, n in enumerate(lengths):
        t = torch.arange(n, dtype=torch.float32) / 16000
        freq = 200 + 1800 * torch.rand((), generator=generator)
        wavs[i, :n] = 0.3 * torch.sin(2 * torch.pi * freq * t * (1 + 0.3 * torch.sin(3 * t))) \
            + 0.05 * torch.randn(n, generator=generator)
    return wavs, torch.tensor(lengths)
