"""Miniatures of real corpus layouts: a few files with the real names, rates, channel counts and quirks."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import soundfile


def tone(path: Path, seconds: float, rate: int, channels: int = 1, seed: int = 0, fmt: str = None) -> Path:
    """A quiet noisy tone (never silent, never clipped) of ``seconds`` at ``rate``, ``channels`` channels."""
    rng = np.random.default_rng(seed)
    frames = int(round(seconds * rate))
    t = np.arange(frames) / rate
    wave = 0.3 * np.sin(2 * np.pi * (150 + 40 * (seed % 40)) * t) + 0.02 * rng.standard_normal(frames)
    data = np.stack([wave] * channels, axis=1) if channels > 1 else wave
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(path), data.astype(np.float32), rate, format=fmt)
    return path


CV_SENTENCES = ["Nine o'clock, he said.", 'She called it "the bottle".', "His bottle is HERE!",
                "Où est la gare?", "Well... maybe.", "It's 5 p.m. now."]


def commonvoice(root: Path, splits: bool = True) -> Path:
    """Common Voice: clips/common_voice_en_<n>.mp3 at 48 kHz (one stereo), TSVs with its columns."""
    header = "client_id\tpath\tsentence\tup_votes\tdown_votes\tage\tgender\taccents\tlocale\tsegment\n"
    clients = ["a3f1" * 16, "b7c2" * 16, "c9d0" * 16]
    rows = []
    for n, sentence in enumerate(CV_SENTENCES):
        name = f"common_voice_en_{19000000 + n}.mp3"
        tone(root / "clips" / name, 0.8 + 0.1 * n, 48000, channels=2 if n == 1 else 1, seed=n, fmt="MP3")
        rows.append(f"{clients[n % 3]}\t{name}\t{sentence}\t2\t0\t\t\t\ten\t\n")
    if splits:
        groups = {"train.tsv": rows[:4], "dev.tsv": rows[4:5], "test.tsv": rows[5:]}
    else:
        groups = {"validated.tsv": rows}
    for name, lines in groups.items():
        (root / name).write_text(header + "".join(lines), encoding="utf-8")
    return root


def librispeech(root: Path) -> Path:
    """LibriSpeech: train-clean-100, dev-clean, test-clean with speaker/chapter folders and .trans.txt."""
    for split, speakers in (("train-clean-100", ("103", "1034")), ("dev-clean", ("1272",)),
                            ("test-clean", ("1089",))):
        for s, speaker in enumerate(speakers):
            chapter = root / split / speaker / "1240"
            lines = []
            for u in range(2):
                utt = f"{speaker}-1240-{u:04d}"
                tone(chapter / f"{utt}.flac", 0.6 + 0.2 * u, 16000, seed=s + u)
                lines.append(f"{utt} CHAPTER {u} OF THE BOOK\n")
            (chapter / f"{speaker}-1240.trans.txt").write_text("".join(lines), encoding="utf-8")
    return root


def folder(root: Path) -> Path:
    """A folder of recordings by speaker (44.1 kHz WAV, one stereo FLAC) with same-name .txt transcripts."""
    for s, speaker in enumerate(("alice", "bob", "carol", "dave")):
        for u in range(2):
            ext = "flac" if u else "wav"
            tone(root / speaker / f"take{u}.{ext}", 0.7, 44100, channels=2 if (s, u) == (1, 1) else 1,
                 seed=s * 2 + u)
            (root / speaker / f"take{u}.txt").write_text(f"Hello, {speaker.title()} take {u}.\n",
                                                          encoding="utf-8")
    return root


def kaldi(root: Path, segments: bool = True) -> Path:
    """A Kaldi data directory: wav.scp of two recordings (relative paths), segments, text, utt2spk."""
    tone(root / "wav" / "rec1.wav", 3.0, 16000, seed=1)
    tone(root / "wav" / "rec2.wav", 2.0, 8000, seed=2)
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "wav.scp").write_text("rec1 wav/rec1.wav\nrec2 wav/rec2.wav\n")
    if segments:
        (data / "segments").write_text("spk1-rec1-0000 rec1 0.00 1.20\nspk1-rec1-0001 rec1 1.20 2.90\n"
                                       "spk2-rec2-0000 rec2 0.10 1.90\n")
        utts = {"spk1-rec1-0000": "spk1", "spk1-rec1-0001": "spk1", "spk2-rec2-0000": "spk2"}
    else:
        utts = {"rec1": "spk1", "rec2": "spk2"}
    (data / "text").write_text("".join(f"{u} some words of {u}\n" for u in utts))
    (data / "utt2spk").write_text("".join(f"{u} {s}\n" for u, s in utts.items()))
    return data


def table(root: Path, kind: str = "csv") -> Path:
    """A metadata table (CSV with a quoted comma, TSV or JSON Lines) and its audio under audio/."""
    rows = []
    for n in range(6):
        tone(root / "audio" / f"clip{n}.wav", 0.5 + 0.1 * n, 22050, seed=n)
        rows.append((f"audio/clip{n}.wav", f"Line {n}, said \"clearly\"", f"reader{n % 3}"))
    if kind == "jsonl":
        import json

        text = "".join(json.dumps({"file": p, "transcription": t, "reader": s}) + "\n" for p, t, s in rows)
        path = root / "metadata.jsonl"
    elif kind == "tsv":
        text = "file\ttranscription\treader\n" + "".join(f"{p}\t{t}\t{s}\n" for p, t, s in rows)
        path = root / "metadata.tsv"
    else:
        import csv
        import io

        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["file", "transcription", "reader"])
        writer.writerows(rows)
        text, path = buffer.getvalue(), root / "metadata.csv"
    path.write_text(text, encoding="utf-8")
    return path


def voxceleb(root: Path) -> Path:
    """VoxCeleb1: wav/id100NN/<youtube id>/000NN.wav, 16 kHz."""
    for s in range(4):
        for v, video in enumerate(("1zcIwhmdeo4", "7w0IBEWc9Qw")):
            tone(root / "wav" / f"id1000{s + 1}" / video / f"{v + 1:05d}.wav", 0.5, 16000, seed=s + v)
    return root


def librimix(root: Path, noise: bool = True) -> Path:
    """Libri2Mix wav8k/min: train-100, dev, test, each with mix_clean/, s1/, s2/ (noise/) of one name."""
    for split, names in (("train-100", ["103-1240-0003_1235-135887-0017", "19-198-0001_26-495-0002",
                                        "1034-121119-0049_911-128684-0001"]),
                         ("dev", ["1272-128104-0000_2277-149896-0006"]),
                         ("test", ["1089-134686-0000_121-121726-0014"])):
        for name in names:
            folders = ["mix_clean", "s1", "s2"] + (["noise"] if noise else [])
            for folder_name in folders:
                seed = sum(map(ord, split + name + folder_name)) % 1000  # no two files alike
                tone(root / split / folder_name / f"{name}.wav", 0.6, 8000, seed=seed)
    return root


def make_fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path
