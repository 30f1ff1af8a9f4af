"""Model folders and a running ``speechkit serve`` shared by the serve tests of one module."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import export_models, job_models
from tests.helpers.scripts import load_script
from tests.helpers.serve import ServerProcess, write_raising_model

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    pytest.importorskip("fastapi", reason="speechkit serve needs the 'serve' extra (fastapi, uvicorn)")
    pytest.importorskip("websockets", reason="the serve tests' WebSocket client needs 'websockets'")
    root = tmp_path_factory.mktemp("serve-models")
    return {"asr": job_models.write_model(root / "asr"),
            "sep": job_models.write_separation_model(root / "sep"),
            "voc": job_models.write_vocoder_model(root / "voc"),
            "broken": write_raising_model(root / "broken"),
            "slow": job_models.write_model(root / "slow", seconds_per_batch=1.5),
            "ctc": load_script(REPO / "benchmarks" / "infer.py", name="infer_benchmark").make_model(
                root / "ctc", d_model=32, layers=1),
            "live": export_models.write_recognizer(root / "live", streaming=True)}


@pytest.fixture(scope="module")
def server(folders):
    """One server with every kind of model (and a Transformer-CTC recognizer with random weights) and small
    limits (1 MB requests, 10 s of audio, streams closed after 3 s of silence)."""
    args = [f"{name}={folders[name]}" for name in ("asr", "sep", "voc", "broken", "ctc", "live")]
    with ServerProcess(args + ["--max-request-mb", "1", "--max-audio-seconds", "10", "--max-wait-ms", "50",
                               "--partial-every-s", "0.2", "--stream-idle-s", "3"]) as process:
        yield process
