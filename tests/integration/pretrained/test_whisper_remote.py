"""A Whisper folder on a server (a URL, a local Hub) loads through the generic loaders as a local one does: a
"not found" answer for ``hyperparams.yaml`` (and only that) leads to its ``config.json``; offline from the
cache afterwards; the command line; the ONNX backend; and the errors that must not turn into a Whisper
attempt."""
import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from speechkit.errors import FetchError, FetchNotFoundError, HparamsError  # noqa: E402
from speechkit.pretrained import (  # noqa: E402
    EncoderDecoderASR,
    ModelSource,
    Pretrained,
    SpeakerRecognition,
    WhisperASR,
)
from speechkit.pretrained.sources.limits import DEFAULT_LIMITS  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FOLDER = "/models/whisper"


def _serve(server, folder, prefix=FOLDER, skip=()):
    for name in os.listdir(folder):
        if name not in skip:
            server.files[f"{prefix}/{name}"] = (folder / name).read_bytes()
    return f"{server.url}{prefix}"


def _requests(server) -> int:
    return sum(server.counts.values())


def _wave(seed=5):
    return torch.randn(16000, generator=torch.Generator().manual_seed(seed)) * 0.3


@pytest.fixture(scope="module")
def expected(whisper_folder):
    """What the local folder transcribes from ``_wave()``."""
    return WhisperASR.from_hparams(str(whisper_folder)).transcribe_batch(_wave()[None], language="en")


def test_url_folder_loads_through_the_generic_loaders_then_offline_from_the_cache(whisper_folder, expected,
                                                                                  file_server):
    url = _serve(file_server, whisper_folder)
    for interface in (Pretrained, EncoderDecoderASR):
        loaded = interface.from_hparams(url)
        assert isinstance(loaded, WhisperASR)
        assert loaded.transcribe_batch(_wave()[None], language="en") == expected
    assert file_server.gets(f"{FOLDER}/hyperparams.yaml") == 2  # asked each time, answered 404
    with pytest.raises(HparamsError, match=r"a whisper folder \(config.json\) is a speech recognizer; "
                                           "SpeakerRecognition cannot load it"):
        SpeakerRecognition.from_hparams(url)

    before = _requests(file_server)
    offline = Pretrained.from_hparams(url, allow_network=False)
    assert isinstance(offline, WhisperASR)
    assert offline.transcribe_batch(_wave()[None], language="en") == expected
    assert _requests(file_server) == before  # the recorded 404 and the cached files answer everything


def test_hub_repo_loads_through_the_generic_loaders_then_offline_from_the_cache(whisper_folder, expected,
                                                                                hub_server, tmp_path):
    files = {name: (whisper_folder / name).read_bytes() for name in os.listdir(whisper_folder)}
    hub_server.repos["org/whisper-mini"] = {"main": files}
    loaded = Pretrained.from_hparams("org/whisper-mini", savedir=tmp_path / "saved")
    assert isinstance(loaded, WhisperASR)
    assert loaded.transcribe_batch(_wave()[None], language="en") == expected
    assert (tmp_path / "saved" / "config.json").is_symlink()  # fetched into the savedir the caller chose

    before = _requests(hub_server)
    offline = EncoderDecoderASR.from_hparams("org/whisper-mini", savedir=tmp_path / "saved",
                                             allow_network=False)
    assert offline.transcribe_batch(_wave()[None], language="en") == expected
    assert _requests(hub_server) == before


@pytest.mark.parametrize("config", [None, b'{"model_type": "wav2vec2"}', b"not json {", b"[1, 2]"])
def test_a_folder_with_neither_yaml_nor_whisper_config_keeps_the_missing_yaml_error(file_server, config):
    file_server.files[f"{FOLDER}/model.ckpt"] = b"weights"
    if config is not None:
        file_server.files[f"{FOLDER}/config.json"] = config
    url = f"{file_server.url}{FOLDER}"
    with pytest.raises(FetchNotFoundError) as error:
        Pretrained.from_hparams(url)
    assert str(error.value) == (f"cannot fetch 'hyperparams.yaml' from URL '{url}/hyperparams.yaml': "
                                "HTTP 404 Not Found")


def test_overrides_for_a_whisper_folder_are_refused_not_dropped(whisper_folder, file_server):
    for source in (str(whisper_folder), _serve(file_server, whisper_folder)):
        with pytest.raises(HparamsError, match=r"overrides \{'beam_size': 3\} change keys of a "
                                               r"hyperparams.yaml, but this whisper folder has none"):
            Pretrained.from_hparams(source, overrides={"beam_size": 3})


def test_a_yaml_named_by_the_caller_is_not_replaced_by_the_config(whisper_folder, file_server):
    url = _serve(file_server, whisper_folder)
    with pytest.raises(FetchNotFoundError, match="inference.yaml"):
        Pretrained.from_hparams(url, hparams_file="inference.yaml")
    assert file_server.gets(f"{FOLDER}/config.json") == 0


@pytest.mark.parametrize("failure", ["500", "403", "size limit"])
def test_other_failures_of_the_yaml_are_not_taken_for_a_whisper_folder(whisper_folder, file_server, failure):
    url = _serve(file_server, whisper_folder)
    limits = DEFAULT_LIMITS
    if failure == "size limit":
        file_server.files[f"{FOLDER}/hyperparams.yaml"] = b"sample_rate: 16000\n" * 100
        limits = dataclasses.replace(DEFAULT_LIMITS, max_yaml_bytes=1000)
    else:
        file_server.statuses[f"{FOLDER}/hyperparams.yaml"] = int(failure)
    with pytest.raises(FetchError, match="hyperparams.yaml") as error:
        Pretrained.from_hparams(url, limits=limits)
    assert not isinstance(error.value, FetchNotFoundError)
    assert {"500": "HTTP 500", "403": "HTTP 403", "size limit": "limit of 1000"}[failure] in str(error.value)
    assert file_server.gets(f"{FOLDER}/config.json") == 0


def test_a_config_json_that_cannot_be_fetched_is_reported_with_the_missing_yaml(whisper_folder, file_server):
    url = _serve(file_server, whisper_folder)
    file_server.statuses[f"{FOLDER}/config.json"] = 503
    with pytest.raises(FetchError, match=r"hyperparams.yaml from URL .* is missing, and its config.json "
                                         r"could not be read to tell what the folder is: .*HTTP 503"):
        Pretrained.from_hparams(url)


def test_from_source_fetches_through_the_model_source(whisper_folder, file_server, tmp_path):
    url = _serve(file_server, whisper_folder)
    model = ModelSource.resolve(url, tmp_path / "saved", strategy="copy")
    asr = WhisperASR.from_source(model)
    assert (tmp_path / "saved" / "model.safetensors").is_file()
    assert not (tmp_path / "saved" / "model.safetensors").is_symlink()  # the source's strategy
    assert asr.folder.tokenizer is not None
    # Its limits too: weights over the limit are refused as such, not taken for a folder without weights.
    small = ModelSource.resolve(url, tmp_path / "small",
                                limits=dataclasses.replace(DEFAULT_LIMITS, max_file_bytes=1000))
    with pytest.raises(FetchError, match="model.safetensors.*limit of 1000"):
        WhisperASR.from_source(small)
    # And offline, a file it never fetched is reported, not fetched.
    with pytest.raises(FetchError, match="offline"):
        WhisperASR.from_source(ModelSource.resolve(url, tmp_path / "other", allow_network=False,
                                                   cache_dir=tmp_path / "empty-cache"))


def test_speechkit_fetch_prefetches_a_whisper_folder_for_offline_use(whisper_folder, expected, hub_server,
                                                                     tmp_path, capsys):
    from speechkit.cli import main as speechkit_main

    files = {name: (whisper_folder / name).read_bytes() for name in os.listdir(whisper_folder)}
    hub_server.repos["org/whisper-mini"] = {"main": files}
    assert speechkit_main(["fetch", "org/whisper-mini", "--savedir", str(tmp_path / "pre")]) == 0
    listed = dict(line.split("\t") for line in capsys.readouterr().out.splitlines())
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} <= set(listed)
    assert "whisper_encoder.onnx" not in listed  # the folder has no graphs: nothing to fetch, no error
    assert (tmp_path / "pre" / "model.safetensors").is_symlink()
    before = _requests(hub_server)
    offline = Pretrained.from_hparams("org/whisper-mini", savedir=tmp_path / "run", allow_network=False)
    assert offline.transcribe_batch(_wave()[None], language="en") == expected
    capsys.readouterr()
    assert speechkit_main(["fetch", "org/whisper-mini", "--offline", "--savedir", str(tmp_path / "pre")]) == 0
    assert set(dict(line.split("\t") for line in capsys.readouterr().out.splitlines())) == set(listed)
    assert _requests(hub_server) == before
    # A repo that is neither a speechkit folder nor a Whisper one keeps the missing YAML's error.
    hub_server.repos["org/other"] = {"main": {"model.ckpt": b"w"}}
    assert speechkit_main(["fetch", "org/other", "--savedir", str(tmp_path / "other")]) == 1
    assert "'hyperparams.yaml' from Hugging Face repo 'org/other'" in capsys.readouterr().err


def test_speechkit_evaluate_takes_a_whisper_url(file_server, tmp_path):
    import json

    from speechkit.cli import main as speechkit_main
    from tests.helpers.whisper_folders import build_whisper_folder

    folder = tmp_path / "whisper"  # a seed whose greedy transcripts have words, so the WER means something
    build_whisper_folder(str(folder), seed=5, generation_overrides={"max_length": 16})
    url = _serve(file_server, folder)
    local = WhisperASR.from_hparams(str(folder))
    manifest = {}
    for index in range(3):
        wave = _wave(seed=10 + index)
        path = tmp_path / f"u{index}.wav"
        soundfile.write(path, wave.numpy(), 16000)
        text = local.transcribe_batch(local.load_audio(path)[None])[0][0]
        manifest[f"u{index}"] = {"wav": str(path), "duration": 1.0, "text": text}
    manifest["u2"]["text"] += " extra words"  # one reference the model cannot match
    (tmp_path / "test.json").write_text(json.dumps(manifest))
    assert speechkit_main(["evaluate", url, str(tmp_path / "test.json"), "--output", str(tmp_path / "out"),
                           "--device", "cpu", "--no-progress"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    references = sum(len(row["text"].split()) for row in manifest.values())
    assert summary["utterances"] == 3
    assert references > 5 and summary["WER"] == pytest.approx(100.0 * 2 / references)  # the added words


@pytest.mark.slow
def test_speechkit_transcribe_takes_a_whisper_url(whisper_folder, file_server, tmp_path):
    url = _serve(file_server, whisper_folder)
    t = np.arange(16000) / 16000
    path = tmp_path / "a.wav"
    soundfile.write(path, (0.4 * np.sin(2 * np.pi * 330 * t)).astype(np.float32), 16000)
    expected = WhisperASR.from_hparams(str(whisper_folder)).transcribe_file(path, language="en")
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "speechkit", "transcribe", url, str(path), "--language",
                           "en", "--no-progress"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{path}\t{expected}\n"


@pytest.mark.slow
def test_onnx_backend_from_a_url_gives_the_same_tokens(whisper_folder, file_server, tmp_path):
    pytest.importorskip("onnxruntime")
    from speechkit.export.whisper import export_whisper_onnx
    from speechkit.pretrained.whisper_onnx import OnnxWhisper

    for name in os.listdir(whisper_folder):
        (tmp_path / name).write_bytes((whisper_folder / name).read_bytes())
    torch_asr = WhisperASR.from_hparams(str(tmp_path))
    export_whisper_onnx(torch_asr.model, tmp_path)
    url = _serve(file_server, tmp_path)
    onnx_asr = Pretrained.from_hparams(url, backend="onnx")
    assert isinstance(onnx_asr.transcriber.decoder, OnnxWhisper)
    wavs, lengths = torch.randn(2, 20000, generator=torch.Generator().manual_seed(6)) * 0.3, \
        torch.tensor([20000, 12000])
    for options in (dict(language="en"), dict(timestamps=True, beam_size=2)):
        assert onnx_asr.transcribe_batch(wavs, lengths, **options) == \
            torch_asr.transcribe_batch(wavs, lengths, **options)
