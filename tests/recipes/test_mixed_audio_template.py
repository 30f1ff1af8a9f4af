"""The speech recognition template on a manifest mixing every rate, channel count and format a user brings
(8, 16, 22.05, 44.1 and 48 kHz; mono and stereo; WAV, FLAC, MP3, OGG): it trains, decodes its test set, and
each item it reads equals what the exported model's interface reads from the same file (one audio policy)."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch
import yaml

import speechkit
from speechkit.cli import main as speechkit_main
from speechkit.pretrained import EncoderASR
from speechkit.templating import copy_template
from speechkit.tokenizers import SentencePieceTokenizer
from tests.helpers.scripts import load_script
from tests.recipes.recipe_helpers import TINY_MODEL, WORDS, run_script

pytestmark = pytest.mark.slow  # recipe processes and an export (about half a minute on 2 cores)

RATES = (8000, 16000, 22050, 44100, 48000)
#: every (format, rate, channels) once: 4 x 5 x 2 = 40 recordings, as many as the splits below hold
KINDS = list(itertools.product(("wav", "flac", "mp3", "ogg"), RATES, (1, 2)))
SPLITS = {"train": 24, "valid": 4, "test": 12}


def write_mixed_corpus(folder: Path, seed: int = 0) -> Path:
    """train/valid/test.json over recordings of every kind in :data:`KINDS` (tones and noise for speech)."""
    rng = np.random.default_rng(seed)
    kinds = [KINDS[i] for i in rng.permutation(len(KINDS))]
    for split, count in SPLITS.items():
        rows = {}
        for index in range(count):
            ext, rate, channels = kinds.pop()
            samples = int(rate * rng.uniform(0.5, 1.4))
            time = np.arange(samples) / rate
            tone = np.sin(2 * np.pi * rng.uniform(100, 400) * time) * rng.uniform(0.05, 0.3)
            wave = tone + 0.01 * rng.standard_normal(samples)
            if channels == 2:  # the second channel quieter and noisier: mixing it down matters
                wave = np.stack([wave, 0.5 * wave + 0.02 * rng.standard_normal(samples)], axis=1)
            relative = f"{split}/utt-{split}-{index:03d}-{rate}-{channels}ch.{ext}"
            (folder / split).mkdir(parents=True, exist_ok=True)
            soundfile.write(folder / relative, wave.astype(np.float32), rate)
            text = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 4))))
            rows[f"utt-{split}-{index:03d}"] = {"wav": f"$data_root/{relative}", "duration": samples / rate,
                                                "spk": "tone", "text": text}
        (folder / f"{split}.json").write_text(json.dumps(rows, indent=1))
    return folder


@pytest.fixture(scope="module")
def mixed_corpus(tmp_path_factory) -> Path:
    return write_mixed_corpus(tmp_path_factory.mktemp("mixed"))


def test_mixed_rates_channels_and_formats_train_decode_and_match_the_interface(mixed_corpus, tmp_path):
    kinds = {path.suffix for path in mixed_corpus.rglob("utt-*")}
    assert kinds == {".wav", ".flac", ".mp3", ".ogg"}
    assert {soundfile.info(p).samplerate for p in mixed_corpus.rglob("utt-*")} == set(RATES)
    dest = copy_template("speech_recognition", tmp_path / "my_asr")
    run_script(dest / "Tokenizer" / "train.py", ["hparams/tokenizer.yaml", "--data_folder", str(mixed_corpus),
                                                 "--token_type", "char", "--vocab_size", "40"])
    asr = dest / "ASR"
    output = asr / "results" / "mixed"
    run_script(asr / "train.py", ["hparams/train.yaml", "--data_folder", str(mixed_corpus), *TINY_MODEL,
                                  "--debug", "--noprogressbar", "--lm_weight", "0", "--lm_checkpoint", "none",
                                  # a few random sentences: test words may hold letters training lacks
                                  "--model.unknown_characters", "unknown", "--output_folder", str(output)])
    report = (output / "wer_test.txt").read_text()
    assert all(f"utt-test-{i:03d}" in report for i in range(SPLITS["test"]))  # every test item decoded

    tokenizer = dest / "Tokenizer" / "results" / "tokenizer" / "tokenizer.model"
    sizes = dict(zip(TINY_MODEL[::2], TINY_MODEL[1::2]))
    lines = (asr / "hparams" / "inference_no_lm.yaml").read_text().splitlines()
    tiny = asr / "hparams" / "tiny_inference_no_lm.yaml"
    resized = {flag[8:]: value for flag, value in sizes.items()}  # --model.d_model -> d_model
    tiny.write_text("\n".join(f"{line.split(':')[0]}: {resized[line.split(':')[0]]}"
                              if line.split(":")[0] in resized else line for line in lines) + "\n")
    assert speechkit_main(["export", "--checkpoints", str(output / "save"), "--hparams", str(tiny),
                           "--min-key", "WER", "--output", str(output / "model"),
                           "--file", f"tokenizer={tokenizer}"]) == 0
    recognizer = EncoderASR.from_hparams(str(output / "model"), savedir=output / "fetched")

    # The training datasets as the script builds them (untrimmed, so whole files), item by item against the
    # interface reading the same file.
    recipe = load_script(asr / "train.py", f"mixed_train_{abs(hash(asr))}", search_path=asr)
    overrides = {"data_folder": str(mixed_corpus), "output_folder": str(output), "trim_margin": None,
                 "model.tokenizer_file": str(tokenizer), "lm_weight": 0,
                 "model.unknown_characters": "unknown"}
    overrides.update({flag[2:]: yaml.safe_load(value) for flag, value in sizes.items()})
    hparams = speechkit.load_hparams(asr / "hparams" / "train.yaml", overrides)
    manifests = {split: str(mixed_corpus / f"{split}.json") for split in SPLITS}
    datasets = recipe.dataio_prepare(hparams, manifests, SentencePieceTokenizer(tokenizer))
    compared = 0
    for split, dataset in datasets.items():
        rows = json.loads((mixed_corpus / f"{split}.json").read_text())
        for index in range(len(dataset)):
            item = dataset[index]
            path = rows[item["id"]]["wav"].replace("$data_root", str(mixed_corpus))
            info = soundfile.info(path)
            assert torch.equal(item["sig"], recognizer.load_audio(path)), path
            # mono at the model's rate: the length the file's duration gives at 16 kHz
            assert abs(item["sig"].shape[0] - info.frames * 16000 / info.samplerate) <= 1
            compared += 1
    assert compared == len(KINDS)
    stereo_mp3 = next(p for p in mixed_corpus.rglob("*-48000-2ch.mp3"))
    assert isinstance(recognizer.transcribe_file(str(stereo_mp3)), str)
