"""A tiny LibriSpeech-layout folder (silent FLACs, transcripts), for the preparation tests."""
from __future__ import annotations

import torch

from speechkit.data import audio

UTTERANCES = {  # split -> speaker -> chapter -> [(utterance number, words, samples)]
    "dev-clean": {"84": {"121123": [(0, "GO DO YOU HEAR", 1600), (1, "BUT IN LESS THAN FIVE MINUTES", 3200)]},
                  "174": {"50561": [(5, "FORGOTTEN TOO", 800)]}},
    "test-clean": {"61": {"70968": [(0, "HE BEGAN A CONFUSED COMPLAINT", 2400)]}},
}


def make_librispeech(root):
    for split, speakers in UTTERANCES.items():
        for speaker, chapters in speakers.items():
            for chapter, utterances in chapters.items():
                folder = root / split / speaker / chapter
                lines = []
                for number, words, samples in utterances:
                    data_id = f"{speaker}-{chapter}-{number:04d}"
                    audio.write(folder / f"{data_id}.flac", torch.zeros(samples), 16000)
                    lines.append(f"{data_id} {words}")
                (folder / f"{speaker}-{chapter}.trans.txt").write_text("\n".join(lines) + "\n")
    (root / "README.TXT").write_text("not a split")
    return root
