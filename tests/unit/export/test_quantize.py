"""``speechkit export --quantize int8``: the int8 graphs load through ``backend="onnx"`` and stay close to
PyTorch (transcripts, sources), the float graphs stay beside them, and what cannot be quantised is refused
with a clear error before anything is written."""
from __future__ import annotations

import json
import warnings

import pytest
import torch

pytest.importorskip("onnxruntime")

from speechkit.errors import ExportError, SpeechkitError  # noqa: E402
from speechkit.export import export_folder, export_graph, load_graph, quantize  # noqa: E402
from speechkit.export.graphs import graph_specs  # noqa: E402
from speechkit.metrics.error_rate import score_utterance, summarize_scores  # noqa: E402
from speechkit.metrics.si_snr import si_snr  # noqa: E402
from speechkit.pretrained import Pretrained  # noqa: E402
from tests.helpers import job_models  # noqa: E402
from tests.helpers.export_models import speech_like, write_recognizer  # noqa: E402
from tests.unit.export.test_export import TrimsToLongest, Wrapper, _spec  # noqa: E402


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    """family -> (PyTorch folder, int8 folder)."""
    warnings.simplefilter("ignore")
    root = tmp_path_factory.mktemp("quantize")
    writers = {"recognizer": lambda d: write_recognizer(d, streaming=False),
               "separator": job_models.write_separation_model, "vocoder": job_models.write_vocoder_model}
    return {family: (source := write(root / family),
                     export_folder(source, root / f"{family}-int8", formats=["onnx"], quantize="int8"))
            for family, write in writers.items()}


def test_manifest_names_the_int8_graph_and_keeps_the_float_one(quantized):
    _, folder = quantized["recognizer"]
    entry = json.loads((folder / "export.json").read_text())["artefacts"]["recognizer.onnx"]
    assert entry["file"] == "recognizer.int8.onnx" and (folder / entry["file"]).is_file()
    quantization = entry["quantization"]
    assert (folder / quantization["fp32_file"]).is_file() and quantization["fp32_file"] == "recognizer.onnx"
    assert quantization["min_snr_db"] >= quantization["required_snr_db"] == quantize.INT8_MIN_SNR_DB
    assert {"MatMulInteger", "DynamicQuantizeLSTM"} <= set(quantization["operators"])
    assert entry["max_abs_diff"] <= 1e-4  # the float graph's own check still ran
    card = (folder / "README.md").read_text()
    assert "`recognizer.int8.onnx` (onnx, int8 dynamic quantisation" in card and "signal-to-error" in card


def test_int8_recognizer_transcribes_close_to_pytorch(quantized):
    source, folder = quantized["recognizer"]
    reference, graph = Pretrained.from_hparams(str(source)), Pretrained.from_hparams(str(folder),
                                                                                    backend="onnx")
    wavs, lengths = speech_like([23_456, 9_001, 16_000], seed=3)  # lengths never used at export
    expected, frames = reference.encode_batch(wavs, lengths)
    got, got_frames = graph.encode_batch(wavs, lengths)
    assert torch.equal(got_frames, frames)
    assert (got - expected).abs().max() > 1e-6  # int8 really ran, not the float graph
    assert quantize.output_snr_db(expected, got) >= quantize.INT8_MIN_SNR_DB
    agree = (got.argmax(-1) == expected.argmax(-1)).float().mean()
    assert agree >= 0.9, agree
    texts = graph.transcribe_batch(wavs, lengths)[0]
    expected_texts = reference.transcribe_batch(wavs, lengths)[0]
    # a random-weight model has near-ties between letters, which int8 rounding may flip: a bounded change
    scores = {i: score_utterance(list(e), list(t)) for i, (e, t) in enumerate(zip(expected_texts, texts))}
    assert summarize_scores(scores)["WER"] <= 20.0 and any(texts)


def test_int8_separator_sources_stay_close_in_si_snr(quantized):
    import onnx

    source, folder = quantized["separator"]
    reference, graph = Pretrained.from_hparams(str(source)), Pretrained.from_hparams(str(folder),
                                                                                    backend="onnx")
    wavs, lengths = speech_like([5_003, 1_234], seed=1)
    expected, got = reference.separate_batch(wavs, lengths), graph.separate_batch(wavs, lengths)
    assert got.shape == expected.shape and (got - expected).abs().max() > 1e-7
    # the 1x1 convolutions are matrix products, quantised to int8 products (not the slower ConvInteger)
    operators = json.loads((folder / "export.json").read_text())["artefacts"]["separator.onnx"][
        "quantization"]["operators"]
    assert "MatMulInteger" in operators
    # the depthwise convolutions stay float32 (ConvInteger would be slower): only the encoder's is int8
    ops = [node.op_type for node in onnx.load(str(folder / "separator.int8.onnx")).graph.node]
    assert ops.count("ConvInteger") == 1 and ops.count("Conv") >= 1
    # the int8 sources against the float ones, as estimates of them: far above any separation figure
    assert float(si_snr(got[0, :, :5003], expected[0, :, :5003]).min()) >= 20.0


def test_a_graph_with_nothing_to_quantise_stays_float(quantized):
    _, folder = quantized["vocoder"]
    artefacts = json.loads((folder / "export.json").read_text())["artefacts"]
    assert artefacts["mel.onnx"]["file"] == "mel.onnx" and "quantization" not in artefacts["mel.onnx"]
    assert artefacts["generator.onnx"]["file"] == "generator.int8.onnx"
    with pytest.raises(quantize.NothingToQuantize, match="custom: has no operator int8 dynamic quantisation"):
        spec = _spec(Wrapper(TrimsToLongest()))
        export_graph(spec, folder.parent / "plain.onnx", "onnx", verify=False)
        quantize.quantize_graph(spec, folder.parent / "plain.onnx", folder.parent / "plain.int8.onnx")
    assert not (folder.parent / "plain.int8.onnx").exists()


def test_an_int8_graph_far_from_pytorch_is_refused(tmp_path):
    model = job_models.write_separation_model(tmp_path / "model")
    spec = graph_specs(Pretrained.from_hparams(str(model)))[0]
    export_graph(spec, tmp_path / "separator.onnx", "onnx")
    with torch.no_grad():
        for parameter in spec.module.parameters():  # PyTorch now computes something else
            parameter.add_(0.5 * torch.randn_like(parameter))
    with pytest.raises(ExportError, match=r"separator: the int8 graph's output 'sources' is too far from "
                                          r"PyTorch .* dB signal-to-error, below the 10 dB"):
        quantize.quantize_graph(spec, tmp_path / "separator.onnx", tmp_path / "separator.int8.onnx")


def test_cli_quantizes_and_refuses_torchscript_before_writing(tmp_path, capsys):
    from speechkit.cli import main

    source = job_models.write_separation_model(tmp_path / "model")
    out = tmp_path / "out"
    assert main(["export", "--model", str(source), "--format", "torchscript", "--quantize", "int8",
                 "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert "--quantize int8 applies to ONNX graphs only" in err and "Traceback" not in err
    assert not out.exists()
    assert main(["export", "--model", str(source), "--quantize", "int8", "--output", str(out)]) == 0
    graph = load_graph(out / "separator.int8.onnx", "onnx", ("mixtures", "lengths"), ("sources",))
    assert graph(torch.randn(1, 900), torch.tensor([900]))[0].shape == (1, 2, 900)
    with pytest.raises(SpeechkitError, match="--quantize int4: unknown; use int8"):
        export_folder(source, tmp_path / "other", quantize="int4")


def test_no_verify_skips_the_int8_check_and_says_so(tmp_path):
    source = job_models.write_separation_model(tmp_path / "model")
    out = export_folder(source, tmp_path / "out", quantize="int8", verify=False)
    entry = json.loads((out / "export.json").read_text())["artefacts"]["separator.onnx"]
    assert entry["file"] == "separator.int8.onnx" and entry["quantization"]["min_snr_db"] is None
    card = (out / "README.md").read_text()
    assert "int8 graph not checked against PyTorch (exported with --no-verify)" in card
