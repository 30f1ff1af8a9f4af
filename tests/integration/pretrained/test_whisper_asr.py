"""WhisperASR from a Whisper folder written by transformers: local, Hub (a real local Hub server) and URL
sources, the interfaces' arguments, the command line, and refused configs naming file and key."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from speechkit.errors import CheckpointError  # noqa: E402
from speechkit.pretrained import WhisperASR  # noqa: E402
from speechkit.pretrained.huggingface.whisper import load_whisper_folder  # noqa: E402

transformers.logging.set_verbosity_error()
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _audio(tmp_path, rate=8000, seconds=2.0, name="a.wav"):
    t = np.arange(int(rate * seconds)) / rate
    wave = (0.4 * np.sin(2 * np.pi * 330 * t) + 0.05 * np.random.default_rng(0).standard_normal(t.size))
    path = tmp_path / name
    soundfile.write(path, wave.astype(np.float32), rate)
    return path


def test_transcribe_file_resamples_and_equals_transformers_generate(whisper_folder, tmp_path):
    asr = WhisperASR.from_hparams(str(whisper_folder))
    path = _audio(tmp_path)
    waveform = asr.load_audio(path)
    assert waveform.shape == (32000,)  # 8 kHz read and resampled to 16 kHz
    text, tokens = asr.transcribe_batch(waveform[None], torch.tensor([32000]), language="en")
    assert asr.transcribe_file(path, language="en") == text[0]
    hf_model = transformers.WhisperForConditionalGeneration.from_pretrained(str(whisper_folder)).eval()
    features = transformers.WhisperFeatureExtractor()(waveform.numpy(), sampling_rate=16000,
                                                      return_tensors="pt").input_features
    with torch.no_grad():
        expected = hf_model.generate(features, language="en", return_dict_in_generate=True,
                                     force_unique_generate_call=True).sequences[0].tolist()[4:]
    eot = asr.folder.generation.eos_token_id
    expected = expected[:expected.index(eot)] if eot in expected else expected
    assert tokens[0] == expected
    assert text[0] == asr.folder.tokenizer.decode(expected)


def test_batch_results_do_not_depend_on_the_batch(whisper_folder):
    asr = WhisperASR.from_hparams(str(whisper_folder))
    generator = torch.Generator().manual_seed(4)
    wavs = [torch.randn(n, generator=generator) * 0.2 for n in (16000, 9000, 24000)]
    batch = torch.nn.utils.rnn.pad_sequence(wavs, batch_first=True)
    lengths = torch.tensor([w.numel() for w in wavs])
    texts, tokens = asr.transcribe_batch(batch, lengths, timestamps=True, beam_size=2)
    for row, wave in enumerate(wavs):
        alone_texts, alone_tokens = asr.transcribe_batch(wave[None], timestamps=True, beam_size=2)
        assert alone_tokens[0] == tokens[row] and alone_texts[0] == texts[row]
    with pytest.raises(ValueError, match="relative"):
        asr.transcribe_batch(batch, torch.tensor([1.0, 0.5, 0.7]))


def test_hub_and_url_sources_load_the_same_model(whisper_folder, hub_server, file_server, tmp_path):
    files = {name: (whisper_folder / name).read_bytes() for name in os.listdir(whisper_folder)}
    hub_server.repos["openai/whisper-mini-test"] = {"main": files}
    for name, data in files.items():
        file_server.files[f"/models/whisper/{name}"] = data
    local = WhisperASR.from_hparams(str(whisper_folder))
    wave = torch.randn(16000, generator=torch.Generator().manual_seed(2)) * 0.3
    expected = local.transcribe_batch(wave[None], language="fr")
    from_hub = WhisperASR.from_hparams("openai/whisper-mini-test", savedir=tmp_path / "hub")
    from_url = WhisperASR.from_hparams(f"{file_server.url}/models/whisper", savedir=tmp_path / "url")
    assert from_hub.transcribe_batch(wave[None], language="fr") == expected
    assert from_url.transcribe_batch(wave[None], language="fr") == expected


@pytest.mark.parametrize("key,value,message", [
    ("d_model", "64", "key 'd_model' must be an integer"),
    ("encoder_layers", 100000, "key 'encoder_layers' must be an integer in"),
    ("num_mel_bins", True, "key 'num_mel_bins' must be an integer"),
    ("decoder_attention_heads", 3, "key 'decoder_attention_heads' (3) does not divide d_model"),
    ("decoder_start_token_id", 10**6 - 1, "key 'decoder_start_token_id' is 999999, outside the vocabulary"),
    ("model_type", "wav2vec2", "key 'model_type'"),
    ("activation_function", "relu", "key 'activation_function'"),
])
def test_bad_config_is_refused_naming_the_key(whisper_folder, tmp_path, key, value, message):
    for name in os.listdir(whisper_folder):
        (tmp_path / name).write_bytes((whisper_folder / name).read_bytes())
    config = json.loads((tmp_path / "config.json").read_text())
    config[key] = value
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="config.json") as error:
        load_whisper_folder(str(tmp_path))
    assert message in str(error.value)


@pytest.mark.parametrize("key,value,message", [
    ("suppress_tokens", [1, "x"], "key 'suppress_tokens[1]'"),
    ("lang_to_id", {"<|en|>": 10**5}, "key 'lang_to_id.<|en|>'"),
    ("no_timestamps_token_id", -3, "key 'no_timestamps_token_id'"),
    ("forced_decoder_ids", [[1]], "key 'forced_decoder_ids'"),
])
def test_bad_generation_config_is_refused_naming_the_key(whisper_folder, tmp_path, key, value, message):
    for name in os.listdir(whisper_folder):
        (tmp_path / name).write_bytes((whisper_folder / name).read_bytes())
    config = json.loads((tmp_path / "generation_config.json").read_text())
    config[key] = value
    (tmp_path / "generation_config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="generation_config.json") as error:
        load_whisper_folder(str(tmp_path))
    assert message in str(error.value)


def test_weights_of_another_size_are_refused(whisper_folder, tmp_path):
    for name in os.listdir(whisper_folder):
        (tmp_path / name).write_bytes((whisper_folder / name).read_bytes())
    config = json.loads((tmp_path / "config.json").read_text())
    config["decoder_ffn_dim"] = 96
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="wrong shape"):
        load_whisper_folder(str(tmp_path))


def test_vocab_and_merges_tokenizer_equals_tokenizer_json(whisper_folder, tmp_path):
    from speechkit.models.whisper.tokenizer import WhisperTokenizer

    from_json = WhisperTokenizer.from_file(whisper_folder / "tokenizer.json")
    from_files = WhisperTokenizer.from_vocab_merges(whisper_folder / "vocab.json",
                                                    whisper_folder / "merges.txt",
                                                    whisper_folder / "added_tokens.json")
    text = " the lazy wizards hum 1234 times"
    assert from_json.encode(text) == from_files.encode(text)
    assert from_files.decode(from_files.encode(text)) == text
    assert from_files.token_id("<|notimestamps|>") == from_json.token_id("<|notimestamps|>")


@pytest.mark.slow
def test_speechkit_transcribe_takes_a_whisper_folder(whisper_folder, tmp_path):
    path = _audio(tmp_path)
    expected = WhisperASR.from_hparams(str(whisper_folder)).transcribe_file(path, language="en")
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "speechkit", "transcribe", str(whisper_folder), str(path),
                           "--language", "en", "--no-progress"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{path}\t{expected}\n"


@pytest.mark.slow
def test_onnx_graphs_equal_pytorch_and_give_the_same_tokens(whisper_folder, tmp_path):
    pytest.importorskip("onnxruntime")
    from speechkit.export.whisper import export_whisper_onnx

    for name in os.listdir(whisper_folder):
        (tmp_path / name).write_bytes((whisper_folder / name).read_bytes())
    torch_asr = WhisperASR.from_hparams(str(tmp_path))
    differences = export_whisper_onnx(torch_asr.model, tmp_path)
    assert set(differences) == {"whisper_encoder", "whisper_cross", "whisper_decoder_step"}
    onnx_asr = WhisperASR.from_hparams(str(tmp_path), backend="onnx")
    generator = torch.Generator().manual_seed(6)
    wavs = torch.randn(2, 20000, generator=generator) * 0.3
    lengths = torch.tensor([20000, 12000])
    for options in (dict(language="en"), dict(timestamps=True, beam_size=2), dict()):
        assert onnx_asr.transcribe_batch(wavs, lengths, **options) == \
            torch_asr.transcribe_batch(wavs, lengths, **options)


@pytest.mark.slow
def test_speechkit_serve_takes_a_whisper_folder(whisper_folder, tmp_path):
    pytest.importorskip("fastapi", reason="speechkit serve needs the 'serve' extra (fastapi, uvicorn)")
    from tests.helpers.serve import ServerProcess, request_json

    path = _audio(tmp_path, rate=16000)
    expected = WhisperASR.from_hparams(str(whisper_folder)).transcribe_batch(
        torch.from_numpy(soundfile.read(path, dtype="float32")[0])[None])
    with ServerProcess([f"whisper={whisper_folder}"]) as server:
        status, answer = request_json(f"{server.url}/v1/models/whisper/transcribe", path.read_bytes())
    assert status == 200, answer
    assert answer["text"] == expected[0][0] and answer["tokens"] == expected[1][0]


def test_the_generic_loaders_route_a_local_whisper_folder_to_whisper_asr(whisper_folder):
    from speechkit.errors import HparamsError
    from speechkit.pretrained import EncoderDecoderASR, Pretrained, SpeakerRecognition

    wave = torch.randn(16000, generator=torch.Generator().manual_seed(5)) * 0.3
    expected = WhisperASR.from_hparams(str(whisper_folder)).transcribe_batch(wave[None], language="en")
    for interface in (Pretrained, EncoderDecoderASR):
        loaded = interface.from_hparams(str(whisper_folder))
        assert isinstance(loaded, WhisperASR)
        assert loaded.transcribe_batch(wave[None], language="en") == expected
    with pytest.raises(HparamsError, match=r"a whisper folder \(config.json\) is a speech recognizer; "
                                           "SpeakerRecognition cannot load it"):
        SpeakerRecognition.from_hparams(str(whisper_folder))
