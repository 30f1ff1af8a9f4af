"""A tiny CTC "recognizer" whose transcripts are exact, for testing the pretrained-model machinery.

Each character is one 10 ms frame of a pure tone (its own frequency) followed by one silent frame; the encoder
measures each frame's power at every character's frequency (a fixed Fourier basis loaded from the weights
file), so a correctly loaded model reads the text back exactly and a model with wrong weights reads garbage.
"""
from __future__ import annotations

import json
import math
import pathlib

import torch

SAMPLE_RATE = 16000
FRAME = 160  # 10 ms; every tone is a whole number of periods per frame
SYMBOLS = ["<blank>", " ", "a", "b", "c", "d", "e", "f", "g"]


def tone_bin(index: int) -> int:
    return 3 + 2 * index  # 100 Hz per bin: 500 Hz, 700 Hz, ...


class FrameToneEncoder(torch.nn.Module):
    """(batch, time) waveform -> (batch, time // FRAME, len(SYMBOLS)) scores; per frame: batch-invariant."""

    def __init__(self, n_symbols: int = len(SYMBOLS), frame: int = FRAME, blank_level: float = 0.01):
        super().__init__()
        self.frame = frame
        self.basis = torch.nn.Parameter(torch.randn(frame, 2 * (n_symbols - 1)))  # set by the weights file
        self.blank_level = torch.nn.Parameter(torch.tensor(float(blank_level)))

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor):
        frames = wavs.shape[1] // self.frame
        x = wavs[:, : frames * self.frame].reshape(wavs.shape[0], frames, self.frame)
        proj = x @ self.basis
        power = proj[..., 0::2] ** 2 + proj[..., 1::2] ** 2
        blank = self.blank_level.expand(power.shape[:-1]).unsqueeze(-1)
        return torch.cat([blank, power], dim=-1), lengths // self.frame


def true_weights(frame: int = FRAME) -> dict:
    t = torch.arange(frame, dtype=torch.float32)
    columns = []
    for index in range(1, len(SYMBOLS)):
        omega = 2 * math.pi * tone_bin(index) * t / frame
        columns += [torch.cos(omega) * 2 / frame, torch.sin(omega) * 2 / frame]
    return {"basis": torch.stack(columns, dim=1), "blank_level": torch.tensor(0.01)}


class GreedySearcher:
    """A stand-in for a sequence search: ``(encoded, lengths) -> (hypotheses, scores)``."""

    def __init__(self, blank_index: int = 0):
        self.blank_index = blank_index

    def __call__(self, encoded: torch.Tensor, lengths: torch.Tensor):
        best = encoded.argmax(dim=-1)
        hyps = [[t for t in torch.unique_consecutive(row[:n]).tolist() if t != self.blank_index]
                for row, n in zip(best, lengths.tolist())]
        return hyps, [0.0] * len(hyps)


class CharTokenizer:
    """Characters <-> ids; saved as a JSON list of symbols."""

    def __init__(self, symbols=None):
        self.symbols = list(symbols or [])

    def decode_ids(self, ids) -> str:
        return "".join(self.symbols[i] for i in ids)

    def encode(self, text: str) -> list:
        return [self.symbols.index(c) for c in text]

    def save_checkpoint(self, path) -> None:
        pathlib.Path(path).write_text(json.dumps(self.symbols))

    def load_checkpoint(self, path) -> None:
        self.symbols = json.loads(pathlib.Path(path).read_text())


def synthesize(text: str, amplitude: float = 0.5) -> torch.Tensor:
    """The waveform the tiny model reads as ``text``: (time,) float32 at SAMPLE_RATE."""
    t = torch.arange(FRAME, dtype=torch.float32)
    pieces = [torch.zeros(FRAME)]
    for char in text:
        index = SYMBOLS.index(char)
        pieces += [amplitude * torch.sin(2 * math.pi * tone_bin(index) * t / FRAME), torch.zeros(FRAME)]
    return torch.cat(pieces)


HYPERPARAMS = """\
sample_rate: 16000
encoder: !new:tiny_asr.FrameToneEncoder
tokenizer: !new:tiny_asr.CharTokenizer
modules:
  encoder: !ref <encoder>
encoder_pipeline: [encoder]
decoding:
  blank_index: 0
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
    encoder: !ref <encoder>
    tokenizer: !ref <tokenizer>
  paths:
    encoder: {encoder_path}
    tokenizer: {tokenizer_path}
"""


def write_model_folder(folder, encoder_path="encoder.safetensors", tokenizer_path="tokenizer.json",
                       weights_name="encoder.safetensors") -> pathlib.Path:
    """A complete model folder: hyperparams.yaml, weights and tokenizer."""
    from speechkit.pretrained.loading import save_weights

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hyperparams.yaml").write_text(HYPERPARAMS.format(encoder_path=encoder_path,
                                                                tokenizer_path=tokenizer_path))
    save_weights(true_weights(), folder / weights_name)
    CharTokenizer(SYMBOLS).save_checkpoint(folder / "tokenizer.json")
    return folder
