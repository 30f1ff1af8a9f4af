"""``speechkit manifest``: train/valid manifests (JSON or fairseq TSV with labels) from an audio tree,
special files skipped."""
from __future__ import annotations

import json
import os
import socket

import pytest
import torch

from speechkit import cli
from speechkit.data import audio
from speechkit.data.fairseq_manifest import (
    load_fairseq_manifest,
    write_fairseq_manifest,
    write_labels,
)
from speechkit.data.manifest import (
    find_audio_files,
    load_csv_manifest,
    load_json_manifest,
    load_manifest,
)
from speechkit.errors import ManifestError
from tests.unit.data import fairseq_tree

tree = fairseq_tree.tree  # a shared fixture: pytest finds it under this name


def make_tree(root, count, rate=16000):
    for index in range(count):
        speaker = f"spk{index % 3}"
        audio.write(root / speaker / f"{speaker}-utt{index:03d}.flac", torch.zeros(160 * (index + 1)), rate)
    (root / "notes.txt").write_text("not audio")


@pytest.fixture
def shuffled_corpus(tmp_path):
    """24 files whose path order differs from the order of their labels manifest, as in a real corpus: a
    JSON manifest listing them by id while the fairseq manifest lists them by path."""
    root = tmp_path / "corpus"
    rows = {}
    for index in range(24):
        speaker = f"s{index % 3}"
        utt_id = f"{speaker}-{(index * 7) % 24:02d}"
        path = root / speaker / f"{utt_id}.flac"
        audio.write(path, torch.zeros(160 + index), 16000)
        rows[utt_id] = {"wav": "$data_root/" + path.relative_to(root).as_posix(), "duration": 0.01,
                        "text": f"WORD{index} OF {utt_id.upper()}"}
    rows = dict(sorted(rows.items(), key=lambda item: item[1]["text"]))  # neither path nor id order
    labels = tmp_path / "corpus.json"
    labels.write_text(json.dumps(rows))
    return root, rows, labels


@pytest.fixture
def unix_socket(tmp_path):
    """A bound socket file (closed at the end); AF_UNIX paths are short, so it lives in a short folder."""
    made = []

    def bind(path):
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        made.append(server)

    yield bind
    for server in made:
        server.close()


def test_manifest_command_writes_train_and_valid(tmp_path, capsys):
    from speechkit import cli

    root = tmp_path / "tree"
    make_tree(root, 30)
    dest = tmp_path / "out"
    code = cli.main(["manifest", str(root), "--ext", "flac", "--dest", str(dest), "--valid-percent", "0.2",
                     "--seed", "1", "--workers", "1", "--placeholder", "data_root", "--group-depth", "1"])
    assert code == 0
    assert "train.json: " in capsys.readouterr().out
    train = load_json_manifest(dest / "train.json", replacements={"data_root": str(root)})
    valid = load_json_manifest(dest / "valid.json", replacements={"data_root": str(root)})
    assert len(train) + len(valid) == 30 and len(valid) == 10  # one speaker folder of 10 files
    assert {k.split("-")[0] for k in train}.isdisjoint({k.split("-")[0] for k in valid})
    again = tmp_path / "again"
    cli.main(["manifest", str(root), "--dest", str(again), "--valid-percent", "0.2", "--seed", "1",
              "--workers", "1", "--placeholder", "data_root", "--group-depth", "1", "--format", "csv"])
    assert load_csv_manifest(again / "valid.csv", replacements={"data_root": str(root)}) == valid
    assert cli.main(["manifest", str(root), "--ext", "ogg", "--dest", str(dest)]) == 1
    assert cli.main(["manifest", str(tmp_path / "nowhere"), "--dest", str(dest)]) == 1
    assert "not a directory" in capsys.readouterr().err


def test_command_writes_the_fairseq_layout(tree, tmp_path, capsys):
    root, sizes = tree
    dest = tmp_path / "manifests"
    code = cli.main(["manifest", str(root), "--ext", "flac", "--dest", str(dest), "--valid-percent", "0.34",
                     "--format", "tsv", "--seed", "3"])
    assert code == 0, capsys.readouterr()
    lines = {}
    for name in ("train", "valid"):
        text = (dest / f"{name}.tsv").read_text()
        assert text.endswith("\n")
        first, *rows = text.splitlines()
        assert first == str(root)  # the root folder alone on the first line, no tab
        lines[name] = [row.split("\t") for row in rows]
    written = {relative: int(count) for rows in lines.values() for relative, count in rows}
    assert written == sizes  # relative paths, exact sample counts, every file once
    assert len(lines["valid"]) == 1 and len(lines["train"]) == 2
    assert cli.main(["manifest", str(root), "--dest", str(dest), "--format", "tsv",
                     "--placeholder", "data_root"]) == 2


def test_labels_follow_the_manifest_rows_not_the_label_rows(shuffled_corpus, tmp_path, capsys):
    root, rows, labels = shuffled_corpus
    dest = tmp_path / "m"
    assert cli.main(["manifest", str(root), "--dest", str(dest), "--format", "tsv", "--valid-percent", "0",
                     "--labels", str(labels), "--replacement", f"data_root={root}"]) == 0, capsys.readouterr()
    loaded = load_fairseq_manifest(dest / "train.tsv")
    assert len(loaded) == 24
    for data_id, row in loaded.items():  # every transcript is its own utterance's
        assert row["wrd"] == rows[data_id]["text"], data_id
        assert row["ltr"].replace(" ", "").replace("|", " ").strip() == rows[data_id]["text"]
    # The Python API with the ids of the rows (no usable path: the placeholder is not replaced) does the same.
    write_labels(json.loads(labels.read_text()), dest / "train.tsv")
    assert load_fairseq_manifest(dest / "train.tsv") == loaded


def test_labels_of_a_reordered_or_unknown_manifest_are_refused(shuffled_corpus, tmp_path, capsys):
    root, rows, labels = shuffled_corpus
    manifest = tmp_path / "train.tsv"
    entries = sorted((p.relative_to(root).as_posix(), 160) for p in root.rglob("*.flac"))
    write_fairseq_manifest(root, entries, manifest)
    write_labels(load_manifest(labels, {"data_root": str(root)}), manifest)
    write_fairseq_manifest(root, entries[::-1], manifest)  # the manifest is written again, in another order
    with pytest.raises(ManifestError, match=r"train.wrd, line 1: written for 's0/s0-00.flac', but line 2 of "
                                            r".*train.tsv lists 's2/s2-23.flac'"):
        load_fairseq_manifest(manifest)
    write_fairseq_manifest(root, entries + [("s9/extra.flac", 160)], manifest)
    (root / "s9").mkdir()
    audio.write(root / "s9" / "extra.flac", torch.zeros(160), 16000)
    with pytest.raises(ManifestError, match=r"train.tsv, line 26: no row has the audio .*extra.flac or the "
                                            r"id 'extra'"):
        write_labels(rows, manifest)
    assert cli.main(["manifest", str(root), "--dest", str(tmp_path / "j"), "--labels", str(labels)]) == 2
    assert "for --format tsv only" in capsys.readouterr().err


def test_manifest_skips_fifos_sockets_devices_and_broken_links(tmp_path, unix_socket, capsys, caplog):
    root = tmp_path / "t"
    for name in ("a", "b"):
        audio.write(root / "spk" / f"{name}.flac", torch.zeros(1600), 16000)
    os.mkfifo(root / "spk" / "fifo.flac")
    unix_socket(root / "spk" / "s.flac")
    os.symlink("/dev/null", root / "spk" / "device.flac")
    os.symlink(root / "gone.flac", root / "spk" / "broken.flac")
    with caplog.at_level("WARNING"):
        assert find_audio_files(root) == [os.path.join("spk", "a.flac"), os.path.join("spk", "b.flac")]
    for name, kind in (("fifo", "a FIFO"), ("s", "a socket"), ("device", "a character device"),
                       ("broken", "unreadable")):
        assert f"skipping {root / 'spk' / name}.flac: {kind}" in caplog.text
    code = cli.main(["manifest", str(root), "--dest", str(tmp_path / "m"), "--valid-percent", "0",
                     "--workers", "1"])
    assert code == 0
    rows = json.loads((tmp_path / "m" / "train.json").read_text())
    assert sorted(rows) == ["a", "b"]
