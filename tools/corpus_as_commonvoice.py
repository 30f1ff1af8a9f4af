"""Write a copy of a built-in corpus in the layout and formats of a Common Voice release.

The copy is what a user brings from Common Voice: ``clips/*.mp3`` at 48 kHz in stereo, and
``train.tsv``/``dev.tsv``/``test.tsv`` with Common Voice's columns, whose ``sentence`` is written the way
people write (sentence case, commas, a full stop, question or exclamation mark, sometimes typographic
quotes). A text normaliser that upper-cases and removes punctuation gives the corpus's own transcripts back
exactly, so a recipe trained on the copy (through ``speechkit data import commonvoice``) can be compared with
the same recipe trained on the original: audio and text differ only by what real data adds.

Example::

    python tools/corpus_as_commonvoice.py data/SynthSpeech data/SynthSpeech-cv --workers 2
    speechkit data import commonvoice data/SynthSpeech-cv --dest data/SynthSpeech-cv-imported

The two channels differ in level (the right one at 0.95 of the left), so a mix-down is not a copy of one
channel. Everything is seeded: the same corpus gives the same copy.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

#: Common Voice's columns, in its order (train.tsv, dev.tsv, test.tsv of a release).
COLUMNS = ("client_id", "path", "sentence_id", "sentence", "sentence_domain", "up_votes", "down_votes", "age",
           "gender", "accents", "variant", "locale", "segment")
SPLITS = {"train": "train.tsv", "valid": "dev.tsv", "test": "test.tsv"}
RATE, RIGHT_GAIN = 48000, 0.95


def written_sentence(text: str, rng: random.Random) -> str:
    """``"THE OLD MAN IS HOME"`` -> e.g. ``'The old man, is home.'``: sentence case and punctuation.

    Only characters a punctuation-removing, case-folding normaliser takes away are added; words and their
    order are kept (no hyphens, which would join two words once removed).
    """
    words = text.lower().split()
    words = ["I" if w == "i" else "I" + w[1:] if w.startswith("i'") else w for w in words]
    words[0] = words[0][:1].upper() + words[0][1:]
    if len(words) > 4 and rng.random() < 0.4:
        at = rng.randrange(1, len(words) - 2)
        words[at] += rng.choice([",", ",", ";", ":"])
    sentence = " ".join(words) + rng.choice([".", ".", ".", "?", "!"])
    if rng.random() < 0.1:
        sentence = "\u201c" + sentence + "\u201d"  # typographic quotes, as pasted from a text
    return sentence


def _convert(job: tuple) -> None:
    source, dest = job
    import soundfile as sf
    import torch

    from speechkit.data.resample import resample

    if Path(dest).exists():
        return
    wave, rate = sf.read(source, dtype="float32", always_2d=False)
    left = resample(torch.from_numpy(wave), rate, RATE).clamp(-1.0, 1.0)
    stereo = torch.stack([left, RIGHT_GAIN * left], dim=1).numpy()
    partial = Path(dest).with_suffix(".partial.mp3")
    sf.write(partial, stereo, RATE, format="MP3", subtype="MPEG_LAYER_III")
    partial.replace(dest)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("corpus", help="a built-in corpus folder (train.json, valid.json, test.json)")
    parser.add_argument("dest", help="the Common Voice-style folder to write")
    parser.add_argument("--workers", type=int, default=2, help="processes encoding MP3")
    parser.add_argument("--seed", type=int, default=1, help="seed of the written sentences")
    args = parser.parse_args(argv)
    corpus, dest = Path(args.corpus), Path(args.dest)
    (dest / "clips").mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    jobs, number = [], 0
    for split, tsv_name in SPLITS.items():
        manifest = json.loads((corpus / f"{split}.json").read_text(encoding="utf-8"))
        rows = []
        for utt_id, row in sorted(manifest.items()):
            number += 1
            clip = f"common_voice_en_{number:08d}.mp3"
            jobs.append((row["wav"].replace("$data_root", str(corpus)), str(dest / "clips" / clip)))
            speaker = row.get("spk", utt_id)
            rows.append({"client_id": hashlib.sha256(speaker.encode()).hexdigest(), "path": clip,
                         "sentence_id": hashlib.sha256(row["text"].encode()).hexdigest()[:32],
                         "sentence": written_sentence(row["text"], rng), "sentence_domain": "",
                         "up_votes": 2, "down_votes": 0, "age": "", "gender": "", "accents": "",
                         "variant": "", "locale": "en", "segment": ""})
        with open(dest / tsv_name, "w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, COLUMNS, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
            writer.writeheader()
            writer.writerows(rows)
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        list(pool.map(_convert, jobs, chunksize=16))
    print(f"wrote {len(jobs)} clips ({RATE} Hz stereo MP3) and {', '.join(SPLITS.values())} to {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
