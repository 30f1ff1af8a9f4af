"""ONNX and TorchScript export of every interface: equal to PyTorch on lengths never seen at export, batch
invariant inside the graph, the same results through ``backend=``, and clear errors for what cannot export."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")

from speechkit.errors import DataError, SpeechkitError  # noqa: E402
from speechkit.export import ExportError, ctc_greedy_numpy, export_folder, export_graph, load_graph  # noqa: E402
from speechkit.export.graphs import GraphSpec, _waveforms, graph_specs  # noqa: E402
from speechkit.pretrained import Pretrained  # noqa: E402
from tests.helpers import job_models  # noqa: E402
from tests.helpers.export_models import speech_like, write_recognizer  # noqa: E402

FAMILIES = {
    "recognizer": lambda d: write_recognizer(d, streaming=False),
    "separator": job_models.write_separation_model,
    "vocoder": job_models.write_vocoder_model,
    "features": job_models.write_features_model,
    "speaker": job_models.write_speaker_model,
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """family -> (PyTorch folder, folder with both formats)."""
    warnings.simplefilter("ignore")
    root = tmp_path_factory.mktemp("export")
    folders = {}
    for family, write in FAMILIES.items():
        source = write(root / family)
        folders[family] = (source, export_folder(source, root / f"{family}-out",
                                                 formats=["onnx", "torchscript"]))
    return folders


def _load(folder, backend):
    return Pretrained.from_hparams(str(folder), backend=backend)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_manifest_and_card_describe_every_artefact(exported, family):
    _, folder = exported[family]
    manifest = json.loads((folder / "export.json").read_text())
    card = (folder / "README.md").read_text()
    assert manifest["artefacts"]
    for key, entry in manifest["artefacts"].items():
        assert (folder / entry["file"]).is_file(), key
        assert entry["max_abs_diff"] <= 1e-4
        assert entry["torch"] == torch.__version__
        assert f"`{entry['file']}`" in card and "largest difference to PyTorch" in card
        if entry["format"] == "onnx":
            assert entry["opset"] >= 17


@pytest.mark.parametrize("backend", ["onnx", "torchscript"])
def test_recognizer_backends_give_the_same_transcripts_and_scores(exported, backend):
    source, folder = exported["recognizer"]
    reference, graph = _load(source, "torch"), _load(folder, backend)
    wavs, lengths = speech_like([23_456, 9_001, 16_000], seed=3)  # lengths never used at export
    expected, expected_lengths = reference.encode_batch(wavs, lengths)
    got, got_lengths = graph.encode_batch(wavs, lengths)
    assert torch.equal(got_lengths, expected_lengths)
    assert (got - expected).abs().max() < 1e-5
    assert graph.transcribe_batch(wavs, lengths)[0] == reference.transcribe_batch(wavs, lengths)[0]
    assert any(reference.transcribe_batch(wavs, lengths)[0])  # not all blank: the comparison means something


def test_recognizer_graph_is_batch_invariant(exported):
    _, folder = exported["recognizer"]
    graph = _load(folder, "onnx")
    wavs, lengths = speech_like([20_000, 7_777, 12_345], seed=5)
    batch, frames = graph.encode_batch(wavs, lengths)
    for i in range(3):
        alone, alone_frames = graph.encode_batch(wavs[i:i + 1, :lengths[i]], lengths[i:i + 1])
        assert int(alone_frames) == int(frames[i])
        assert (alone[0] - batch[i, :int(frames[i])]).abs().max() < 1e-5


@pytest.mark.parametrize("backend", ["onnx", "torchscript"])
def test_separator_backends_give_the_same_sources(exported, backend, tmp_path):
    import soundfile

    source, folder = exported["separator"]
    reference, graph = _load(source, "torch"), _load(folder, backend)
    wavs, lengths = speech_like([5_003, 1_234], seed=1)
    expected = reference.separate_batch(wavs, lengths)
    got = graph.separate_batch(wavs, lengths)
    assert got.shape == expected.shape and (got - expected).abs().max() < 1e-5
    alone = graph.separate_batch(wavs[1:, :1234], lengths[1:])
    assert (alone[0] - got[1, :, :1234]).abs().max() < 1e-5
    soundfile.write(tmp_path / "mix.wav", wavs[0, :5003].numpy(), 8000)
    assert (graph.separate_file(tmp_path / "mix.wav") - reference.separate_file(tmp_path / "mix.wav")).abs()\
        .max() < 1e-5


@pytest.mark.parametrize("backend", ["onnx", "torchscript"])
def test_vocoder_backends_give_the_same_mels_and_audio(exported, backend):
    source, folder = exported["vocoder"]
    reference, graph = _load(source, "torch"), _load(folder, backend)
    wavs, lengths = speech_like([7_001, 3_000], seed=2)
    mels, frames = reference.mel_batch(wavs, lengths)
    got_mels, got_frames = graph.mel_batch(wavs, lengths)
    assert torch.equal(got_frames, frames) and (got_mels - mels).abs().max() < 1e-4
    audio, samples = reference.generate(mels, frames)
    got_audio, got_samples = graph.generate(mels, frames)
    assert torch.equal(got_samples, samples) and (got_audio - audio).abs().max() < 1e-5


@pytest.mark.parametrize("backend", ["onnx", "torchscript"])
def test_speaker_backends_give_the_same_embeddings_and_decisions(exported, backend, tmp_path):
    import soundfile

    source, folder = exported["speaker"]
    reference, graph = _load(source, "torch"), _load(folder, backend)
    wavs, lengths = speech_like([21_001, 6_543, 13_000], seed=6)  # lengths never used at export
    expected = reference.embed_batch(wavs, lengths)
    got = graph.embed_batch(wavs, lengths)
    assert got.shape == expected.shape == (3, 12) and (got - expected).abs().max() < 1e-4
    alone = graph.embed_batch(wavs[1:2, :6543], lengths[1:2])
    assert (alone[0] - got[1]).abs().max() < 1e-4
    for name, index in (("a.wav", 0), ("b.wav", 2)):
        soundfile.write(tmp_path / name, wavs[index, :lengths[index]].numpy(), 16000)
    score, same = graph.verify_files(tmp_path / "a.wav", tmp_path / "b.wav")
    assert score == pytest.approx(reference.verify_files(tmp_path / "a.wav", tmp_path / "b.wav")[0], abs=1e-5)
    assert same == (score >= 0.4)


@pytest.mark.parametrize("backend", ["onnx", "torchscript"])
def test_wav2vec2_backends_give_the_same_features(exported, backend):
    source, folder = exported["features"]
    reference, graph = _load(source, "torch"), _load(folder, backend)
    wavs, lengths = speech_like([9_999, 4_321], seed=4)
    expected, frames = reference.extract_batch(wavs, lengths)
    got, got_frames = graph.extract_batch(wavs, lengths)
    assert torch.equal(got_frames, frames) and (got - expected).abs().max() < 1e-4
    with pytest.raises(SpeechkitError, match="last layer only"):
        graph.extract_batch(wavs, lengths, layer=1)


def test_a_length_longer_than_the_signal_is_refused_at_run_time(exported):
    _, folder = exported["recognizer"]
    entry = json.loads((folder / "export.json").read_text())["artefacts"]["recognizer.onnx"]
    graph = load_graph(folder / entry["file"], "onnx", entry["inputs"], entry["outputs"])
    message = r"recognizer.onnx: lengths \[16000, 16001\] must lie in \[0, 16000\]"
    with pytest.raises(DataError, match=message):
        graph(torch.zeros(2, 16000), torch.tensor([16000, 16001]))
    with pytest.raises(DataError, match="absolute integer lengths"):
        graph(torch.zeros(2, 16000), torch.tensor([1.0, 0.5]))


def test_backend_needs_the_exported_files(exported):
    source, _ = exported["recognizer"]
    with pytest.raises(SpeechkitError, match="export.json"):
        _load(source, "onnx")


class SpectrumFeatures(torch.nn.Module):
    """A front end calling ``torch.fft.rfft`` directly (no traceable twin)."""

    def forward(self, x, lengths):
        return torch.fft.rfft(x.unfold(1, 64, 32), dim=-1).abs(), lengths


class TrimsToLongest(torch.nn.Module):
    """Cuts the batch to its longest item with a Python int: a trace freezes that length."""

    def forward(self, x, lengths):
        return x[:, :int(lengths.max())] * 2.0, lengths


class Wrapper(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.front = inner

    def forward(self, x, lengths):
        return self.front(x, lengths)


def _spec(module):
    axes = {"wavs": {0: "batch", 1: "time"}, "lengths": {0: "batch"}, "out": {0: "batch", 1: "time"},
            "out_lengths": {0: "batch"}}
    return GraphSpec("custom", module, ("wavs", "lengths"), ("out", "out_lengths"), axes, _waveforms,
                     min_length=100)


def test_an_unexportable_module_is_named_with_its_operation(tmp_path):
    message = r"custom: cannot export to ONNX: module front \(SpectrumFeatures\): operation (Unfold|fft_rfft)"
    with pytest.raises(ExportError, match=message):
        export_graph(_spec(Wrapper(SpectrumFeatures())), tmp_path / "custom.onnx", "onnx")


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_a_trace_wrong_for_other_lengths_is_an_error_naming_the_line(tmp_path, fmt):
    with pytest.raises(ExportError, match=r"differs from PyTorch.*never seen at export.*test_export.py:\d+"):
        export_graph(_spec(Wrapper(TrimsToLongest())), tmp_path / f"custom.{fmt}", fmt)


def test_numpy_greedy_decoder_equals_the_torch_one():
    from speechkit.decoding.ctc import ctc_greedy_decode

    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(4, 30, 6, generator=generator).log_softmax(-1)
    lengths = torch.tensor([30, 17, 1, 0])
    expected = [[int(t) for t in seq] for seq in ctc_greedy_decode(scores, lengths, 0)]
    assert ctc_greedy_numpy(scores.numpy(), lengths.numpy(), 0) == expected


def test_cli_exports_a_model_folder_and_refuses_an_existing_output(tmp_path, capsys):
    from speechkit.cli import main

    source = job_models.write_separation_model(tmp_path / "model")
    out = tmp_path / "out"
    assert main(["export", "--model", str(source), "--format", "onnx", "--output", str(out)]) == 0
    assert (out / "separator.onnx").is_file() and not (out / "separator.pt").exists()
    assert (out / "separator.safetensors").is_file()  # the PyTorch folder comes along
    assert main(["export", "--model", str(source), "--format", "onnx", "--output", str(out)]) == 1
    assert "already exists" in capsys.readouterr().err
    assert main(["export", "--output", str(out)]) == 1
    assert "--checkpoints and --hparams" in capsys.readouterr().err
    graph = Pretrained.from_hparams(str(out), backend="onnx")
    assert np.isfinite(graph.separate_batch(torch.randn(1, 900)).numpy()).all()


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_istft_vocoder_exports_exactly(tmp_path, fmt):
    from speechkit.models import ISTFTGenerator, MelSpectrogram
    from speechkit.pretrained.vocoder import Vocoder

    torch.manual_seed(0)
    mel = MelSpectrogram(n_fft=256, win_length=256, hop_length=64, n_mels=16)
    modules = {"mel": mel, "generator": ISTFTGenerator.from_preset("tiny", n_mels=16, n_fft=256,
                                                                   hop_length=64)}
    vocoder = Vocoder(modules, {"modules": modules, "sample_rate": 16000})
    for spec in graph_specs(vocoder):
        entry = export_graph(spec, tmp_path / f"{spec.name}.{fmt}", fmt)
        assert entry["max_abs_diff"] < 1e-4, spec.name


@pytest.mark.parametrize("per_channel_slopes", [False, True])
def test_separator_twin_is_the_model_channels_last(per_channel_slopes):
    """The exported Conv-TasNet runs channels-last with 1x1 convolutions as matrix products; it is the same
    function on a padded batch, with trained-looking (non-default) norms and slopes, one or per channel."""
    from speechkit.export.substitutes import exportable
    from speechkit.models import ConvTasNet

    torch.manual_seed(0)
    model = ConvTasNet.from_preset("tiny", num_speakers=2).eval()
    if per_channel_slopes:
        for block in model.blocks:
            block.act1, block.act2 = torch.nn.PReLU(16), torch.nn.PReLU(16)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.2 * torch.randn_like(parameter))
    mixtures, lengths = torch.randn(3, 4000), torch.tensor([4000, 1501, 2777])
    with torch.no_grad():
        expected, got = model(mixtures, lengths), exportable(model)(mixtures, lengths)
    assert float((got - expected).abs().max()) < 1e-5 * (1 + float(expected.abs().max()))


def test_separator_graph_uses_matrix_products_and_leaky_relu(exported):
    import onnx

    from speechkit.export.quantize import grouped_convolutions

    source, folder = exported["separator"]
    nodes = onnx.load(str(folder / "separator.onnx")).graph.node
    ops = [node.op_type for node in nodes]
    assert "PRelu" not in ops and "LeakyRelu" in ops and ops.count("Gemm") >= 3
    blocks = len(Pretrained.from_hparams(str(source)).mods["separator"].blocks)
    # the encoder and the decoder, and one grouped (depthwise) convolution per block
    assert ops.count("ConvTranspose") == 1 and ops.count("Conv") == 1 + blocks
    assert len(grouped_convolutions(folder / "separator.onnx")) == blocks
