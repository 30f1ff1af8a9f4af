"""Model folders loaded through the interfaces from every kind of source, and transcribed."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
import soundfile
import torch

from speechkit.data.trim import speech_bounds
from speechkit.errors import AudioError, CheckpointError, HparamsError, UnsafeSourceError
from speechkit.pretrained import EncoderASR, EncoderDecoderASR, FetchFrom, FetchSource, Pretrained
from tests.helpers.batch_invariance import assert_batch_invariant

TEXTS = ["abc", "bad cafe", "g", "feed a bee", "a"]


def _serve_folder(server, folder: pathlib.Path, prefix: str):
    for path in folder.iterdir():
        server.files[f"{prefix}/{path.name}"] = path.read_bytes()


def _check_reads_texts(asr, tiny_asr):
    for text in TEXTS:
        wav = tiny_asr.synthesize(text)
        assert asr.transcribe_batch(wav.unsqueeze(0), torch.tensor([wav.shape[0]]))[0] == [text]


def test_local_folder_loads_in_place_and_transcribes(tiny_asr, tmp_path):
    folder = tiny_asr.write_model_folder(tmp_path / "model")
    asr = EncoderASR.from_hparams(str(folder))
    _check_reads_texts(asr, tiny_asr)
    assert not any(p.is_symlink() for p in folder.iterdir())  # in place: nothing linked into its own folder


def test_url_source_with_untrusted_classes_is_refused_then_trusted(tiny_asr, file_server, tmp_path):
    folder = tiny_asr.write_model_folder(tmp_path / "model")
    _serve_folder(file_server, folder, "/models/tiny")
    refused = r"hyperparams\.yaml.*line 2.*!new:tiny_asr\.FrameToneEncoder"
    with pytest.raises(UnsafeSourceError, match=refused):
        EncoderASR.from_hparams(f"{file_server.url}/models/tiny", savedir=tmp_path / "s")
    assert file_server.gets("/models/tiny/encoder.safetensors") == 0  # refused before fetching the weights
    asr = EncoderASR.from_hparams(f"{file_server.url}/models/tiny", savedir=tmp_path / "s",
                                  trust_remote_code=True)
    _check_reads_texts(asr, tiny_asr)
    assert (tmp_path / "s" / "encoder.safetensors").is_symlink()


def test_hub_source_and_offline_reload(tiny_asr, hub_server, tmp_path, monkeypatch):
    folder = tiny_asr.write_model_folder(tmp_path / "model")
    hub_server.repos["org/tiny"] = {"main": {p.name: p.read_bytes() for p in folder.iterdir()}}
    asr = EncoderASR.from_hparams("org/tiny", savedir=tmp_path / "s", trust_remote_code=True)
    _check_reads_texts(asr, tiny_asr)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    requests = sum(hub_server.counts.values())
    again = EncoderASR.from_hparams("org/tiny", savedir=tmp_path / "s2", trust_remote_code=True)
    _check_reads_texts(again, tiny_asr)
    assert sum(hub_server.counts.values()) == requests


def test_mixed_sources_in_one_model(tiny_asr, hub_server, file_server, tmp_path):
    """hyperparams from a local folder, weights from a Hub repo, tokenizer from a URL."""
    weights = tiny_asr.write_model_folder(tmp_path / "w")
    encoder_bytes = (weights / "encoder.safetensors").read_bytes()
    hub_server.repos["org/weights"] = {"main": {"enc.safetensors": encoder_bytes}}
    file_server.files["/tok/tokenizer.json"] = (weights / "tokenizer.json").read_bytes()
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "hyperparams.yaml").write_text(tiny_asr.HYPERPARAMS.format(
        encoder_path="org/weights/enc.safetensors", tokenizer_path=f"{file_server.url}/tok/tokenizer.json"))
    asr = EncoderASR.from_hparams(str(folder), savedir=tmp_path / "s")
    _check_reads_texts(asr, tiny_asr)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["enc.safetensors", "hyperparams.yaml",
                                                                   "tokenizer.json"]


def test_fetch_source_forces_hub_over_same_named_folder(tiny_asr, hub_server, tmp_path, monkeypatch):
    good = tiny_asr.write_model_folder(tmp_path / "good")
    hub_server.repos["org/tiny"] = {"main": {p.name: p.read_bytes() for p in good.iterdir()}}
    monkeypatch.chdir(tmp_path)
    broken = tiny_asr.write_model_folder(tmp_path / "org" / "tiny")
    (broken / "encoder.safetensors").write_bytes(b"not weights")
    with pytest.raises(CheckpointError, match=r"encoder\.safetensors"):
        EncoderASR.from_hparams("org/tiny")  # the local folder wins the guess
    asr = EncoderASR.from_hparams(FetchSource(FetchFrom.HUGGING_FACE, "org/tiny"), savedir=tmp_path / "s",
                                  trust_remote_code=True)
    _check_reads_texts(asr, tiny_asr)


def test_transcribe_file_downmixes_and_resamples(tiny_asr, tmp_path):
    asr = EncoderASR.from_hparams(str(tiny_asr.write_model_folder(tmp_path / "model")))
    wav = tiny_asr.synthesize("bad cafe").numpy()
    stereo_48k = np.interp(np.arange(len(wav) * 3) / 3, np.arange(len(wav)), wav)
    soundfile.write(tmp_path / "x.flac", np.stack([stereo_48k, stereo_48k], axis=1), 48000)
    soundfile.write(tmp_path / "y.wav", wav, 16000, subtype="PCM_16")
    assert asr.load_audio(tmp_path / "x.flac").shape[0] == len(wav)
    assert asr.transcribe_file(tmp_path / "x.flac") == "bad cafe"
    assert asr.transcribe_file(tmp_path / "y.wav") == "bad cafe"


def test_batch_invariant_padded_batches(tiny_asr, tmp_path):
    asr = EncoderASR.from_hparams(str(tiny_asr.write_model_folder(tmp_path / "model")))
    wavs = [tiny_asr.synthesize(t) + 0.05 * torch.randn(len(tiny_asr.synthesize(t))) for t in TEXTS]
    # Padding is filled with loud noise by the helper: only each item's own samples may count.
    assert_batch_invariant(lambda x, lengths: asr.transcribe_batch(x, lengths)[0], wavs)
    assert_batch_invariant(asr.encode_batch, wavs)
    lengths = torch.tensor([len(w) for w in wavs], dtype=torch.int64)
    batch = torch.nn.utils.rnn.pad_sequence(wavs, batch_first=True)
    assert asr(batch, lengths)[0] == TEXTS  # __call__ on a padded batch
    with pytest.raises(ValueError, match="absolute"):
        asr.transcribe_batch(batch, torch.ones(len(wavs)))


def test_encoder_decoder_interface_and_dispatch_by_interface_key(tiny_asr, tmp_path):
    folder = tiny_asr.write_model_folder(tmp_path / "model")
    yaml = (folder / "hyperparams.yaml").read_text()
    (folder / "hyperparams.yaml").write_text(yaml.replace("decoding:", "interface: EncoderDecoderASR\n"
                                                          "decoder: !new:tiny_asr.GreedySearcher\ndecoding:"))
    model = Pretrained.from_hparams(str(folder))
    assert isinstance(model, EncoderDecoderASR)
    _check_reads_texts(model, tiny_asr)
    (folder / "hyperparams.yaml").write_text(yaml)
    with pytest.raises(HparamsError, match=r"hyperparams\.yaml.*'decoder' is required by EncoderDecoderASR"):
        EncoderDecoderASR.from_hparams(str(folder))


def test_unreadable_audio_names_the_file(tiny_asr, tmp_path):
    asr = EncoderASR.from_hparams(str(tiny_asr.write_model_folder(tmp_path / "model")))
    (tmp_path / "bad.wav").write_bytes(b"not audio")
    with pytest.raises(AudioError, match=r"bad\.wav"):
        asr.transcribe_file(tmp_path / "bad.wav")
    with pytest.raises(AudioError, match=r"missing\.flac"):
        asr.transcribe_file(tmp_path / "missing.flac")


def test_trim_silence_gives_the_model_the_speech_alone(tiny_asr, tmp_path):
    """A model folder with ``trim_silence`` cuts each input as ``speechkit trim-silence`` cut the files."""
    plain_folder = tiny_asr.write_model_folder(tmp_path / "plain")
    trimming_folder = tiny_asr.write_model_folder(tmp_path / "trimming")
    yaml = (trimming_folder / "hyperparams.yaml").read_text()
    (trimming_folder / "hyperparams.yaml").write_text(yaml + "trim_silence: {margin: 0.02}\n")
    plain = EncoderASR.from_hparams(str(plain_folder))
    trimming = EncoderASR.from_hparams(str(trimming_folder))
    quiet = [1e-4 * torch.randn(n) for n in (8000, 4000, 2400)]
    wavs = [torch.cat([quiet[0], tiny_asr.synthesize("bad cafe"), quiet[1]]),
            torch.cat([tiny_asr.synthesize("feed a bee"), quiet[2]])]
    for wav in wavs:
        first, last = speech_bounds(wav.numpy(), margin=320)
        expected, expected_lengths = plain.encode_batch(wav[first:last].unsqueeze(0))
        got, got_lengths = trimming.encode_batch(wav.unsqueeze(0))
        assert torch.equal(got, expected) and torch.equal(got_lengths, expected_lengths)
        assert got_lengths[0] < plain.encode_batch(wav.unsqueeze(0))[1][0]
    assert_batch_invariant(trimming.encode_batch, wavs)
    assert trimming.transcribe_batch(wavs[0].unsqueeze(0))[0] == ["bad cafe"]
    (trimming_folder / "hyperparams.yaml").write_text(yaml + "trim_silence: {margin: 0.1, threshold: -40}\n")
    with pytest.raises(HparamsError, match=r"hyperparams\.yaml.*trim_silence must be a mapping"):
        EncoderASR.from_hparams(str(trimming_folder))
