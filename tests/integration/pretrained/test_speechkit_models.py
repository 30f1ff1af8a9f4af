"""Model folders made of speechkit and torch classes load from remote sources without trusting code."""
from __future__ import annotations

import pytest
import torch

from speechkit.data.encoders import CTCLabelEncoder
from speechkit.errors import CheckpointError, UnsafeSourceError
from speechkit.models.encoders import CTCHead, TransformerEncoder
from speechkit.pretrained import EncoderASR
from speechkit.pretrained.loading import save_weights
from tests.helpers.batch_invariance import assert_batch_invariant

YAML = """\
sample_rate: 16000
features: !new:speechkit.features.Fbank
  n_mels: 20
normalizer: !new:speechkit.features.GlobalNormalization
  num_features: 20
encoder: !new:speechkit.models.encoders.TransformerEncoder
  input_size: 20
  d_model: 32
  num_heads: 4
  num_layers: 2
  ffn_dim: 64
ctc_head: !new:speechkit.models.encoders.CTCHead
  d_model: 32
  vocab_size: 6
tokenizer: {tokenizer}
modules:
  features: !ref <features>
  normalizer: !ref <normalizer>
  encoder: !ref <encoder>
  ctc_head: !ref <ctc_head>
encoder_pipeline: [features, normalizer, encoder, ctc_head]
decoding: {{blank_index: 0}}
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
    normalizer: !ref <normalizer>
    encoder: !ref <encoder>
    ctc_head: !ref <ctc_head>
    tokenizer: !ref <tokenizer>
  paths:
    normalizer: normalizer.ckpt
    encoder: encoder.safetensors
    ctc_head: ctc_head.ckpt
    tokenizer: {tokenizer_file}
"""


def _write_model(folder, tokenizer_yaml, tokenizer_file):
    """Random weights (and normalization statistics from random frames) saved as a model folder."""
    from speechkit.features import Fbank, GlobalNormalization

    torch.manual_seed(3)
    normalizer = GlobalNormalization(20)
    normalizer.update(torch.randn(2, 50, 20) * 3 + 1, torch.tensor([50, 40]))
    pipeline = [Fbank(n_mels=20), normalizer.eval(),
                TransformerEncoder(20, d_model=32, num_heads=4, num_layers=2, ffn_dim=64).eval()]
    head = CTCHead(32, 6).eval()
    folder.mkdir(parents=True)
    save_weights(normalizer.state_dict(), folder / "normalizer.ckpt")
    save_weights(pipeline[2].state_dict(), folder / "encoder.safetensors")
    save_weights(head.state_dict(), folder / "ctc_head.ckpt")
    text = YAML.format(tokenizer=tokenizer_yaml, tokenizer_file=tokenizer_file)
    (folder / "hyperparams.yaml").write_text(text)

    def reference(wavs, lengths):
        with torch.no_grad():
            x = wavs
            for module in pipeline:
                x, lengths = module(x, lengths)
            return head(x), lengths

    return reference


def test_label_encoder_model_from_hub_without_trust(hub_server, tmp_path):
    folder = tmp_path / "model"
    reference = _write_model(folder, "!new:speechkit.data.encoders.CTCLabelEncoder", "tokenizer.txt")
    labels = CTCLabelEncoder(["a", "b", "c", "d", " "])
    labels.save(folder / "tokenizer.txt")
    hub_server.repos["org/conformer"] = {"main": {p.name: p.read_bytes() for p in folder.iterdir()}}

    asr = EncoderASR.from_hparams("org/conformer", savedir=tmp_path / "s")  # no trust_remote_code
    wavs = [torch.randn(n) * 0.1 for n in (16000, 7000, 11000)]
    lengths = torch.tensor([len(w) for w in wavs])
    batch = torch.nn.utils.rnn.pad_sequence(wavs, batch_first=True)
    scores, out_lengths = asr.encode_batch(batch, lengths)
    expected, expected_lengths = reference(batch, lengths)
    assert torch.equal(out_lengths, expected_lengths)
    for i, n in enumerate(out_lengths.tolist()):  # the loaded weights and statistics are the saved ones
        torch.testing.assert_close(scores[i, :n], expected[i, :n])
    texts, tokens = asr.transcribe_batch(batch, lengths)
    assert texts == [labels.decode_text(t) for t in tokens] and asr.hparams["tokenizer"] == labels
    assert_batch_invariant(lambda x, n: asr.transcribe_batch(x, n)[0], wavs)


def test_sentencepiece_tokenizer_built_from_its_file(file_server, tmp_path):
    from speechkit.tokenizers import SentencePieceTokenizer

    sp = SentencePieceTokenizer.train(["abc abd", "bad cab", "dab cad"] * 20, tmp_path / "sp", vocab_size=6,
                                      model_type="char", hard_vocab_limit=False)
    folder = tmp_path / "model"
    _write_model(folder, "!name:speechkit.tokenizers.SentencePieceTokenizer", "tokenizer.model")
    sp.save(folder / "tokenizer.model")
    for path in folder.iterdir():
        file_server.files[f"/sp/{path.name}"] = path.read_bytes()
    asr = EncoderASR.from_hparams(f"{file_server.url}/sp", savedir=tmp_path / "s")
    assert isinstance(asr.hparams["tokenizer"], SentencePieceTokenizer)
    texts, tokens = asr.transcribe_batch(torch.randn(2, 8000) * 0.1, torch.tensor([8000, 5000]))
    assert texts == [sp.decode(t) for t in tokens]


def test_remote_class_loadable_outside_speechkit_is_refused(hub_server, tmp_path):
    folder = tmp_path / "model"
    _write_model(folder, "!name:torch.nn.Linear", "tokenizer.txt")
    (folder / "tokenizer.txt").write_text("x")
    hub_server.repos["org/m"] = {"main": {p.name: p.read_bytes() for p in folder.iterdir()}}
    with pytest.raises(CheckpointError, match=r"tokenizer\.txt.*only speechkit classes"):
        EncoderASR.from_hparams("org/m", savedir=tmp_path / "s")


def test_remote_yaml_may_not_name_files_of_this_machine(hub_server, tmp_path):
    secret = tmp_path / "private" / "labels.txt"
    secret.parent.mkdir()
    CTCLabelEncoder(["a", "b", "c", "d", " "]).save(secret)
    folder = tmp_path / "model"
    _write_model(folder, "!new:speechkit.data.encoders.CTCLabelEncoder", str(secret))
    hub_server.repos["org/m"] = {"main": {p.name: p.read_bytes() for p in folder.iterdir()}}
    with pytest.raises(UnsafeSourceError, match=r"'tokenizer' names a file of this machine.*labels\.txt"):
        EncoderASR.from_hparams("org/m", savedir=tmp_path / "s")
    assert not (tmp_path / "s" / "labels.txt").exists()
    # Trusting the source lifts the rule (the same YAML from a local folder is always trusted).
    asr = EncoderASR.from_hparams("org/m", savedir=tmp_path / "t", trust_remote_code=True)
    assert asr.hparams["tokenizer"].labels == CTCLabelEncoder(["a", "b", "c", "d", " "]).labels
