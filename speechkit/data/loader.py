"""make_dataloader: a resumable, shardable loader built from a dataset and the YAML loader options.

The loader wraps ``torch.utils.data.DataLoader`` with one of the batch samplers of
:mod:`speechkit.data.samplers` and keeps count of the batches it has handed out, so its ``state_dict()`` is
the position the training loop has reached, not the position the worker processes have prefetched to.

Example:
    >>> from speechkit.data.dataset import DynamicItemDataset
    >>> dataset = DynamicItemDataset({f"u{i}": {"duration": 1.0 + i} for i in range(6)})
    >>> loader = make_dataloader(dataset, "train", batch_size=2, seed=1, collate_fn=list)
    >>> loader.set_epoch(1)
    >>> len(loader), sum(len(batch) for batch in loader)
    (3, 6)
"""
from __future__ import annotations

import functools
import logging
import random
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Optional, Union

import numpy as np
import torch.utils.data

from speechkit.data.buckets import cost_function
from speechkit.data.samplers import DynamicBatchSampler, EvalBatchSampler, FixedBatchSampler
from speechkit.errors import DataError
from speechkit.stage import Stage

logger = logging.getLogger(__name__)

#: Loader options a YAML file may set, with their defaults (``shuffle`` defaults to True for training only).
LOADER_OPTIONS = {
    "batch_size": 1,
    "shuffle": None,
    "sort": None,
    "length_key": "duration",
    "dynamic_batching": None,
    "speaker_balanced": None,
    "num_workers": 0,
    "prefetch_factor": None,
    "pin_memory": False,
    "collate_fn": None,
    "pad_to_multiple": None,
    "drop_last": False,
    "timeout": 0,
}

#: Keys of ``dynamic_batching`` an evaluation loader uses (the others only shape training batches).
EVAL_DYNAMIC_KEYS = ("max_batch_length", "max_batch_size", "length_cost")
DYNAMIC_KEYS = ("max_batch_length", "num_buckets", "bucket_boundaries", "shuffle", "batch_ordering",
                "max_batch_size", "seed", "drop_last", "length_cost", "pool_batches")


class SpeechLoader:
    """A batch iterator over ``dataset`` that knows its epoch, its position and its padding.

    Built by :func:`make_dataloader`; use it like a ``DataLoader``. ``len(loader)`` is the number of batches
    this rank yields in the current pass (fewer after resuming mid-epoch).
    """

    def __init__(self, dataset: Any, batch_sampler: Any, *, collate_fn: Callable, num_workers: int = 0,
                 prefetch_factor: Optional[int] = None, pin_memory: bool = False, timeout: float = 0,
                 seed: int = 0, rank: int = 0, stage: Stage = Stage.TRAIN):
        self.dataset = dataset
        self.batch_sampler = batch_sampler
        self.collate_fn = collate_fn
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.seed = seed
        self.rank = rank
        self.stage = stage
        self._start = 0  # the sampler's position when the running pass began (after a resume: not 0)
        self._received = 0  # batches handed to the caller in the running pass
        self._served_epoch: Optional[int] = None  # the epoch an evaluation pass serves, for its log line

    @property
    def epoch(self) -> int:
        return self.batch_sampler.epoch

    def set_epoch(self, epoch: int) -> None:
        """Use the shuffling of ``epoch``; call it before each pass (a resume position of another epoch is
        dropped)."""
        self.batch_sampler.set_epoch(epoch)

    def serve_epoch(self, epoch: Optional[int]) -> None:
        """Name the training epoch the next pass serves (validation), or None (a final test), in the pass's
        log line. Unlike :meth:`set_epoch` it changes nothing of what the pass yields: an evaluation loader
        gives the same batches every epoch."""
        self._served_epoch = epoch

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator[Any]:
        generator = torch.Generator()
        # Worker seeds depend on (seed, epoch, rank): augmentation noise is reproducible and differs per rank.
        entropy = np.random.SeedSequence([self.seed, self.epoch, self.rank]).generate_state(1)[0]
        generator.manual_seed(int(entropy))
        workers = self.num_workers
        # The pass's batches are fixed up front (DataLoader may call iter() on its batch sampler twice), and
        # the position is counted here, from the batches handed to the caller, not those workers prefetch.
        batches = self.batch_sampler.begin_pass()
        if hasattr(self.dataset, "set_epoch"):  # items drawn per epoch (dynamic mixing), also after a resume
            self.dataset.set_epoch(self.epoch)
        self._start = self.batch_sampler.pass_start
        self._received = 0
        if self.rank == 0:
            self._log_plan(len(batches))
        loader = torch.utils.data.DataLoader(
            self.dataset, batch_sampler=batches, collate_fn=self.collate_fn, num_workers=workers,
            prefetch_factor=self.prefetch_factor if workers > 0 else None, pin_memory=self.pin_memory,
            timeout=self.timeout if workers > 0 else 0, worker_init_fn=seed_worker if workers > 0 else None,
            generator=generator)
        return self._count(iter(loader))

    def _count(self, iterator: Iterator[Any]) -> Iterator[Any]:
        for batch in iterator:
            self._received += 1
            self.batch_sampler.mark_consumed(self._start + self._received)
            yield batch
        self.batch_sampler.end_pass()

    def state_dict(self) -> dict:
        """The position reached by the caller (not by prefetching workers): load it to yield what is left."""
        return self.batch_sampler.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._received = 0
        self.batch_sampler.load_state_dict(dict(state))

    def _log_plan(self, count: int) -> None:
        if not logger.isEnabledFor(logging.INFO):
            return
        stats = self.batch_sampler.stats()
        efficiency = stats.get("padding_efficiency")
        resumed = f", resuming after {self._start} batches" if self._start else ""
        # A training loader's epoch is its shuffling's; an evaluation loader's sampler epoch only guards a
        # resume position, so it logs the epoch it serves, when told (serve_epoch).
        epoch = self.epoch if self.stage is Stage.TRAIN else self._served_epoch
        where = self.stage.value if epoch is None else f"{self.stage.value} epoch {epoch}"
        logger.info("%s: %d batches on rank 0 (%d items)%s, padding efficiency %s", where, count,
                    stats["items"], resumed, "n/a" if efficiency is None else f"{efficiency:.3f}")

    def stats(self) -> dict:
        """This rank's epoch plan: batches, items, padding efficiency (real / padded length), and the batches
        handed out in the running pass."""
        return {**self.batch_sampler.stats(), "batches_yielded": self._received, "stage": self.stage.value}


def make_dataloader(dataset: Any, stage: Union[Stage, str], *, rank: int = 0, world_size: int = 1,
                    seed: int = 0, **opts: Any) -> SpeechLoader:
    """Build the loader of one stage from YAML-style options.

    Arguments:
        dataset: a map-style dataset; ``dataset.lengths(length_key)`` gives the item lengths when sorting,
            dynamic batching or padding statistics need them.
        stage: ``Stage`` or ``"train"`` / ``"valid"`` / ``"test"``. Training: every rank yields the same
            number of batches. Evaluation: disjoint shards, nothing repeated or dropped.
        rank, world_size: this process's place among the data-parallel processes.
        seed: the shuffling seed (combined with the epoch, see ``set_epoch``).
        opts: ``batch_size`` (1), ``shuffle`` (True for training), ``sort`` (``"ascending"``,
            ``"descending"`` or None), ``length_key`` (``"duration"``), ``dynamic_batching`` (a dict of
            :class:`~speechkit.data.samplers.DynamicBatchSampler` arguments, e.g. ``{max_batch_length: 200,
            num_buckets: 40}``, or None), ``speaker_balanced`` (training only: a dict of
            :class:`~speechkit.data.speaker_sampler.SpeakerBalancedSampler` options,
            ``{speakers_per_batch: 16, utterances_per_speaker: 2, speaker_key: spk}``, or None),
            ``num_workers`` (0), ``prefetch_factor``, ``pin_memory``,
            ``collate_fn`` (default :class:`~speechkit.data.batch.PaddedBatch`), ``pad_to_multiple`` (None:
            the default collate pads time to a multiple of it, for few distinct batch shapes under
            ``torch.compile`` or CUDA graphs), ``drop_last``, ``timeout``.

    Raises:
        DataError: an unknown option or a bad value (the option is named).
    """
    try:
        stage = Stage.of(stage)
    except ValueError:
        raise DataError(f"make_dataloader: unknown stage {stage!r} (use 'train', 'valid' or 'test')"
                        ) from None
    unknown = sorted(set(opts) - set(LOADER_OPTIONS))
    if unknown:
        raise DataError(f"unknown loader option(s) {unknown} for the {stage.value} loader; known: "
                        f"{sorted(LOADER_OPTIONS)}")
    options = {**LOADER_OPTIONS, **opts}
    num_workers = options["num_workers"]
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise DataError(f"loader option num_workers must be an int >= 0, got {num_workers!r}")
    seed = 0 if seed is None else int(seed)
    sampler = _batch_sampler(dataset, stage, options, rank, world_size, seed)
    collate_fn = _collate(options["collate_fn"], options["pad_to_multiple"])
    return SpeechLoader(dataset, sampler, collate_fn=collate_fn, num_workers=num_workers,
                        prefetch_factor=options["prefetch_factor"], pin_memory=bool(options["pin_memory"]),
                        timeout=options["timeout"], seed=seed, rank=rank, stage=stage)


def _collate(collate_fn: Optional[Callable], pad_to_multiple: Any) -> Callable:
    """The loader's collate function: the recipe's, or PaddedBatch (padding to ``pad_to_multiple``)."""
    if pad_to_multiple is None:
        pad_to_multiple = 1
    elif isinstance(pad_to_multiple, bool) or not isinstance(pad_to_multiple, int) or pad_to_multiple < 1:
        raise DataError(f"loader option pad_to_multiple must be an int >= 1 or null, got {pad_to_multiple!r}")
    elif collate_fn is not None:
        raise DataError("loader option pad_to_multiple applies to the default collate (PaddedBatch); with "
                        "your own collate_fn, pad inside it")
    if collate_fn is not None:
        return collate_fn
    from speechkit.data.batch import PaddedBatch

    if pad_to_multiple == 1:
        return PaddedBatch
    return functools.partial(PaddedBatch, pad_to_multiple=pad_to_multiple)


def _batch_sampler(dataset: Any, stage: Stage, options: dict, rank: int, world_size: int, seed: int) -> Any:
    dynamic = options["dynamic_batching"]
    if dynamic is not None and not isinstance(dynamic, Mapping):
        raise DataError(f"loader option dynamic_batching must be a dict of DynamicBatchSampler arguments or "
                        f"null, got {dynamic!r}")
    dynamic = dict(dynamic or {})
    unknown = sorted(set(dynamic) - set(DYNAMIC_KEYS))
    if unknown:
        raise DataError(f"unknown dynamic_batching option(s) {unknown}; known: {list(DYNAMIC_KEYS)}")
    if dynamic and "max_batch_length" not in dynamic:
        raise DataError("dynamic_batching needs max_batch_length (the padded length budget of a batch)")
    sort = options["sort"]
    length_key = options["length_key"]
    needs_lengths = bool(dynamic) or sort is not None
    lengths = _lengths(dataset, length_key, required=needs_lengths)
    num_items = len(dataset)
    if dynamic:
        _check_items_fit(dataset, lengths, dynamic, length_key)
    if stage is Stage.TRAIN and options["speaker_balanced"] is not None:
        return _speaker_sampler(dataset, options["speaker_balanced"], rank, world_size, seed)
    if stage is Stage.TRAIN:
        if dynamic:
            arguments = {"shuffle": True if options["shuffle"] is None else bool(options["shuffle"]),
                         "drop_last": bool(options["drop_last"]), "seed": seed, **dynamic}
            return DynamicBatchSampler(lengths, rank=rank, world_size=world_size, **arguments)
        shuffle = True if options["shuffle"] is None else bool(options["shuffle"])
        return FixedBatchSampler(num_items, options["batch_size"], shuffle=shuffle, sort=sort,
                                 lengths=lengths, seed=seed, drop_last=bool(options["drop_last"]), rank=rank,
                                 world_size=world_size)
    eval_dynamic = {key: dynamic[key] for key in EVAL_DYNAMIC_KEYS if key in dynamic}
    return EvalBatchSampler(num_items, options["batch_size"], lengths=lengths, sort=sort, rank=rank,
                            world_size=world_size, **eval_dynamic)


def _speaker_sampler(dataset: Any, options: Any, rank: int, world_size: int, seed: int):
    """The :class:`~speechkit.data.speaker_sampler.SpeakerBalancedSampler` of ``speaker_balanced`` options
    (``speakers_per_batch``, ``utterances_per_speaker``, ``speaker_key`` (default ``spk``))."""
    from speechkit.data.speaker_sampler import SpeakerBalancedSampler

    known = ("speakers_per_batch", "utterances_per_speaker", "speaker_key")
    if not isinstance(options, Mapping) or set(options) - set(known) or "speakers_per_batch" not in options:
        raise DataError(f"loader option speaker_balanced must be a dict with speakers_per_batch (and "
                        f"optionally utterances_per_speaker, speaker_key), got {options!r}")
    key = options.get("speaker_key", "spk")
    rows, ids = getattr(dataset, "data", None), getattr(dataset, "data_ids", None)
    if rows is None or ids is None:
        raise DataError(f"speaker_balanced batches need a DynamicItemDataset (a static {key!r} field per "
                        f"item); got {type(dataset).__name__}")
    missing = [data_id for data_id in ids if key not in rows[data_id]]
    if missing:
        raise DataError(f"speaker_balanced: data point {missing[0]!r} has no field {key!r} (the speaker)")
    return SpeakerBalancedSampler([rows[data_id][key] for data_id in ids], options["speakers_per_batch"],
                                  options.get("utterances_per_speaker", 2), seed=seed, rank=rank,
                                  world_size=world_size)


def _lengths(dataset: Any, key: str, required: bool) -> Optional[list]:
    """Item lengths from ``dataset.lengths(key)``; without ``required`` they only feed the statistics, so a
    dataset that cannot give them yields None."""
    measure = getattr(dataset, "lengths", None)
    if measure is None:
        if required:
            raise DataError(f"sorting and dynamic batching need dataset.lengths({key!r}); "
                            f"{type(dataset).__name__} has no lengths method")
        return None
    if required:
        return list(measure(key))
    try:
        return list(measure(key))
    except (DataError, KeyError):
        return None


def _check_items_fit(dataset: Any, lengths: list, dynamic: dict, length_key: str) -> None:
    """Name the data points too long for any batch (the samplers only know their positions)."""
    cost = cost_function(dynamic.get("length_cost"))
    budget = dynamic["max_batch_length"]
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        return  # the sampler reports the bad value
    too_long = [index for index, length in enumerate(lengths) if cost(length) > budget]
    if too_long:
        ids = getattr(dataset, "data_ids", None)
        names = [repr(ids[index]) if ids is not None else f"#{index}" for index in too_long[:3]]
        raise DataError(f"{len(too_long)} data point(s) are too long for dynamic_batching.max_batch_length="
                        f"{budget:g} even alone ({', '.join(names)}{', ...' if len(too_long) > 3 else ''}: "
                        f"{length_key} {lengths[too_long[0]]:g}); filter them out, e.g. dataset."
                        f"filtered_sorted(key_max_value={{{length_key!r}: ...}}), or raise the budget")


def seed_worker(worker_id: int) -> None:
    """Seed Python's and numpy's generators in a loader worker from the seed torch gave it."""
    worker_seed = torch.initial_seed() % 2**32
    random.seed(worker_seed)
    np.random.seed(worker_seed)
