"""Time of ``speechkit data import`` and ``speechkit data check`` per hour of audio.

Two miniature corpora of ``--clips`` files each are written first: a Common Voice release (48 kHz stereo
MP3, the slowest to decode) and a LibriSpeech tree (16 kHz mono FLAC). For each, the table gives seconds per
hour of audio for the import (headers only) and for the check, reading headers only (``--headers-only``)
and decoding every file (silence, clipping, NaN, duplicate audio), and two ratios: the import against
walking the same files with ``build_manifest`` (``speechkit manifest``, the obvious alternative: headers,
no transcripts), and the full check against the header-only one (what decoding costs).

Usage:
    python benchmarks/data_import_check.py                 # 200 clips of 4 s per layout, a minute or two
    python benchmarks/data_import_check.py --clips 1000 --seconds 6
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # speechkit of this checkout

from speechkit.data.check import check_manifests  # noqa: E402
from speechkit.data.importers import import_corpus  # noqa: E402
from speechkit.data.manifest import build_manifest  # noqa: E402


def _wave(rng: np.random.Generator, seconds: float, rate: int, channels: int) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    wave = 0.2 * np.sin(2 * np.pi * rng.uniform(100, 300) * t) + 0.02 * rng.standard_normal(t.size)
    return np.stack([wave, 0.95 * wave], 1) if channels == 2 else wave


def write_commonvoice(root: Path, clips: int, seconds: float, rng: np.random.Generator) -> Path:
    lines = ["client_id\tpath\tsentence\n"]
    for n in range(clips):
        name = f"common_voice_en_{n:08d}.mp3"
        (root / "clips").mkdir(parents=True, exist_ok=True)
        soundfile.write(str(root / "clips" / name), _wave(rng, seconds, 48000, 2).astype(np.float32), 48000,
                        format="MP3")
        lines.append(f"speaker{n % 20:02d}\t{name}\tThe words of clip {n}.\n")
    (root / "validated.tsv").write_text("".join(lines), encoding="utf-8")
    return root


def write_librispeech(root: Path, clips: int, seconds: float, rng: np.random.Generator) -> Path:
    per_chapter = max(1, clips // 20)
    for n in range(clips):
        speaker, utt = str(100 + n // per_chapter), n % per_chapter
        chapter = root / "train-clean-100" / speaker / "1"
        chapter.mkdir(parents=True, exist_ok=True)
        soundfile.write(str(chapter / f"{speaker}-1-{utt:04d}.flac"), _wave(rng, seconds, 16000, 1), 16000)
        with open(chapter / f"{speaker}-1.trans.txt", "a", encoding="utf-8") as handle:
            handle.write(f"{speaker}-1-{utt:04d} THE WORDS OF CLIP {n}\n")
    return root / "train-clean-100"


def timed(function, *args, **kwargs) -> tuple:
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - start, result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clips", type=int, default=200, help="files per layout")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each file")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"{args.clips} clips of {args.seconds} s per layout; {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.1f}; one process")
    print("| layout | files | audio (h) | import (s/h) | build_manifest (s/h) | import / build_manifest | "
          "check headers (s/h) | check decoded (s/h) | decoded / headers |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        layouts = [("commonvoice", write_commonvoice(folder / "cv", args.clips, args.seconds, rng), "mp3"),
                   ("librispeech", write_librispeech(folder / "ls", args.clips, args.seconds, rng), "flac")]
        for layout, source, ext in layouts:
            dest = folder / f"{layout}-manifests"
            import_s, paths = timed(import_corpus, layout, str(source), str(dest), log=lambda _: None)
            walk_s, _ = timed(build_manifest, str(source), ext)
            headers_s, report = timed(check_manifests, paths, decode=False)
            decoded_s, _ = timed(check_manifests, paths, decode=True)
            hours = sum(info["hours"] for info in report.summary.values())
            print(f"| {layout} ({ext}) | {args.clips} | {hours:.3f} | {import_s / hours:.1f} | "
                  f"{walk_s / hours:.1f} | {import_s / walk_s:.2f} | {headers_s / hours:.1f} | "
                  f"{decoded_s / hours:.1f} | {decoded_s / headers_s:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
