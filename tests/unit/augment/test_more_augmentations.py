"""The augmentations added to complete the set (codec, time shift, bit depth, loudness, resampling, time
stretch) keep the library's contracts: padding never enters and an item's result is batch invariant, the
same seed gives the same audio (so a resumed run draws as an uninterrupted one), and each does what it says;
relative lengths are accepted as well as absolute ones."""
from __future__ import annotations

import math
import os
import signal
import zlib

import pytest
import torch

from speechkit import augment
from speechkit.augment import (
    Augmenter,
    Codec,
    LoudnessNormalize,
    Quantize,
    Resample,
    TimeShift,
    TimeStretch,
    generator_for,
    time_stretch,
)
from speechkit.augment.codec import codec_available
from speechkit.brain import Brain
from speechkit.checkpoints import Checkpointer, EpochCounter
from speechkit.errors import EXIT_PREEMPTED, DataError, HparamsError
from speechkit.stage import Stage
from tests.helpers.batch_invariance import assert_batch_invariant

RATE = 8000


def new_augmentations():
    return [Codec(codecs=["mp3", "vorbis", "opus"], sample_rate=RATE), TimeShift(sample_rate=RATE),
            Quantize(bits=(3, 6), sample_rate=RATE), LoudnessNormalize(sample_rate=RATE),
            Resample(rates=[4000, 6000], sample_rate=RATE),
            TimeStretch(rate_range=(0.8, 1.25), sample_rate=RATE)]


def content_seeds(x, lengths):
    return torch.tensor([zlib.crc32(x[i, : int(n)].numpy().tobytes()) for i, n in enumerate(lengths)])


@pytest.mark.parametrize("index", range(6))
def test_padding_never_enters_and_items_are_batch_invariant(index):
    augmentation = new_augmentations()[index]
    items = [torch.randn(n) * 0.1 for n in (1200, 700, 950)]

    def run(x, lengths):
        augmentation.train()
        return augmentation(x, lengths, content_seeds(x, lengths))

    outputs = assert_batch_invariant(run, items)
    for item, output in zip(items, outputs):
        if isinstance(augmentation, TimeStretch):
            assert output.shape[0] in range(round(item.shape[0] / 1.25), round(item.shape[0] / 0.8) + 1)
        else:
            assert output.shape == item.shape
        assert torch.isfinite(output).all() and not torch.equal(output, item)


def test_same_seed_same_audio_and_other_seeds_other_audio():
    wave = torch.randn(1600) * 0.1
    for augmentation in new_augmentations():
        first = augmentation.augment(wave, generator_for(5))
        assert torch.equal(first, augmentation.augment(wave, generator_for(5))), type(augmentation).__name__
        others = [augmentation.augment(wave, generator_for(seed)) for seed in (6, 7, 8)]
        assert any(o.shape != first.shape or not torch.equal(o, first) for o in others), type(augmentation)


def test_each_does_what_it_says():
    generator = torch.Generator().manual_seed(0)
    wave = torch.sin(2 * math.pi * 440 * torch.arange(RATE) / RATE) * 0.3 + 0.01 * torch.randn(RATE,
                                                                                              generator=generator)
    shifted = TimeShift(shift_ms=(10.0, 10.0), sample_rate=RATE).augment(wave, generator_for(0))
    assert torch.equal(shifted[80:], wave[:-80]) and not shifted[:80].any()
    levels = Quantize(bits=(3, 3), sample_rate=RATE).augment(wave, generator_for(0))
    assert len(torch.unique(levels)) <= 7  # 3 bits, signed: -3..3 steps
    loud = LoudnessNormalize(target_dbfs=(-30.0, -30.0), sample_rate=RATE).augment(wave, generator_for(0))
    assert abs(20 * math.log10(float(loud.pow(2).mean().sqrt())) + 30.0) < 0.01
    high = torch.sin(2 * math.pi * 3500 * torch.arange(RATE) / RATE)  # above 2 kHz, the Nyquist of 4 kHz
    low_passed = Resample(rates=[4000], sample_rate=RATE).augment(high, generator_for(0))
    assert float(low_passed[400:-400].pow(2).mean()) < 0.01 * float(high.pow(2).mean())
    stretched = TimeStretch(rate_range=(0.5, 0.5), sample_rate=RATE).augment(wave, generator_for(0))
    assert stretched.shape[0] == 2 * RATE
    spectrum = torch.fft.rfft(stretched[RATE // 2: RATE // 2 + RATE]).abs()
    assert abs(int(spectrum.argmax()) - 440) <= 2  # the pitch stays while the tempo halves


@pytest.mark.parametrize("samples, rate", [(41292, 1.4), (16000, 1.1), (20000, 0.7), (513, 3.9)])
def test_time_stretch_takes_every_length_and_rate(samples, rate):
    # 41292 samples make 323 frames: a float32 arange(0, 322, 1.4) ends on 322.0, past the last pair.
    stretched = time_stretch(torch.randn(samples), rate)
    assert stretched.shape == (round(samples / rate),) and torch.isfinite(stretched).all()


@pytest.mark.parametrize("codec", ["mp3", "opus", "vorbis"])
def test_a_codec_keeps_the_signal_aligned_and_changes_it(codec):
    if not codec_available(codec):
        pytest.skip(f"this libsndfile cannot encode {codec}")
    generator = torch.Generator().manual_seed(1)
    wave = 0.2 * torch.sin(2 * math.pi * 300 * torch.arange(2 * RATE) / RATE) + 0.02 * torch.randn(
        2 * RATE, generator=generator)
    out = Codec(codecs=[codec], compression=(0.95, 0.95), sample_rate=RATE).augment(wave, generator_for(0))
    assert out.shape == wave.shape and not torch.equal(out, wave)
    inner = slice(RATE // 2, -RATE // 2)
    correlation = torch.corrcoef(torch.stack([out[inner], wave[inner]]))[0, 1]
    assert correlation > 0.9, (codec, float(correlation))  # aligned: the codec's delay is trimmed


def test_codec_settings_and_the_fallback(monkeypatch, caplog):
    with pytest.raises(HparamsError, match="codecs must be a non-empty list"):
        Codec(codecs=["aac"])
    with pytest.raises(HparamsError, match="opus takes sample rates"):
        Codec(codecs=["opus"], sample_rate=44100)
    monkeypatch.setattr(augment.codec, "codec_available", lambda name: False)  # an old libsndfile
    with pytest.raises(HparamsError, match="cannot encode"):
        Codec(codecs=["mp3"], fallback=False)
    stand_in = Codec(codecs=["mp3"], sample_rate=RATE)
    assert "mu-law (G.711) stands in" in caplog.text
    wave = torch.randn(800) * 0.1
    assert torch.equal(stand_in.augment(wave, generator_for(0)),
                       augment.MuLaw(bits=8, sample_rate=RATE).augment(wave, generator_for(0)))


def test_bad_settings_are_refused_naming_the_argument():
    for build, message in [(lambda: Quantize(bits=(1, 40)), "Quantize: bits"),
                           (lambda: Resample(rates=[16000]), "Resample: rates"),
                           (lambda: TimeStretch(rate_range=(0.0, 2.0)), "TimeStretch: rate_range"),
                           (lambda: LoudnessNormalize(target_dbfs=(-10.0, 5.0)), "target_dbfs"),
                           (lambda: TimeShift(shift_ms=(5.0, -5.0)), "TimeShift: shift_ms")]:
        with pytest.raises(HparamsError, match=message):
            build()


def test_relative_lengths_are_accepted_and_returned_relative():
    augmenter = Augmenter([TimeStretch(rate_range=(1.25, 1.25), sample_rate=RATE)]).train()
    wavs = torch.randn(2, 1000) * 0.1
    seeds = torch.tensor([1, 2])
    out, relative = augmenter(wavs, torch.tensor([1.0, 0.5]), seeds)
    absolute_out, absolute = augmenter(wavs, torch.tensor([1000, 500]), seeds)
    assert relative.dtype == torch.float32 and torch.equal(out, absolute_out)
    assert torch.allclose(relative * out.shape[1], absolute.float())
    with pytest.raises(DataError, match="relative lengths must be"):
        augmenter(wavs, torch.tensor([1.5, 0.5]), seeds)
    eval_out, eval_lengths = augmenter.eval()(wavs, torch.tensor([1.0, 0.5]))
    assert eval_out is wavs and eval_lengths.tolist() == [1.0, 0.5]


class Recorded(Brain):
    """Records the augmented waveforms training saw; ``stop_at`` (epoch, step) sends SIGTERM before it."""

    stop_at = None

    def compute_forward(self, batch, stage):
        wavs, lengths = batch.sig
        if stage is Stage.TRAIN:
            epoch = self.epoch_counter.current
            if (epoch, self.step) == self.stop_at:
                os.kill(os.getpid(), signal.SIGTERM)
            wavs, lengths = self.hparams.augmenter(wavs, lengths, self.item_seeds(batch.id))
            for utt_id, wave, length in zip(batch.id, wavs, lengths):
                self.seen[(epoch, utt_id)] = wave[: int(length)].clone()
        return self.modules.model(wavs[:, :8]).mean()

    def compute_objectives(self, predictions, batch, stage):
        return predictions ** 2


@pytest.mark.slow  # three short training runs
def test_a_run_resumed_mid_epoch_draws_what_an_uninterrupted_run_draws(tmp_path):
    items = [{"id": f"utt{i}",
              "sig": 0.1 * torch.randn(800 + 97 * i, generator=torch.Generator().manual_seed(i))}
             for i in range(9)]
    loader = {"batch_size": 3, "shuffle": True}

    def make(folder, seen, stop_at=None):
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 1)
        augmenter = Augmenter(new_augmentations(), max_augmentations=3)
        brain = Recorded({"model": model}, lambda p: torch.optim.SGD(p, lr=0.01), {"augmenter": augmenter},
                         {"noprogressbar": True, "seed": 7, "num_threads": 1},
                         Checkpointer(folder, {"model": model}))
        brain.seen, brain.stop_at = seen, stop_at
        return brain

    whole: dict = {}
    make(tmp_path / "whole", whole).fit(EpochCounter(2), items, train_loader_kwargs=loader)
    resumed: dict = {}
    with pytest.raises(SystemExit) as stopped:
        make(tmp_path / "stopped", resumed, stop_at=(2, 2)).fit(EpochCounter(2), items,
                                                                 train_loader_kwargs=loader)
    assert stopped.value.code == EXIT_PREEMPTED
    make(tmp_path / "stopped", resumed).fit(EpochCounter(2), items, train_loader_kwargs=loader)
    assert len(resumed) == len(whole) == 18
    for key, wave in whole.items():
        assert torch.equal(resumed[key], wave), key


@pytest.mark.parametrize("augmentation", [augment.ChannelDrop(drop_probability=0.5, sample_rate=RATE),
                                          augment.ChannelSwap(swaps=(1, 2), sample_rate=RATE)])
def test_channel_augmentations_are_batch_invariant_and_seeded(augmentation):
    items = [torch.randn(n, 4) * 0.1 for n in (900, 500, 700)]
    lengths = torch.tensor([900, 500, 700])
    wavs = torch.nn.utils.rnn.pad_sequence(items, batch_first=True)
    seeds = torch.tensor([11, 12, 13])
    augmentation.train()
    out, out_lengths = augmentation(wavs, lengths, seeds)
    assert out.shape == wavs.shape and torch.equal(out_lengths, lengths)
    for row, item in enumerate(items):
        alone, _ = augmentation(item.unsqueeze(0), torch.tensor([item.shape[0]]), seeds[row:row + 1])
        assert torch.equal(alone[0], out[row, : item.shape[0]]) and not out[row, item.shape[0]:].any()
    assert torch.equal(augmentation(wavs, lengths, seeds)[0], out)
    changed = [not torch.equal(out[row, : n], items[row]) for row, n in enumerate(lengths.tolist())]
    assert any(changed)


def test_channel_drop_keeps_a_channel_and_swap_keeps_the_channels():
    wave = torch.randn(100, 2)
    for seed in range(20):
        dropped = augment.ChannelDrop(drop_probability=1.0).augment(wave, generator_for(seed))
        assert sum(bool(dropped[:, c].any()) for c in range(2)) == 1  # never silence
    swapped = augment.ChannelSwap().augment(wave, generator_for(0))
    assert torch.equal(swapped, wave[:, [1, 0]])
    with pytest.raises(DataError, match="expects .batch, time, channels."):
        augment.ChannelSwap()(torch.randn(2, 100), torch.tensor([100, 50]))
    with pytest.raises(HparamsError, match="ChannelSwap: swaps"):
        augment.ChannelSwap(swaps=(2, 1))


def test_cutcat_puts_bank_segments_in_place_batch_invariantly(tmp_path):
    import soundfile

    (tmp_path / "bank").mkdir()
    soundfile.write(tmp_path / "bank" / "other.flac", (0.5 * torch.ones(4000)).numpy(), RATE)
    cutcat = augment.CutCat(str(tmp_path / "bank"), segments=(2, 2), segment_ms=(25.0, 25.0),
                            sample_rate=RATE).train()
    items = [torch.randn(n) * 0.1 for n in (1200, 700, 950)]

    def run(x, lengths):
        cutcat.train()
        return cutcat(x, lengths, content_seeds(x, lengths))

    for item, output in zip(items, assert_batch_invariant(run, items)):
        assert output.shape == item.shape
        replaced = output != item
        assert 0 < int(replaced.sum()) <= 2 * 200  # two 25 ms segments of the constant bank file
        level = float(item.pow(2).mean().sqrt())
        assert torch.allclose(output[replaced].abs(), torch.full((int(replaced.sum()),), level), atol=1e-5)
    with pytest.raises(HparamsError, match="CutCat: source_folder"):
        augment.CutCat(str(tmp_path / "missing"))
