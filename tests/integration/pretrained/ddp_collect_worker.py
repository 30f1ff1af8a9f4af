"""Run by test_pretrainer_ddp.py under torchrun: collect a file on every rank, then fail on rank 1 only."""
import json
import sys

import torch

from speechkit import distributed as dist
from speechkit.errors import FetchError
from speechkit.pretrained import Pretrainer
from speechkit.run_options import RunOptions


def main(url: str, folder: str, out: str) -> None:
    ctx = dist.init(RunOptions(device="cpu"))
    layer = torch.nn.Linear(4, 3)
    pretrainer = Pretrainer(f"{folder}/collect", {"layer": layer}, {"layer": f"{url}/w/layer.safetensors"})
    pretrainer.collect_files()
    pretrainer.load_collected()
    result = {"weight": layer.weight.tolist(), "bias": layer.bias.tolist()}
    name = "layer.safetensors" if ctx.rank == 0 else "absent.safetensors"
    failing = Pretrainer(f"{folder}/collect-{ctx.rank}", {"layer": torch.nn.Linear(4, 3)},
                         {"layer": f"{url}/w/{name}"})
    try:
        failing.collect_files()
        result["error"] = None
    except FetchError as error:
        result["error"] = str(error)
    with open(f"{out}.{ctx.rank}.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
