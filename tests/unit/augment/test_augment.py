"""speechkit.augment: lengths kept (or changed as the speed says), padding never read, the same draws for the
same seed whatever the batch (hence after a resumption), the Augmenter's probabilities, bad settings refused
before training."""
from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import soundfile
import torch

from speechkit.augment import (
    AddNoise,
    Augmenter,
    Babble,
    BandLimit,
    ChunkDrop,
    Equalizer,
    FormantWarp,
    FrequencyDrop,
    MuLaw,
    PitchShift,
    RandomGain,
    Reverb,
    SpeedPerturb,
    generator_for,
    item_seeds,
)
from speechkit.errors import HparamsError
from tests.helpers.batch_invariance import assert_batch_invariant

RATE = 8000


def tone_file(path, seconds=0.5, frequency=300.0, rate=RATE):
    t = np.arange(int(seconds * rate)) / rate
    soundfile.write(path, (0.3 * np.sin(2 * np.pi * frequency * t)).astype(np.float32), rate)
    return path


@pytest.fixture(scope="module")
def banks(tmp_path_factory):
    root = tmp_path_factory.mktemp("banks")
    (root / "noise").mkdir()
    (root / "speech").mkdir()
    (root / "rirs").mkdir()
    tone_file(root / "noise" / "hum.wav", frequency=50.0)
    tone_file(root / "noise" / "fan.flac", seconds=0.1, frequency=900.0)  # shorter than the items: looped
    for n in range(3):
        tone_file(root / "speech" / f"spk{n}.wav", frequency=200.0 + 70 * n)
    decay = np.exp(-np.arange(800) / 80.0) * np.random.default_rng(0).standard_normal(800)
    soundfile.write(root / "rirs" / "room.wav", decay.astype(np.float32), RATE)
    return root


def every_augmentation(banks):
    return [
        SpeedPerturb(speeds=[0.9, 1.1], sample_rate=RATE), PitchShift(semitones=(-2, 2), sample_rate=RATE),
        MuLaw(sample_rate=RATE), Equalizer(sample_rate=RATE), BandLimit(sample_rate=RATE),
        FrequencyDrop(sample_rate=RATE), FormantWarp(sample_rate=RATE),
        AddNoise(snr_db=(0, 10), sample_rate=RATE),
        AddNoise(snr_db=(0, 10), noise_folder=str(banks / "noise"), sample_rate=RATE),
        Babble(str(banks / "speech"), speakers=(2, 3), sample_rate=RATE), ChunkDrop(sample_rate=RATE),
        Reverb(rir_folder=str(banks / "rirs"), sample_rate=RATE),
        RandomGain(clip_probability=0.5, sample_rate=RATE),
    ]


def content_seeds(x, lengths):
    """A seed per item from its own samples: the same item gets the same seed in any batch."""
    return torch.tensor([zlib.crc32(x[i, : int(n)].numpy().tobytes()) for i, n in enumerate(lengths)])


@pytest.fixture(scope="module")
def augmentations(banks):
    return every_augmentation(banks)


@pytest.mark.parametrize("index", range(13))
def test_padding_never_enters_and_lengths_are_kept(augmentations, index):
    augmentation = augmentations[index].train()
    items = [torch.randn(n) * 0.1 for n in (1200, 700, 950)]

    def run(x, lengths):
        augmentation.train()  # the helper puts modules in eval mode: this is a training-time transform
        return augmentation(x, lengths, content_seeds(x, lengths))

    outputs = assert_batch_invariant(run, items)
    for item, output in zip(items, outputs):
        if isinstance(augmentation, SpeedPerturb):
            assert output.shape[0] in {math.ceil(item.shape[0] / s) for s in (0.9, 1.1)}
        else:
            assert output.shape == item.shape
        assert torch.isfinite(output).all() and not torch.equal(output, item)


def test_same_seed_same_audio_and_another_seed_other_audio(augmentations):
    wave = torch.randn(1000) * 0.1
    for augmentation in augmentations:
        if isinstance(augmentation, MuLaw) or len(getattr(augmentation, "bank", None) or [0, 0]) == 1:
            continue  # nothing to draw
        first = augmentation.augment(wave, generator_for(5))
        assert torch.equal(first, augmentation.augment(wave, generator_for(5))), type(augmentation).__name__
        others = [augmentation.augment(wave, generator_for(seed)) for seed in (6, 7, 8)]
        assert any(o.shape != first.shape or not torch.equal(o, first) for o in others), type(augmentation)


def test_an_items_draws_depend_on_run_epoch_and_id_only():
    """What a resumed epoch relies on: an item gets the same audio in another batch, position or process."""
    augmenter = Augmenter([SpeedPerturb(sample_rate=RATE), AddNoise(sample_rate=RATE)],
                          probabilities=[0.7, 0.7])
    waves = {name: torch.randn(n) for name, n in (("a", 900), ("b", 600), ("c", 800), ("d", 500))}

    def batch(ids, epoch):
        x = torch.nn.utils.rnn.pad_sequence([waves[i] for i in ids], batch_first=True)
        lengths = torch.tensor([waves[i].shape[0] for i in ids])
        out, out_lengths = augmenter.train()(x, lengths, item_seeds(ids, epoch=epoch, seed=11))
        return {i: out[k, : int(out_lengths[k])] for k, i in enumerate(ids)}

    whole = batch(["a", "b", "c", "d"], epoch=3)
    resumed = {**batch(["c"], epoch=3), **batch(["d", "b", "a"], epoch=3)}
    assert all(torch.equal(whole[i], resumed[i]) for i in waves)
    assert not all(torch.equal(whole[i], o) for i, o in batch(["a", "b", "c", "d"], epoch=4).items()
                   if o.shape == whole[i].shape)
    assert item_seeds(["a"], 3, 11).tolist() != item_seeds(["a"], 3, 12).tolist()


def test_augmenter_probabilities_and_counts_hold_over_many_items():
    augmenter = Augmenter([RandomGain(), MuLaw(), ChunkDrop()], probabilities=[1.0, 0.3, 0.6],
                          min_augmentations=1, max_augmentations=2)
    counts, sizes = torch.zeros(3), []
    for seed in range(3000):
        chosen_before_probability = augmenter.chosen(generator_for(seed))
        sizes.append(len(chosen_before_probability))
        for index in chosen_before_probability:
            counts[index] += 1
    # Each augmentation is considered in 1.5 of 3 draws on average (a count of 1 or 2 picked out of 3).
    considered = 3000 * 1.5 / 3
    for index, probability in enumerate([1.0, 0.3, 0.6]):
        expected = considered * probability
        spread = 4 * math.sqrt(considered * probability * (1 - probability)) + 4 * math.sqrt(considered)
        assert abs(counts[index] - expected) < spread, (index, counts[index], expected)
    assert max(sizes) <= 2


def test_concat_original_appends_the_clean_batch_and_replicates_labels():
    augmenter = Augmenter([RandomGain(gain_db=(6, 6))], concat_original=True).train()
    x, lengths = torch.randn(2, 50), torch.tensor([50, 30])
    out, out_lengths = augmenter(x, lengths, item_seeds(["a", "b"], 0, 0))
    assert out.shape[0] == 4 and out_lengths.tolist() == [50, 30, 50, 30]
    assert torch.equal(out[2], x[0]) and torch.equal(out[3, :30], x[1, :30])
    assert augmenter.replicate(torch.tensor([1, 2])).tolist() == [1, 2, 1, 2]
    assert augmenter.replicate(["x", "y"]) == ["x", "y", "x", "y"]


def test_eval_mode_returns_the_input():
    augmenter = Augmenter([AddNoise()], concat_original=True).eval()
    x, lengths = torch.randn(2, 50), torch.tensor([50, 30])
    out, out_lengths = augmenter(x, lengths)
    assert out is x and torch.equal(out_lengths, lengths) and augmenter.replicate([1]) == [1]


def test_pitch_shift_moves_the_pitch_and_keeps_the_tempo():
    t = torch.arange(RATE) / RATE
    tone = torch.sin(2 * math.pi * 220 * t)
    shifted = PitchShift(semitones=(12, 12), sample_rate=RATE).augment(tone, generator_for(0))
    spectrum = torch.fft.rfft(shifted[1000:7000]).abs()
    assert shifted.shape == tone.shape
    assert abs(float(spectrum.argmax()) * RATE / 6000 - 440) < 5


def test_band_limit_keeps_the_telephone_band():
    noise = torch.randn(16000)
    band = BandLimit(low_hz=(300, 300), high_hz=(3400, 3400), sample_rate=16000)
    out = band.augment(noise, generator_for(0))
    power = torch.fft.rfft(out).abs() ** 2
    freqs = torch.linspace(0, 8000, power.shape[0])
    assert power[freqs > 4500].sum() / power.sum() < 1e-3 and power[freqs < 150].sum() / power.sum() < 1e-3


def test_noise_is_added_at_the_snr_asked_for():
    speech = torch.randn(8000)
    noisy = AddNoise(snr_db=(10, 10), colors=["pink"]).augment(speech, generator_for(0))
    noise = noisy - speech
    assert 10 * math.log10(float(speech.pow(2).mean() / noise.pow(2).mean())) == pytest.approx(10.0, abs=1e-3)


def test_simulated_rooms_are_reproducible_and_cached(tmp_path):
    pytest.importorskip("pyroomacoustics")
    settings = {"rooms": 2, "rt60": (0.15, 0.25), "room_size": [[3, 4], [3, 4], [2.5, 3]],
                "sample_rate": RATE}
    first = Reverb(cache_folder=str(tmp_path), **settings)
    again = Reverb(**settings)
    assert len(list(tmp_path.glob("rirs-*.pt"))) == 1
    assert all(torch.allclose(a, b) for a, b in zip(first.bank, again.bank))
    assert all(int(r.abs().argmax()) == 0 for r in first.bank)  # aligned on the direct path
    wave = torch.randn(4000)
    wet = first.augment(wave, generator_for(1))
    assert wet.shape == wave.shape
    assert float(wet.pow(2).mean().sqrt()) == pytest.approx(float(wave.pow(2).mean().sqrt()))


@pytest.mark.parametrize("build, message", [
    (lambda b: AddNoise(noise_folder=str(b / "empty")), "noise_folder names an empty folder"),
    (lambda b: AddNoise(noise_folder=str(b / "junk")), "notes.txt', which is not an audio file"),
    (lambda b: AddNoise(noise_folder=str(b / "broken")), "broken.wav"),
    (lambda b: AddNoise(noise_folder=str(b / "missing")), "is not a folder"),
    (lambda b: AddNoise(snr_db=(20, 5)), "snr_db must be finite with low <= high"),
    (lambda b: AddNoise(snr_db=(-80, 5)), "snr_db .* must lie within"),
    (lambda b: AddNoise(colors=["purple"]), "colors must name some of"),
    (lambda b: Augmenter([AddNoise()], probabilities=[1.5]), r"probabilities\[0\] must be a probability"),
    (lambda b: Augmenter([AddNoise()], probabilities=[0.5, 0.5]), "2 values for 1 augmentations"),
    (lambda b: Augmenter([torch.nn.Identity()]), "augmentations\\[0\\] is a Identity"),
    (lambda b: Augmenter([AddNoise(), MuLaw()], min_augmentations=2, max_augmentations=1), "above"),
    (lambda b: Reverb(room_size=[[2, 2], [2, 2], [2, 2]], source_distance=[2.0, 3.0]),
     "source_distance .* does not fit in the smallest room"),
    (lambda b: SpeedPerturb(speeds=[]), "speeds must be a non-empty list"),
    (lambda b: BandLimit(low_hz=(3000, 3500), high_hz=(3000, 3400)), "must lie below high_hz"),
    (lambda b: MuLaw(bits=1), "bits must be an int in"),
    (lambda b: RandomGain(clip_level="high"), "clip_level must be a pair"),
])
def test_bad_settings_are_refused_naming_the_argument(banks, tmp_path_factory, build, message):
    (banks / "empty").mkdir(exist_ok=True)
    (banks / "junk").mkdir(exist_ok=True)
    (banks / "junk" / "notes.txt").write_text("not audio")
    (banks / "broken").mkdir(exist_ok=True)
    (banks / "broken" / "broken.wav").write_bytes(b"RIFF nonsense")
    with pytest.raises(HparamsError, match=message):
        build(banks)


def test_brain_item_seeds_follow_the_run_seed_and_the_epoch():
    from speechkit.brain import Brain
    from speechkit.checkpoints import EpochCounter

    brain = Brain({"model": torch.nn.Linear(1, 1)}, None, None, {"seed": 42, "noprogressbar": True})
    assert brain.item_seeds(["a", "b"]).tolist() == item_seeds(["a", "b"], 0, 42).tolist()
    brain.epoch_counter = EpochCounter(5)
    next(iter(brain.epoch_counter))
    assert brain.item_seeds(["a"]).tolist() == item_seeds(["a"], 1, 42).tolist()
