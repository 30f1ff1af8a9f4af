"""Tiny model folders (ASR, separation, wav2vec 2.0 features) and a manifest of audio, for the batch-job tests
and benchmark.

The model is the exact tone "recognizer" of tests/integration/pretrained/tiny_asr.py. ``seconds_per_batch``
makes each forward pass take at least that long; ``hold_file`` makes the ``hold_at_batch``-th and later
passes wait while that file exists (saying so with a file ``<hold_file>.<pid>``), so that a test can stop a
job at a known point, however loaded the machine.
"""
from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Optional

import soundfile
import torch

from tests.integration.pretrained import tiny_asr

HYPERPARAMS = """\
sample_rate: 16000
encoder: !new:tests.helpers.job_models.SlowToneEncoder
  seconds_per_batch: {seconds_per_batch}
  hold_file: "{hold_file}"
  hold_at_batch: {hold_at_batch}
tokenizer: !new:tests.integration.pretrained.tiny_asr.CharTokenizer
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
    encoder: encoder.safetensors
    tokenizer: tokenizer.json
"""
WORDS = ["a", "bad", "cab", "dead", "beef", "face", "egg", "fade", "bead", "cafe", "add", "gag"]


class SlowToneEncoder(tiny_asr.FrameToneEncoder):
    """The tone encoder, taking at least ``seconds_per_batch`` per forward pass, and waiting from its
    ``hold_at_batch``-th pass on while ``hold_file`` exists."""

    def __init__(self, seconds_per_batch: float = 0.0, hold_file: str = "", hold_at_batch: int = 0):
        super().__init__()
        self.seconds_per_batch = float(seconds_per_batch)
        self.hold_file, self.hold_at_batch, self.batches = hold_file, hold_at_batch, 0

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor):
        self.batches += 1
        if self.hold_file and self.batches >= self.hold_at_batch and Path(self.hold_file).exists():
            Path(f"{self.hold_file}.{os.getpid()}").touch()
            while Path(self.hold_file).exists():
                time.sleep(0.02)
        if self.seconds_per_batch:
            time.sleep(self.seconds_per_batch)
        return super().forward(wavs, lengths)


def write_model(folder, seconds_per_batch: float = 0.0, hold_file: str = "", hold_at_batch: int = 0,
                signal_at_batch: Optional[tuple] = None) -> Path:
    """A model folder (hyperparams.yaml, weights, tokenizer) of :class:`SlowToneEncoder`, or, with
    ``signal_at_batch=(signal name, batch)``, of :class:`SignalingToneEncoder`."""
    from speechkit.pretrained.loading import save_weights

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = HYPERPARAMS.format(seconds_per_batch=seconds_per_batch, hold_file=hold_file,
                              hold_at_batch=hold_at_batch)
    if signal_at_batch is not None:
        name, batch = signal_at_batch
        lines = text.splitlines(keepends=True)
        lines[1:5] = ["encoder: !new:tests.helpers.job_models.SignalingToneEncoder\n",
                      f"  signal_name: {name}\n", f"  at_batch: {batch}\n"]
        text = "".join(lines)
    (folder / "hyperparams.yaml").write_text(text)
    save_weights(tiny_asr.true_weights(), folder / "encoder.safetensors")
    tiny_asr.CharTokenizer(tiny_asr.SYMBOLS).save_checkpoint(folder / "tokenizer.json")
    return folder


def write_manifest(folder, count: int, seed: int = 0, wrong_every: int = 4, max_words: int = 4) -> Path:
    """``count`` utterances of 1 to ``max_words`` words (FLAC) and a JSON manifest (wav, duration, words);
    every ``wrong_every``-th reference differs from what is spoken, so the WER is not zero."""
    rng = random.Random(seed)
    folder = Path(folder)
    (folder / "audio").mkdir(parents=True, exist_ok=True)
    manifest = {}
    for index in range(count):
        spoken = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, max_words)))
        reference = spoken if index % wrong_every else spoken + " " + rng.choice(WORDS)
        wav = tiny_asr.synthesize(spoken)
        path = folder / "audio" / f"utt{index:04d}.flac"
        soundfile.write(path, wav.numpy(), tiny_asr.SAMPLE_RATE)
        manifest[f"utt{index:04d}"] = {"wav": str(path), "duration": len(wav) / tiny_asr.SAMPLE_RATE,
                                       "words": reference}
    path = folder / "manifest.json"
    path.write_text(json.dumps(manifest, indent=1))
    return path


class SignalingToneEncoder(tiny_asr.FrameToneEncoder):
    """The tone encoder, sending ``signal_name`` to its own process during its ``at_batch``-th forward pass
    (as a cluster would, at any moment of a batch)."""

    def __init__(self, signal_name: str = "SIGTERM", at_batch: int = 3):
        super().__init__()
        self.signal_name, self.at_batch, self.batches = signal_name, at_batch, 0

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor):
        import os
        import signal

        self.batches += 1
        if self.batches == self.at_batch:
            os.kill(os.getpid(), getattr(signal, self.signal_name))
        return super().forward(wavs, lengths)


SEPARATION_SIZES = dict(enc_dim=16, kernel_size=16, bottleneck_dim=8, hidden_dim=16, conv_kernel=3,
                        blocks_per_repeat=2, repeats=1)
SEPARATION_HYPERPARAMS = """\
interface: SeparationModel
sample_rate: 8000
num_speakers: 2
separator: !new:speechkit.models.ConvTasNet
  num_speakers: 2
""" + "".join(f"  {k}: {v}\n" for k, v in SEPARATION_SIZES.items()) + """\
modules:
  separator: !ref <separator>
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
    separator: !ref <separator>
  paths:
    separator: separator.safetensors
"""
FEATURES_HYPERPARAMS = """\
interface: Wav2Vec2Features
sample_rate: 16000
config: !new:speechkit.models.wav2vec2.Wav2Vec2Config
  conv_channels: [32, 32, 32, 32, 32, 32, 32]
  d_model: 32
  num_layers: 2
  num_heads: 2
  ffn_dim: 64
  pos_conv_kernel: 8
  pos_conv_groups: 4
normalize: !new:speechkit.models.wav2vec2.WaveformNormalization
wav2vec2: !new:speechkit.models.wav2vec2.Wav2Vec2Model [!ref <config>]
modules:
  normalize: !ref <normalize>
  wav2vec2: !ref <wav2vec2>
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
    wav2vec2: !ref <wav2vec2>
  paths:
    wav2vec2: encoder.safetensors
"""


def write_separation_model(folder, seed: int = 0) -> Path:
    """A 2-speaker ConvTasNet separation model folder at 8 kHz (random weights: the jobs only need a
    deterministic separator; the 16 kHz audio of :func:`write_manifest` is resampled on load)."""
    from speechkit.models import ConvTasNet
    from speechkit.pretrained.loading import save_weights

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    (folder / "hyperparams.yaml").write_text(SEPARATION_HYPERPARAMS)
    separator = ConvTasNet(num_speakers=2, **SEPARATION_SIZES)
    save_weights(separator.state_dict(), folder / "separator.safetensors")
    return folder


def write_features_model(folder, seed: int = 0) -> Path:
    """A wav2vec 2.0 feature model folder with 2 Transformer blocks of width 32 (random weights)."""
    from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model
    from speechkit.pretrained.loading import save_weights

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    config = Wav2Vec2Config(conv_channels=(32,) * 7, d_model=32, num_layers=2, num_heads=2, ffn_dim=64,
                            pos_conv_kernel=8, pos_conv_groups=4)
    (folder / "hyperparams.yaml").write_text(FEATURES_HYPERPARAMS)
    save_weights(Wav2Vec2Model(config).state_dict(), folder / "encoder.safetensors")
    return folder


VOCODER_MEL = dict(sample_rate=16000, n_fft=256, win_length=256, hop_length=64, n_mels=16)
VOCODER_SIZES = dict(n_mels=16, channels=8, upsample_rates=[8, 8], resblock_kernels=[3],
                     resblock_dilations=[1])
VOCODER_HYPERPARAMS = """\
interface: Vocoder
sample_rate: 16000
mel: !new:speechkit.models.MelSpectrogram
""" + "".join(f"  {k}: {v}\n" for k, v in VOCODER_MEL.items()) + """\
generator: !new:speechkit.models.MelGenerator
""" + "".join(f"  {k}: {v}\n" for k, v in VOCODER_SIZES.items()) + """\
modules:
  mel: !ref <mel>
  generator: !ref <generator>
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
    generator: !ref <generator>
  paths:
    generator: generator.safetensors
"""


def write_vocoder_model(folder, seed: int = 0) -> Path:
    """A vocoder model folder at 16 kHz: 16 mel bins, hop 64, a two-stage generator of width 8 (random
    weights: the jobs only need a deterministic generator)."""
    from speechkit.models import MelGenerator
    from speechkit.pretrained.loading import save_weights

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    (folder / "hyperparams.yaml").write_text(VOCODER_HYPERPARAMS)
    save_weights(MelGenerator(**VOCODER_SIZES).state_dict(), folder / "generator.safetensors")
    return folder


SPEAKER_HYPERPARAMS = """\
interface: SpeakerRecognition
sample_rate: 16000
threshold: 0.4
compute_features: !new:speechkit.features.Fbank
  n_mels: 24
mean_var_norm: !new:speechkit.features.UtteranceNormalization
  norm_vars: False
embedding_model: !new:speechkit.models.speaker.ECAPATDNN
  input_size: 24
  channels: [16, 16, 16, 16, 48]
  attention_channels: 8
  res2net_scale: 4
  se_channels: 8
  lin_neurons: 12
modules:
  compute_features: !ref <compute_features>
  mean_var_norm: !ref <mean_var_norm>
  embedding_model: !ref <embedding_model>
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
    embedding_model: !ref <embedding_model>
  paths:
    embedding_model: embedding_model.safetensors
"""


def write_speaker_model(folder, seed: int = 0) -> Path:
    """A tiny ECAPA-TDNN speaker model folder (random weights and batch-norm statistics)."""
    from speechkit.models.speaker import ECAPATDNN
    from speechkit.pretrained.loading import save_weights

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    (folder / "hyperparams.yaml").write_text(SPEAKER_HYPERPARAMS)
    model = ECAPATDNN(input_size=24, channels=(16, 16, 16, 16, 48), attention_channels=8, res2net_scale=4,
                      se_channels=8, lin_neurons=12)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm1d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
    save_weights(model.state_dict(), folder / "embedding_model.safetensors")
    return folder
