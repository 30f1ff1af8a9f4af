"""An ASR recipe's modules and checkpoint layout -> speechkit export -> a model fetched from the Hub, a URL
and a folder, which transcribes exactly as the recipe's own forward pass and greedy decoding."""
from __future__ import annotations

import pathlib

import pytest
import torch

import speechkit
from speechkit.checkpoints import Checkpointer, EpochCounter
from speechkit.cli import main as speechkit_main
from speechkit.decoding import ctc_greedy_decode
from speechkit.pretrained import EncoderASR
from speechkit.tokenizers import SentencePieceTokenizer

# A Conformer recipe's model (the template's own recurrent model and inference.yaml are exported in
# tests/recipes/test_speech_recognition_template.py).
TEMPLATE = pathlib.Path(__file__).parents[3] / "recipes/LibriSpeech/ASR/hparams/ASR.yaml"
SMALL = {"n_mels": 20, "d_model": 32, "num_heads": 4, "num_layers": 2, "ffn_dim": 64, "kernel_size": 5,
         "subsampling_channels": 8, "decoder_layers": 1, "lm_embedding_dim": 8,
         "lm_hidden_size": 16, "lm_layers": 1}

# The model folder's hyperparams.yaml for the recipe's CTC branch: only speechkit classes, so it loads from
# a remote source without trust_remote_code.
INFERENCE = """\
sample_rate: 16000
interface: EncoderASR
compute_features: !new:speechkit.features.Fbank {{sample_rate: 16000, n_mels: {n_mels}}}
normalize: !new:speechkit.features.UtteranceNormalization
encoder: !new:speechkit.models.ConformerEncoder
  input_size: {n_mels}
  d_model: {d_model}
  num_heads: {num_heads}
  num_layers: {num_layers}
  ffn_dim: {ffn_dim}
  kernel_size: {kernel_size}
  subsampling_channels: {subsampling_channels}
ctc_head: !new:speechkit.models.CTCHead {{d_model: {d_model}, vocab_size: {vocab_size}}}
tokenizer: !name:speechkit.tokenizers.SentencePieceTokenizer
modules:
  compute_features: !ref <compute_features>
  normalize: !ref <normalize>
  encoder: !ref <encoder>
  ctc_head: !ref <ctc_head>
encoder_pipeline: [compute_features, normalize, encoder, ctc_head]
decoding: {{blank_index: 0}}
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables: {{encoder: !ref <encoder>, ctc_head: !ref <ctc_head>, tokenizer: !ref <tokenizer>}}
  paths: {{encoder: encoder.safetensors, ctc_head: ctc_head.safetensors, tokenizer: tokenizer.model}}
"""


def test_recipe_checkpoint_exported_and_fetched_from_every_source(tmp_path, hub_server, file_server):
    tokenizer = SentencePieceTokenizer.train(["a bad cab", "dead beef", "a fed bee", "bad face"] * 10,
                                             tmp_path / "tok", vocab_size=30, model_type="char",
                                             hard_vocab_limit=False)
    sizes = dict(SMALL, vocab_size=tokenizer.vocab_size)
    model = speechkit.load_hparams(TEMPLATE, sizes)
    modules = model["modules"]
    # The recipe's checkpointer: every module plus the epoch counter, metrics in the meta.
    checkpointer = Checkpointer(tmp_path / "save", {**modules, "counter": EpochCounter(3)})
    checkpointer.save_checkpoint(meta={"WER": 41.0}, epoch=1)
    with torch.no_grad():
        for p in modules["encoder"].parameters():
            p.add_(0.05 * torch.randn_like(p))
    checkpointer.save_checkpoint(meta={"WER": 17.5}, epoch=2)  # the one to export
    (tmp_path / "inference.yaml").write_text(INFERENCE.format(**sizes))
    assert speechkit_main(["export", "--checkpoints", str(tmp_path / "save"), "--hparams",
                           str(tmp_path / "inference.yaml"), "--min-key", "WER", "--output",
                           str(tmp_path / "exported"), "--file", f"tokenizer={tokenizer.model_path}"]) == 0
    folder = tmp_path / "exported"
    assert "| WER | 17.5 |" in (folder / "README.md").read_text()

    wavs = [torch.randn(n) * 0.1 for n in (12000, 8000, 10000)]
    lengths = torch.tensor([len(w) for w in wavs])
    batch = torch.nn.utils.rnn.pad_sequence(wavs, batch_first=True)
    with torch.no_grad():  # the recipe's own forward pass and greedy decoding
        for module in modules.values():
            module.eval()
        feats, n = model["compute_features"](batch, lengths)
        feats, n = model["normalize"](feats, n)
        encoded, n = modules["encoder"](feats, n)
        expected = [tokenizer.decode(h) for h in ctc_greedy_decode(modules["ctc_head"](encoded), n, 0)]
    assert all(expected), expected  # non-empty transcripts, so the comparison means something

    hub_server.repos["org/asr"] = {"main": {p.name: p.read_bytes() for p in folder.iterdir()}}
    for path in folder.iterdir():
        file_server.files[f"/asr/{path.name}"] = path.read_bytes()
    sources = {"local": str(folder), "hub": "org/asr", "url": f"{file_server.url}/asr"}
    for name, source in sources.items():
        asr = EncoderASR.from_hparams(source, savedir=tmp_path / f"s-{name}")  # no trust_remote_code needed
        texts, _ = asr.transcribe_batch(batch, lengths)
        assert texts == expected, name


# The attention branch: the search object (speechkit.decoding) scores with the decoder, the CTC head and the
# encoder output (joint CTC/attention decoding).
SEQ2SEQ = """\
sample_rate: 16000
interface: EncoderDecoderASR
compute_features: !new:speechkit.features.Fbank {{sample_rate: 16000, n_mels: {n_mels}}}
normalize: !new:speechkit.features.UtteranceNormalization
encoder: !new:speechkit.models.ConformerEncoder
  input_size: {n_mels}
  d_model: {d_model}
  num_heads: {num_heads}
  num_layers: {num_layers}
  ffn_dim: {ffn_dim}
  kernel_size: {kernel_size}
  subsampling_channels: {subsampling_channels}
ctc_head: !new:speechkit.models.CTCHead {{d_model: {d_model}, vocab_size: {vocab_size}}}
transformer_decoder: !new:speechkit.models.TransformerDecoder
  vocab_size: {vocab_size}
  d_model: {d_model}
  num_heads: {num_heads}
  num_layers: 1
  ffn_dim: {ffn_dim}
decoder: !new:speechkit.decoding.AttentionBeamSearch
  decoder: !ref <transformer_decoder>
  bos_index: 1
  eos_index: 1
  beam_size: 3
  ctc_weight: 0.4
tokenizer: !name:speechkit.tokenizers.SentencePieceTokenizer
modules:
  compute_features: !ref <compute_features>
  normalize: !ref <normalize>
  encoder: !ref <encoder>
  ctc_head: !ref <ctc_head>
  transformer_decoder: !ref <transformer_decoder>
encoder_pipeline: [compute_features, normalize, encoder]
decoding: {{blank_index: 0, ctc_module: ctc_head}}
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
    encoder: !ref <encoder>
    ctc_head: !ref <ctc_head>
    transformer_decoder: !ref <transformer_decoder>
    tokenizer: !ref <tokenizer>
  paths:
    encoder: encoder.safetensors
    ctc_head: ctc_head.safetensors
    transformer_decoder: decoder.safetensors
    tokenizer: tokenizer.model
"""


@pytest.mark.slow
def test_attention_model_from_the_hub_decodes_as_the_recipe_search(tmp_path, hub_server):
    from speechkit.decoding import AttentionBeamSearch
    from speechkit.models import TransformerDecoder
    from speechkit.pretrained import Pretrained
    from speechkit.pretrained.loading import save_weights
    from tests.helpers.batch_invariance import assert_batch_invariant

    tokenizer = SentencePieceTokenizer.train(["a bad cab", "dead beef", "a fed bee"] * 10, tmp_path / "tok",
                                             vocab_size=30, model_type="char", hard_vocab_limit=False)
    sizes = dict(SMALL, vocab_size=tokenizer.vocab_size)
    model = speechkit.load_hparams(TEMPLATE, sizes)
    decoder = TransformerDecoder(sizes["vocab_size"], sizes["d_model"], sizes["num_heads"], 1,
                                 sizes["ffn_dim"])
    folder = tmp_path / "exported"
    folder.mkdir()
    weights = {"encoder": model["encoder"], "ctc_head": model["ctc_head"], "decoder": decoder}
    for name, module in weights.items():
        save_weights(module.state_dict(), folder / f"{name}.safetensors")
    tokenizer.save(folder / "tokenizer.model")
    (folder / "hyperparams.yaml").write_text(SEQ2SEQ.format(**sizes))
    hub_server.repos["org/att"] = {"main": {p.name: p.read_bytes() for p in folder.iterdir()}}

    asr = Pretrained.from_hparams("org/att", savedir=tmp_path / "s")  # picks EncoderDecoderASR, no trust
    wavs = [torch.randn(n) * 0.1 for n in (9000, 6000)]
    lengths = torch.tensor([len(w) for w in wavs])
    batch = torch.nn.utils.rnn.pad_sequence(wavs, batch_first=True)
    search = AttentionBeamSearch(decoder.eval(), bos_index=1, eos_index=1, beam_size=3, ctc_weight=0.4)
    with torch.no_grad():
        model["encoder"].eval()
        feats, n = model["normalize"](*model["compute_features"](batch, lengths))
        encoded, n = model["encoder"](feats, n)
        expected = search(encoded, n, model["ctc_head"].eval()(encoded))
    texts, tokens = asr.transcribe_batch(batch, lengths)
    assert tokens == expected and texts == [tokenizer.decode(t) for t in expected]
    assert_batch_invariant(lambda x, n: asr.transcribe_batch(x, n)[1], wavs)
