"""A checkpoint that cannot be written (a full disk, a file size limit) fails with an error that says what
happened and where; the partial checkpoint is removed and the previous one stays loadable.

The full disk is real: a small tmpfs mounted for the test (which needs root and a kernel that allows the
mount; the test is skipped otherwise). The file size limit is the kernel's RLIMIT_FSIZE, set in a child
process, and runs everywhere.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from speechkit.checkpoints import Checkpointer, EpochCounter
from speechkit.errors import CheckpointError

REPO = Path(__file__).parents[3]


@pytest.fixture
def small_disk(tmp_path):
    """A 256 kB tmpfs at ``tmp_path/disk``, unmounted after the test."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(folder: Path) -> None:
    """Write into ``folder`` until its file system is full."""
    with open(folder / "filler", "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError as error:
            assert error.errno == 28, error  # ENOSPC


def test_a_full_disk_is_named_and_the_previous_checkpoint_stays(small_disk):
    model = torch.nn.Linear(64, 64)
    save = small_disk / "save"
    checkpointer = Checkpointer(save, {"model": model, "counter": EpochCounter(3)})
    first = checkpointer.save_checkpoint(meta={"loss": 1.0}, epoch=1)
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    _fill(small_disk)
    with torch.no_grad():
        model.weight.add_(1.0)
    with pytest.raises(CheckpointError) as raised:
        checkpointer.save_checkpoint(meta={"loss": 0.5}, epoch=2)
    message = str(raised.value)
    assert f"in {save}: writing model.ckpt failed: the disk is full (No space left on device)" in message
    assert f"The previous checkpoint {first.path} is intact" in message
    assert "unexpected pos" not in message
    assert [p.name for p in save.iterdir() if p.name.startswith(".tmp-")] == []  # the partial one is gone
    # The previous checkpoint loads, with the weights it had.
    fresh = torch.nn.Linear(64, 64)
    [kept] = Checkpointer(save).list_checkpoints()
    assert kept.path == first.path
    Checkpointer(save, {"model": fresh, "counter": EpochCounter(3)}).load_checkpoint(kept)
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in saved.items())
    # Once there is room again, the same checkpointer saves.
    (small_disk / "filler").unlink()
    assert checkpointer.save_checkpoint(meta={"loss": 0.5}, epoch=2) is not None


LIMITED = textwrap.dedent("""
    import resource, signal, sys
    import torch
    from speechkit.checkpoints import Checkpointer
    from speechkit.errors import CheckpointError
    model = torch.nn.Linear(4, 4)
    checkpointer = Checkpointer(sys.argv[1], {"model": model})
    first = checkpointer.save_checkpoint(epoch=1)
    print("first", first.path, flush=True)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, not a signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (256, 256))
    model.weight.data = torch.zeros(512, 4)  # a state larger than 256 bytes
    try:
        checkpointer.save_checkpoint(epoch=2)
    except CheckpointError as error:
        print("error", error, flush=True)
""")


def test_a_write_past_the_file_size_limit_is_named(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", LIMITED, str(tmp_path / "save")], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert "error" in lines, done.stdout + done.stderr
    assert (f"in {tmp_path / 'save'}: writing model.ckpt failed: the file is larger than this process may "
            "write (File too large)") in lines["error"]
    assert f"The previous checkpoint {lines['first']} is intact" in lines["error"]
    [kept] = Checkpointer(tmp_path / "save").list_checkpoints()
    assert str(kept.path) == lines["first"]
    assert not list((tmp_path / "save").glob(".tmp-*"))
