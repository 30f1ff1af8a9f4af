"""The export check against PyTorch: a tolerance scaled to each output (a separator whose sources peak
around 20, as the recipe's separator does once trained, exports; a graph that froze a length is still
refused), speech-like input checked too, ``--no-verify`` honoured, and files written under the umask."""
from __future__ import annotations

import json
import os
import stat

import pytest
import torch

pytest.importorskip("onnxruntime")

from speechkit.cli import main  # noqa: E402
from speechkit.errors import ExportError  # noqa: E402
from speechkit.export import export_folder, export_graph  # noqa: E402
from speechkit.export.convert import ABS_TOLERANCE, REL_TOLERANCE, allowed_difference  # noqa: E402
from speechkit.export.graphs import GraphSpec, _waveforms, graph_specs, speech_like_waveforms  # noqa: E402
from speechkit.pretrained import Pretrained  # noqa: E402
from speechkit.pretrained.loading import save_weights  # noqa: E402
from tests.helpers import job_models  # noqa: E402

AXES = {"wavs": {0: "batch", 1: "time"}, "lengths": {0: "batch"}, "out": {0: "batch", 1: "time"}}


def loud_separator(folder, gain: float = 400.0):
    """The test separator with its decoder scaled so its sources peak around 20 on speech-like input: the
    scale a separator trained on SI-SNR (which leaves the scale free) drifts to, with the float32 rounding
    differences that come with it."""
    folder = job_models.write_separation_model(folder)
    model = Pretrained.from_hparams(str(folder))
    separator = model.mods["separator"]
    with torch.no_grad():
        separator.decoder.weight.mul_(gain)
    save_weights(separator.state_dict(), folder / "separator.safetensors")
    return folder, separator


def test_the_tolerance_scales_with_the_output():
    assert allowed_difference(torch.tensor([0.0])) == ABS_TOLERANCE
    assert allowed_difference(torch.tensor([3.0, -20.0])) == pytest.approx(ABS_TOLERANCE + 20 * REL_TOLERANCE)


def test_a_separator_with_large_outputs_exports_and_reports_its_relative_difference(tmp_path):
    folder, separator = loud_separator(tmp_path / "loud")
    with torch.no_grad():
        peak = float(separator(speech_like_waveforms([8000]), torch.tensor([8000])).abs().max())
    assert peak > 10  # the scale of the trained separator
    out = export_folder(folder, tmp_path / "loud-onnx", formats=["onnx"])
    entry = json.loads((out / "export.json").read_text())["artefacts"]["separator.onnx"]
    assert 0 < entry["max_rel_diff"] < REL_TOLERANCE
    assert entry["max_abs_diff"] > 1e-4  # what a fixed tolerance of 1e-4 refused
    assert entry["max_abs_diff"] <= ABS_TOLERANCE + REL_TOLERANCE * 4 * peak
    assert "of the output's scale" in (out / "README.md").read_text()


class FrozenLength(torch.nn.Module):
    """Scales its input by its length, read as a Python number: a trace freezes it (a real bug), so the
    graph is wrong by the size of the output for any other length, however large the output."""

    def forward(self, x, lengths):
        return valid(x, lengths) * 20.0 * (x.shape[1] / 16000.0)


def valid(x, lengths):
    """``x`` with the padding zeroed (the graph's use of its lengths input)."""
    return x * (torch.arange(x.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)).to(x.dtype)


def test_a_frozen_length_is_still_refused_at_any_scale(tmp_path):
    spec = GraphSpec("frozen", FrozenLength(), ("wavs", "lengths"), ("out",),
                     AXES, _waveforms)
    assert spec.speech_example is speech_like_waveforms  # waveform inputs are checked on speech too
    with pytest.raises(ExportError, match=r"differs by [0-9.]+ \(its values reach"):
        export_graph(spec, tmp_path / "frozen.onnx", "onnx")


def test_speech_like_input_is_checked_too(tmp_path):
    """A module exact on white noise but not on louder, voiced input is refused: the speech-like batch is
    compared as well."""

    class WrongWhenLoud(torch.nn.Module):
        def forward(self, x, lengths):
            loud = (x.abs() > 0.45).to(x.dtype)  # white noise at 0.1 rarely passes; speech peaks at 0.5
            return valid(x + loud * (x.shape[1] % 7) * 0.01, lengths)

    spec = GraphSpec("loud", WrongWhenLoud(), ("wavs", "lengths"), ("out",),
                     AXES, _waveforms)
    with pytest.raises(ExportError, match="speech-like input"):
        export_graph(spec, tmp_path / "loud.onnx", "onnx", checks=3)


def test_no_verify_skips_the_comparison(tmp_path, capsys):
    source = job_models.write_separation_model(tmp_path / "model")
    out = tmp_path / "out"
    assert main(["export", "--model", str(source), "--format", "onnx", "--output", str(out),
                 "--no-verify"]) == 0
    entry = json.loads((out / "export.json").read_text())["artefacts"]["separator.onnx"]
    assert entry["max_abs_diff"] is None and entry["max_rel_diff"] is None
    assert "not checked against PyTorch" in (out / "README.md").read_text()
    # The graph itself is the same as a checked one.
    graph = Pretrained.from_hparams(str(out), backend="onnx")
    torch_model = Pretrained.from_hparams(str(source))
    wav = speech_like_waveforms([4000])
    assert torch.allclose(graph.separate_batch(wav), torch_model.separate_batch(wav), atol=1e-4)


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_exported_files_follow_the_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        source = job_models.write_separation_model(tmp_path / "model")
        out = export_folder(source, tmp_path / "out", formats=["onnx"], verify=False)
    finally:
        os.umask(previous)
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in [out, *out.iterdir()]}
    assert modes["separator.safetensors"] == modes["separator.onnx"] == 0o666 & ~umask, modes
    assert modes["out"] == 0o777 & ~umask
    assert stat.S_IMODE((source / "separator.safetensors").stat().st_mode) == 0o666 & ~umask


def test_graph_specs_of_waveform_models_have_a_speech_example(tmp_path):
    specs = graph_specs(Pretrained.from_hparams(str(job_models.write_separation_model(tmp_path / "m"))))
    assert specs[0].speech_example is speech_like_waveforms
    wavs = speech_like_waveforms([8000, 4000])
    assert wavs.shape == (2, 8000) and float(wavs[1, 4000:].abs().max()) == 0.0
    assert 0.45 < float(wavs.abs().max()) <= 0.5
