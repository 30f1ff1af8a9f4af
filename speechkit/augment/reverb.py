"""Reverberation: convolution with room impulse responses (RIRs) from a folder, or from a bank simulated
when the augmentation is built.

Simulated rooms are shoeboxes with random sizes, reverberation times (RT60) and source-to-microphone
distances. pyroomacoustics (the maintained image-source implementation, an optional extra:
``pip install 'speechkit[augment]'``) computes the early reflections up to ``max_order``; the late tail is
Gaussian noise decaying at the room's RT60, joined at 50 ms with the energy of the image-source response
there (the usual hybrid: high image orders cost minutes per room and add nothing audible). The bank is
drawn from ``bank_seed`` alone, so every process builds the same one; ``cache_folder`` keeps it on disk.

Each RIR is aligned on its direct path (no delay added) and the reverberant item is scaled back to the dry
item's RMS level, so reverberation changes the colour and the smearing, not the level or the timing.

Example:
    >>> from speechkit.augment.core import generator_for
    >>> reverb = Reverb(rooms=4, rt60=(0.2, 0.4))
    >>> reverb.augment(torch.randn(16000), generator_for(0)).shape
    torch.Size([16000])
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from speechkit.augment.core import WaveAugmentation, check_range, fast_fft_length
from speechkit.augment.noise import load_bank
from speechkit.errors import HparamsError

WALL_MARGIN_M = 0.5  # sources and microphones keep this far from every wall
TAIL_START_S = 0.05
#: The highest image-source order accepted: 20 already reaches reflections far past TAIL_START_S in the
#: largest room, and the cost grows as the cube of the order.
MAX_ORDER = 20


def largest_distance(room_size: Sequence[tuple]) -> float:
    """The longest source-to-microphone distance the smallest room of ``room_size`` allows."""
    return math.sqrt(sum(max(0.0, low - 2 * WALL_MARGIN_M) ** 2 for low, _ in room_size))


def simulate_rir(rng: np.random.Generator, sample_rate: int, room_size: Sequence[tuple], rt60: tuple,
                 source_distance: tuple, max_order: int) -> np.ndarray:
    """One shoebox RIR: image-source reflections up to ``max_order`` plus a decaying noise tail."""
    import pyroomacoustics as pra

    dims = np.array([rng.uniform(low, high) for low, high in room_size])
    target_rt60 = rng.uniform(*rt60)
    try:
        absorption, _ = pra.inverse_sabine(target_rt60, dims)
    except ValueError:  # the room is too small for so long a reverberation: the most reverberant it allows
        absorption = 0.01
    distance = min(rng.uniform(*source_distance), largest_distance([(d, d) for d in dims]))
    inner_low, inner_high = np.full(3, WALL_MARGIN_M), dims - WALL_MARGIN_M
    for _ in range(100):  # a microphone, then a source at the drawn distance inside the margins
        mic = rng.uniform(inner_low, inner_high)
        direction = rng.standard_normal(3)
        source = mic + distance * direction / np.linalg.norm(direction)
        if np.all(source >= inner_low) and np.all(source <= inner_high):
            break
    else:
        source = inner_high  # the far corner: the drawn distance did not fit; the longest that does
    room = pra.ShoeBox(dims, fs=sample_rate, materials=pra.Material(float(absorption)), max_order=max_order)
    room.add_source(source)
    room.add_microphone(mic)
    room.compute_rir()
    early = np.asarray(room.rir[0][0], dtype=np.float64)
    early = early[int(np.argmax(np.abs(early))):]  # aligned on the direct path
    length = int(sample_rate * max(1.2 * target_rt60, TAIL_START_S * 2))
    start, window = int(TAIL_START_S * sample_rate), int(0.02 * sample_rate)
    rir = np.zeros(max(length, len(early)))
    rir[:len(early)] = early
    times = np.arange(len(rir) - start) / sample_rate
    tail = rng.standard_normal(len(times)) * np.exp(-3 * math.log(10) * times / target_rt60)
    junction = early[start:start + window] if len(early) > start else np.zeros(window)
    level = math.sqrt(max(np.mean(junction**2), 1e-12) / max(np.mean(tail[:window] ** 2), 1e-12))
    rir[start:] = np.where(np.arange(start, len(rir)) < len(early), rir[start:], 0.0) + level * tail
    return (rir / np.max(np.abs(rir))).astype(np.float32)


class Reverb(WaveAugmentation):
    """Convolve with an RIR drawn from a bank: the files of ``rir_folder`` (or a list), else ``rooms``
    simulated rooms (sizes in metres from ``room_size``, one ``[low, high]`` per axis, RT60 in seconds,
    source-to-microphone distance in metres)."""

    def __init__(self, rir_folder: Optional[Union[str, list]] = None, rooms: int = 64,
                 room_size: Sequence[Sequence[float]] = ((3.0, 8.0), (3.0, 8.0), (2.4, 3.5)),
                 rt60: Sequence[float] = (0.2, 0.8), source_distance: Sequence[float] = (0.5, 3.0),
                 max_order: int = 10, bank_seed: int = 0, cache_folder: Optional[str] = None,
                 sample_rate: int = 16000):
        super().__init__(sample_rate)
        name = type(self).__name__
        if rir_folder is not None:
            rirs = load_bank(name, "rir_folder", rir_folder, sample_rate)
            self.bank = [rir[int(rir.abs().argmax()):] / rir.abs().max() for rir in rirs]
            return
        if isinstance(rooms, bool) or not isinstance(rooms, int) or not 1 <= rooms <= 10000:
            raise HparamsError(f"{name}: rooms must be an int in [1, 10000], got {rooms!r}")
        if isinstance(max_order, bool) or not isinstance(max_order, int) or not 0 <= max_order <= MAX_ORDER:
            raise HparamsError(f"{name}: max_order (reflections simulated per wall, the cost grows as its "
                               f"cube) must be an int in [0, {MAX_ORDER}], got {max_order!r}")
        if len(room_size) != 3:
            raise HparamsError(f"{name}: room_size must hold three [low, high] ranges (x, y, z), got "
                               f"{room_size!r}")
        sizes = [check_range(name, f"room_size[{axis}]", size, 1.0, 100.0)
                 for axis, size in enumerate(room_size)]
        rt60 = check_range(name, "rt60", rt60, 0.05, 5.0)
        distance = check_range(name, "source_distance", source_distance, 0.1, 100.0)
        room_reach = largest_distance(sizes)
        if distance[0] > room_reach:
            raise HparamsError(f"{name}: source_distance {list(source_distance)!r} m does not fit in the "
                               f"smallest room {[low for low, _ in sizes]!r} m: at most {room_reach:.2f} m "
                               f"there between points {WALL_MARGIN_M} m from the walls; lower "
                               "source_distance or enlarge room_size")
        settings = {"rooms": rooms, "room_size": sizes, "rt60": rt60, "source_distance": distance,
                    "max_order": int(max_order), "bank_seed": int(bank_seed), "sample_rate": sample_rate}
        self.bank = self._cached_bank(settings, cache_folder)

    @staticmethod
    def _cached_bank(settings: dict, cache_folder: Optional[str]) -> list:
        key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
        path = Path(cache_folder) / f"rirs-{key}.pt" if cache_folder else None
        if path is not None and path.exists():
            return list(torch.load(path, weights_only=True))
        try:
            import pyroomacoustics  # noqa: F401
        except ImportError:
            raise HparamsError("Reverb: simulated rooms need pyroomacoustics (pip install "
                               "'speechkit[augment]'), or give rir_folder") from None
        rng = np.random.default_rng(settings["bank_seed"])
        bank = [torch.from_numpy(simulate_rir(rng, settings["sample_rate"], settings["room_size"],
                                              settings["rt60"], settings["source_distance"],
                                              settings["max_order"]))
                for _ in range(settings["rooms"])]
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")
            torch.save(bank, partial)
            partial.replace(path)
        return bank

    def augment(self, wave, generator):
        rir = self.bank[int(torch.randint(len(self.bank), (), generator=generator))]
        if wave.shape[0] == 0:
            return wave
        rir = rir.to(device=wave.device, dtype=wave.dtype)
        size = fast_fft_length(wave.shape[0] + rir.shape[0] - 1)
        wet = torch.fft.irfft(torch.fft.rfft(wave, n=size) * torch.fft.rfft(rir, n=size), n=size)
        wet = wet[: wave.shape[0]]
        dry_rms, wet_rms = wave.pow(2).mean().sqrt(), wet.pow(2).mean().sqrt().clamp(min=1e-12)
        return wet * (dry_rms / wet_rms)
