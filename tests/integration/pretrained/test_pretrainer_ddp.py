"""Pretrainer.collect_files under torchrun (2 gloo workers): one download per machine; a failure reaches every
rank as an error instead of a hang."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

from speechkit.pretrained.loading import save_weights

WORKER = pathlib.Path(__file__).with_name("ddp_collect_worker.py")


@pytest.mark.slow
def test_ranks_download_once_and_share_failures(file_server, tmp_path):
    layer = torch.nn.Linear(4, 3)
    save_weights(layer.state_dict(), tmp_path / "layer.safetensors")
    file_server.files["/w/layer.safetensors"] = (tmp_path / "layer.safetensors").read_bytes()
    file_server.delay_s = 0.01
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               str(WORKER), file_server.url, str(tmp_path), str(tmp_path / "result")]
    done = subprocess.run(command, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads((tmp_path / f"result.{rank}.json").read_text()) for rank in range(2)]
    # One download; rank 0's second collection of the same file only revalidates it (a 304, no body).
    downloads = file_server.gets("/w/layer.safetensors") - file_server.not_modified["/w/layer.safetensors"]
    assert downloads == 1 and file_server.not_modified["/w/layer.safetensors"] <= 1
    for result in results:
        assert torch.equal(torch.tensor(result["weight"]), layer.weight.detach())
        assert torch.equal(torch.tensor(result["bias"]), layer.bias.detach())
        # Rank 0's own fetch succeeded, yet it raises too: rank 1 could not get its file.
        assert "rank 1" in result["error"] and "absent.safetensors" in result["error"]
