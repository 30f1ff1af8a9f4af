"""The file:// rendezvous checks, on real torch FileStore files in one process: what is refused (naming the
path), what is reused, the bounded wait and the withdrawal, and the removal at the end."""
from __future__ import annotations

import struct

import pytest
import torch.distributed as torch_dist

from speechkit.distributed.rendezvous import (
    CHECK_IN_PREFIX,
    close_file_store,
    join_file_store,
    prepare_file,
    read_records,
)
from speechkit.errors import DistributedError


def test_records_of_a_real_store_file_are_read_with_deletions(tmp_path):
    path = tmp_path / "rdv"
    store = torch_dist.FileStore(str(path), 1)
    store.set("a", "1")
    store.add("n", 2)
    store.set("gone", "x")
    store.delete_key("gone")
    records = read_records(path.read_bytes(), path)
    assert records["/a"] == b"1" and records["/n"] == b"2" and "/gone" not in records


@pytest.mark.parametrize("data", [b"garbage", struct.pack("<I", 1 << 30) + b"x",
                                  struct.pack("<I", 3) + b"abc" + struct.pack("<I", 1) + b"1"])
def test_a_file_that_is_no_store_is_refused_naming_it(tmp_path, data):
    path = tmp_path / "rdv"
    path.write_bytes(data)
    refused = f"file://{path}: the file is not a rendezvous file.*rm {path}"
    with pytest.raises(DistributedError, match=refused):
        prepare_file(path, 0)


def test_a_missing_folder_and_a_folder_path_are_refused(tmp_path):
    with pytest.raises(DistributedError, match=f"the folder {tmp_path / 'no'} does not exist"):
        prepare_file(tmp_path / "no" / "rdv", 0)
    with pytest.raises(DistributedError, match="is a folder"):
        prepare_file(tmp_path, 0)


def test_one_rank_joins_and_the_end_removes_the_file(tmp_path):
    init = f"file://{tmp_path / 'rdv'}"
    store = join_file_store(init, rank=0, world_size=1, timeout_s=5)
    assert (tmp_path / "rdv").exists()
    with pytest.raises(DistributedError, match="rank 0 has already joined through this file"):
        prepare_file(tmp_path / "rdv", 0)  # what a rerun meets after a crash
    close_file_store(init, store)
    assert not (tmp_path / "rdv").exists()


def test_a_closed_file_left_behind_is_emptied_and_used_again(tmp_path):
    init = f"file://{tmp_path / 'rdv'}"
    store = join_file_store(init, rank=0, world_size=1, timeout_s=5)
    store.set("speechkit/rendezvous/closed", "1")  # as close_file_store marks it, removal missed
    prepare_file(tmp_path / "rdv", 0)
    assert (tmp_path / "rdv").read_bytes() == b""
    assert join_file_store(init, rank=0, world_size=1, timeout_s=5) is not None


def test_a_missing_rank_ends_the_wait_and_the_check_in_is_withdrawn(tmp_path):
    init = f"file://{tmp_path / 'rdv'}"
    missing = r"rank\(s\) 1 did not join .* within --distributed_timeout_s 1 s"
    with pytest.raises(DistributedError, match=missing):
        join_file_store(init, rank=0, world_size=2, timeout_s=1)
    assert f"/{CHECK_IN_PREFIX}0" not in read_records((tmp_path / "rdv").read_bytes(), tmp_path / "rdv")
    prepare_file(tmp_path / "rdv", 0)  # a rerun is not taken for a crashed run's
