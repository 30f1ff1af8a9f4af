"""Helpers of the recipe smoke tests: a small corpus in the built-in corpus' layout, made without a
synthesizer (tones and noise stand for speech: the tests check that recipes run and are consistent, not
that they learn)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

WORDS = ("THE OLD FARMER CARRIED TWO BASKETS TO MARKET A RED BOX WAS NEAR RIVER WE WALKED HOME "
         "YESTERDAY SHE FOUND SMALL KEY").split()

#: A model small enough for a test: one layer, a few dozen units.
_TINY_SHARED = ["--model.d_model", "32", "--model.num_heads", "2", "--model.num_layers", "1",
                "--model.ffn_dim", "64", "--model.decoder_layers", "1", "--model.lm_embedding_dim", "16",
                "--model.lm_hidden_size", "32", "--model.lm_layers", "1", "--model.vocab_size", "40",
                "--model.token_type", "char"]
#: The speech recognition template's model (recurrent encoder).
TINY_MODEL = _TINY_SHARED + ["--model.rnn_hidden_size", "16"]
#: A Conformer recipe's model (recipes/LibriSpeech).
TINY_CONFORMER = _TINY_SHARED + ["--model.subsampling_channels", "8", "--model.kernel_size", "3"]


def write_corpus(folder: Path, counts=(24, 4, 12), seed: int = 0) -> Path:
    """FLAC files and train/valid/test.json (``$data_root`` paths, durations 0.4-1.6 s) under ``folder``."""
    rng = np.random.default_rng(seed)
    rate = 16000
    for split, count in zip(("train", "valid", "test"), counts):
        manifest = {}
        for index in range(count):
            samples = int(rate * rng.uniform(0.4, 1.6))
            time = np.arange(samples) / rate
            tone = np.sin(2 * np.pi * rng.uniform(100, 400) * time) * rng.uniform(0.05, 0.3)
            wave = (tone + 0.01 * rng.standard_normal(samples)).astype(np.float32)
            relative = f"{split}/utt-{split}-{index:03d}.flac"
            (folder / split).mkdir(parents=True, exist_ok=True)
            soundfile.write(folder / relative, wave, rate, subtype="PCM_16")
            text = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 4))))
            manifest[f"utt-{split}-{index:03d}"] = {"wav": f"$data_root/{relative}",
                                                    "duration": samples / rate, "spk": "tone", "text": text}
        (folder / f"{split}.json").write_text(json.dumps(manifest, indent=1))
    return folder


def run_script(script: Path, args: list, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run a recipe script from its own folder (as users do); fail the test with its output on error."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    done = subprocess.run([sys.executable, script.name, *args], cwd=script.parent, env=env, timeout=timeout,
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"{script} {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
                    f"{done.stderr[-6000:]}")
    return done


def write_speaker_corpus(folder: Path, seed: int = 0, engine_speakers: tuple = ()) -> Path:
    """train/valid/test.json of tone 'speakers' (one pitch each, disjoint across splits) for separation;
    with ``engine_speakers``, a test_engine.json of theirs too (as a corpus built with a held-out engine)."""
    rng = np.random.default_rng(seed)
    speakers = {"train": ("a", "b", "c", "d"), "valid": ("e", "f"), "test": ("g", "h", "i")}
    if engine_speakers:
        speakers["test_engine"] = tuple(engine_speakers)
    for split, names in speakers.items():
        rows = {}
        for s, spk in enumerate(names):
            for u in range(3):
                n = int(16000 * rng.uniform(0.3, 0.7))
                t = np.arange(n) / 16000
                wave = 0.2 * np.sin(2 * np.pi * (120 + 90 * s) * t) + 0.01 * rng.standard_normal(n)
                (folder / split).mkdir(parents=True, exist_ok=True)
                soundfile.write(folder / split / f"{spk}{u}.flac", wave.astype(np.float32), 16000)
                rows[f"{spk}-{split}-{u}"] = {"wav": f"$data_root/{split}/{spk}{u}.flac", "spk": spk,
                                              "duration": n / 16000}
        (folder / f"{split}.json").write_text(json.dumps(rows))
    return folder


def separation_args(corpus: Path, output: Path, *extra) -> list:
    """The separation recipe's command line with the tiny model and a few short mixtures."""
    return ["hparams/train.yaml", "--data_folder", str(corpus), "--output_folder", str(output),
            "--preset", "tiny", "--num_valid_mixtures", "4", "--num_test_mixtures", "7",
            "--train_mixtures_per_epoch", "8", "--segment_seconds", "0.3", "--number_of_epochs", "1",
            "--noprogressbar", *extra]
