"""The separation recipe's SLURM script for real: SLURM_PROCID/NTASKS/LOCALID become the explicit worker
flags and the workers meet through a file:// rendezvous. Skipped when no SLURM cluster answers."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import slurm_cluster_answers
from tests.integration.distributed.test_slurm import sbatch, wait_job
from tests.recipes.recipe_helpers import separation_args, write_speaker_corpus

RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "SynthSpeech" / "separation"

pytestmark = [pytest.mark.slurm, pytest.mark.slow,
              pytest.mark.skipif(not slurm_cluster_answers(), reason="no SLURM cluster answers (sinfo)")]


def test_explicit_worker_sbatch_trains_and_evaluates(tmp_path, make_env):
    env = make_env(SYNC_DIR=tmp_path / "sync", SPEECHKIT_PYTHON=sys.executable)
    if "SLURM_CONF" in os.environ:
        env["SLURM_CONF"] = os.environ["SLURM_CONF"]
    corpus = write_speaker_corpus(tmp_path / "corpus")
    output = tmp_path / "run"
    job = sbatch(["--nodes=1", "--ntasks=2", "--ntasks-per-node=2", f"--chdir={RECIPE}",
                  f"--output={tmp_path}/job-%j.out", str(RECIPE / "train_explicit_workers.sbatch"),
                  *separation_args(corpus, output)], env)
    state, code = wait_job(job, env, timeout=600)
    log = (tmp_path / f"job-{job}.out").read_text()
    assert state == "COMPLETED", f"{state} {code}\n{log[-6000:]}"
    assert "2 process(es) x 4 items" in log
    assert (output / "separation_test.txt").read_text().startswith("mixtures: 7")
    # the rendezvous file was made in the shared folder, and the clean exit removed it
    assert (tmp_path / "sync").is_dir() and not list((tmp_path / "sync").iterdir())
