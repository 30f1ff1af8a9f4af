"""A model folder's export.json is checked field by field, and onnxruntime's own errors (a damaged graph,
inputs that do not fit it) come out as one line naming the file, through `speechkit transcribe` too."""
from __future__ import annotations

import json
import shutil

import pytest
import torch

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from speechkit import cli  # noqa: E402
from speechkit.data.audio import write  # noqa: E402
from speechkit.errors import HparamsError, SpeechkitError  # noqa: E402
from speechkit.pretrained.backends import load_graph, read_manifest  # noqa: E402
from tests.helpers.export_models import write_recognizer  # noqa: E402

GOOD_ENTRY = {"file": "recognizer.onnx", "format": "onnx", "inputs": {"wavs": ["batch", "time"],
              "lengths": ["batch"]}, "outputs": {"log_probs": ["batch", "frames", 5]}, "min_time": 400}


def _identity_graph(path):
    """A valid ONNX graph: (wavs float [N, T], lengths int64 [N]) -> (wavs, lengths)."""
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info("wavs", TensorProto.FLOAT, ["N", "T"]),
              helper.make_tensor_value_info("lengths", TensorProto.INT64, ["N"])]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", "T"]),
               helper.make_tensor_value_info("out_lengths", TensorProto.INT64, ["N"])]
    nodes = [helper.make_node("Identity", ["wavs"], ["out"]), helper.make_node("Identity", ["lengths"],
                                                                               ["out_lengths"])]
    model = helper.make_model(helper.make_graph(nodes, "identity", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("change, field", [
    (lambda m: m.update(artefacts=[1]), "'artefacts' must be an object"),
    (lambda m: m["artefacts"]["recognizer.onnx"].pop("file"), "'file' must be a file name"),
    (lambda m: m["artefacts"]["recognizer.onnx"].update(file="../../etc/passwd"), "not a relative path"),
    (lambda m: m["artefacts"]["recognizer.onnx"].update(inputs=["wavs"]), "'inputs' must name at least 2"),
    (lambda m: m["artefacts"]["recognizer.onnx"].update(outputs=7), "'outputs' must name at least 1"),
    (lambda m: m["artefacts"]["recognizer.onnx"].update(min_time="400"), "'min_time' must be an integer"),
    (lambda m: m["artefacts"].update({"recognizer.onnx": "x"}), "must be an object, got str"),
    (lambda m: m["artefacts"]["recognizer.onnx"].update(quantization="int8"), "'quantization' must be an "
     "object whose 'fp32_file'"),
    (lambda m: m["artefacts"]["recognizer.onnx"].update(quantization={"fp32_file": "/etc/passwd"}),
     "'quantization.fp32_file'"),
])
def test_each_bad_field_of_export_json_is_named(tmp_path, change, field):
    manifest = {"interface": "EncoderASR", "artefacts": {"recognizer.onnx": dict(GOOD_ENTRY)}}
    change(manifest)
    (tmp_path / "export.json").write_text(json.dumps(manifest))
    with pytest.raises(HparamsError, match="export.json") as error:
        read_manifest(tmp_path)
    assert field in str(error.value)
    (tmp_path / "export.json").write_text("[1, 2]")
    with pytest.raises(HparamsError, match="must hold a JSON object, got list"):
        read_manifest(tmp_path)


def test_a_damaged_graph_and_inputs_that_do_not_fit_name_the_file(tmp_path):
    (tmp_path / "broken.onnx").write_bytes(b"not a graph at all")
    with pytest.raises(SpeechkitError, match=r"broken.onnx: onnxruntime cannot load this graph"):
        load_graph(tmp_path / "broken.onnx", "onnx", ("wavs", "lengths"), ("out",))
    (tmp_path / "broken.pt").write_bytes(b"not a graph at all")
    with pytest.raises(SpeechkitError, match=r"broken.pt: not a TorchScript file"):
        load_graph(tmp_path / "broken.pt", "torchscript", ("wavs", "lengths"), ("out",))
    graph = load_graph(_identity_graph(tmp_path / "identity.onnx"), "onnx", ("x", "lengths"), ("out",))
    with pytest.raises(SpeechkitError, match=r"identity.onnx: onnxruntime failed on inputs x \(1, 8\)"):
        graph(torch.zeros(1, 8), torch.tensor([8]))
    works = load_graph(tmp_path / "identity.onnx", "onnx", ("wavs", "lengths"), ("out", "out_lengths"))
    assert torch.equal(works(torch.ones(1, 8), torch.tensor([8]))[0], torch.ones(1, 8))


def test_transcribe_with_a_broken_export_prints_one_line_naming_the_file(tmp_path, capsys):
    folder = write_recognizer(tmp_path / "model", streaming=False)
    wav = tmp_path / "a.wav"
    write(wav, torch.zeros(16000), 16000)
    (folder / "export.json").write_text(json.dumps({"artefacts": {"recognizer.onnx": dict(GOOD_ENTRY)}}))
    shutil.copy(_identity_graph(tmp_path / "identity.onnx"), folder / "recognizer.onnx")
    (folder / "recognizer.onnx").write_bytes(b"\x00damaged")
    assert cli.main(["transcribe", str(folder), str(wav), "--backend", "onnx"]) == 1
    err = capsys.readouterr().err
    assert "recognizer.onnx: onnxruntime cannot load this graph" in err and "Traceback" not in err, err
