"""What waveform augmentation costs, against the training step it feeds.

For each augmentation of ``speechkit.augment`` (its default settings, 16 kHz), for the speech recognition
template's default set (``waveform_augmentation`` of its ``train.yaml``: speed, equaliser and noise) and for
that set with simulated reverberation added, the CPU time per second of audio on one
thread, over utterances of 2-6 s. Against it, in the same run: one training step of the speech recognition
template's acoustic model per second of audio (Fbank, 3-layer bidirectional LSTM encoder of 192 units, CTC
head; forward, backward and an AdamW update on a batch of about ``--batch-seconds``), so the table says
which share of a step each augmentation would add if it ran in the step (on the GPU, or on the CPU in the
data loader's workers, where it overlaps with the step instead).

Usage:
    python benchmarks/augment.py                  # about a minute
    python benchmarks/augment.py --utterances 40 --batch-seconds 40
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # speechkit of this checkout

from speechkit import augment  # noqa: E402
from speechkit.features import Fbank  # noqa: E402
from speechkit.hparams import load_hparams  # noqa: E402
from speechkit.models import CTCHead, RecurrentEncoder  # noqa: E402
from speechkit.nn import ctc_loss  # noqa: E402

RATE = 16000
TEMPLATE_YAML = Path(__file__).resolve().parents[1] / "templates/speech_recognition/ASR/hparams/train.yaml"


def utterances(count: int, seed: int) -> list:
    """Noise-excited 'speech': random lengths of 2-6 s, an amplitude envelope of syllables."""
    generator = torch.Generator().manual_seed(seed)
    items = []
    for _ in range(count):
        length = int(RATE * (2 + 4 * float(torch.rand((), generator=generator))))
        envelope = torch.sin(torch.arange(length) / RATE * 2 * torch.pi * 4).abs()
        items.append(0.1 * envelope * torch.randn(length, generator=generator))
    return items


def augmentations(rooms: int) -> dict:
    reverb = augment.Reverb(rooms=rooms, rt60=(0.2, 0.6), bank_seed=0)
    single = {
        "SpeedPerturb": augment.SpeedPerturb(), "PitchShift": augment.PitchShift(),
        "FormantWarp": augment.FormantWarp(), "Equalizer": augment.Equalizer(),
        "BandLimit": augment.BandLimit(), "MuLaw": augment.MuLaw(), "FrequencyDrop": augment.FrequencyDrop(),
        "ChunkDrop": augment.ChunkDrop(), "AddNoise": augment.AddNoise(), "RandomGain": augment.RandomGain(),
        "Reverb": reverb, "TimeStretch": augment.TimeStretch(), "Resample": augment.Resample(),
        "TimeShift": augment.TimeShift(), "Quantize": augment.Quantize(),
        "LoudnessNormalize": augment.LoudnessNormalize(),
        **{f"Codec ({codec})": augment.Codec(codecs=[codec]) for codec in ("mp3", "opus", "vorbis")},
    }
    template = load_hparams(TEMPLATE_YAML)["waveform_augmentation"]
    with_reverb = augment.Augmenter([*template.augmentations, reverb],
                                    probabilities=[*template.probabilities, 0.3])
    return {**single, f"the template's set ({describe(template)})": template,
            f"the template's set and reverb ({describe(with_reverb)})": with_reverb}


def describe(augmenter) -> str:
    """'SpeedPerturb 1.0, Equalizer 0.5, ...': each augmentation of an Augmenter with its probability."""
    return ", ".join(f"{type(a).__name__} {p:g}" for a, p in zip(augmenter.augmentations,
                                                                   augmenter.probabilities))


def augmentation_cost(augmentation, items: list) -> float:
    """CPU seconds per second of audio, each item alone through ``augment`` (as a loader worker would)."""
    started = time.process_time()
    for seed, wave in enumerate(items):
        augmentation.augment(wave, augment.generator_for(seed))
    return (time.process_time() - started) / (sum(w.shape[0] for w in items) / RATE)


def step_cost(items: list, batch_seconds: float, steps: int) -> float:
    """CPU seconds per second of audio of the template's acoustic training step."""
    torch.manual_seed(0)
    features = Fbank(sample_rate=RATE, n_mels=80)
    encoder = RecurrentEncoder(80, d_model=256, hidden_size=192, num_layers=3, stride=4, upsample=2)
    head = CTCHead(256, 32)
    optimizer = torch.optim.AdamW(list(encoder.parameters()) + list(head.parameters()), lr=1e-3)
    batches, batch, seconds = [], [], 0.0
    for wave in items:
        batch.append(wave)
        seconds += wave.shape[0] / RATE
        if seconds >= batch_seconds:
            batches.append(batch)
            batch, seconds = [], 0.0
    batches = (batches or [batch])[:steps]
    spent, audio = 0.0, 0.0
    for number, batch in enumerate(batches):
        wavs = torch.nn.utils.rnn.pad_sequence(batch, batch_first=True)
        lengths = torch.tensor([w.shape[0] for w in batch])
        targets = torch.randint(1, 32, (len(batch), 20))
        started = time.process_time()
        feats, feat_lengths = features(wavs, lengths)
        encoded, encoded_lengths = encoder(feats, feat_lengths)
        loss = ctc_loss(head(encoded), targets, encoded_lengths, torch.full((len(batch),), 20))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if number:  # the first step warms up the allocator
            spent += time.process_time() - started
            audio += float(lengths.sum()) / RATE
    return spent / max(audio, 1e-9)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--utterances", type=int, default=24)
    parser.add_argument("--batch-seconds", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=4, help="timed training steps (one more warms up)")
    parser.add_argument("--rooms", type=int, default=16, help="simulated rooms of the reverberation bank")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    items = utterances(args.utterances, seed=0)
    step = step_cost(items * 2, args.batch_seconds, args.steps + 1)
    print(f"command: python {' '.join(sys.argv)}")
    print(f"machine: {platform.processor() or platform.machine()}, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}, 1 thread, torch {torch.__version__}; "
          f"{sum(w.shape[0] for w in items) / RATE:.0f} s of audio")
    print(f"training step of the template's acoustic model: {1000 * step:.1f} ms of CPU per second of "
          "audio\n")
    print("| augmentation | CPU ms per s of audio | share of a training step |")
    print("| --- | --- | --- |")
    for name, augmentation in augmentations(args.rooms).items():
        cost = augmentation_cost(augmentation, items)
        print(f"| {name} | {1000 * cost:.2f} | {cost / step:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
