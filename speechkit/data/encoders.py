"""Label encoders: map characters or tokens to integer ids and back.

:class:`LabelEncoder` holds an ordered vocabulary with optional special labels (blank, bos, eos, unk), encodes
a transcript to ids (characters of a string, or a list of tokens), decodes ids back, and saves to / loads from
a small text file. :class:`CTCLabelEncoder` puts the CTC blank at index 0 and can collapse a frame-level
path (repeats merged, blanks removed).

Example:
    >>> encoder = CTCLabelEncoder.from_texts(["HELLO WORLD", "HI"])
    >>> encoder.labels[:4]
    ['<blank>', ' ', 'D', 'E']
    >>> ids = encoder.encode("HI")
    >>> encoder.decode_text(ids)
    'HI'
    >>> encoder.decode_text(encoder.collapse([0, 4, 4, 0, 4, 5, 5]))  # 4 = 'H', 5 = 'I' here
    'HHI'
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Optional, Union

import torch

from speechkit.atomic_files import atomic_write
from speechkit.errors import DataError

#: Special roles, in the order they take the first indices.
SPECIAL_ROLES = ("blank", "bos", "eos", "unk")
_HEADER = "# speechkit label encoder"

Ids = Union[Sequence[int], torch.Tensor]


class LabelEncoder:
    """An ordered vocabulary of labels with optional special labels.

    Arguments:
        labels: the ordinary labels, in index order (after the special ones).
        unit: ``"char"`` (a string is encoded character by character, decoded without separator) or
            ``"word"`` (a string is split on whitespace, decoded with spaces). Lists of tokens work for both.
        blank, bos, eos, unk: the special labels to add, e.g. ``unk="<unk>"``; ``None`` leaves one out.
            Specials take the first indices in the order blank, bos, eos, unk. Without ``unk``, encoding an
            unknown label raises :class:`DataError`.
    """

    def __init__(self, labels: Iterable[str] = (), *, unit: str = "char", blank: Optional[str] = None,
                 bos: Optional[str] = None, eos: Optional[str] = None, unk: Optional[str] = None):
        if unit not in ("char", "word"):
            raise DataError(f"unit must be 'char' or 'word', got {unit!r}")
        self.unit = unit
        self.labels: list = []
        self._index: dict = {}
        self.specials: dict = {}
        for role, label in zip(SPECIAL_ROLES, (blank, bos, eos, unk)):
            if label is not None:
                self.specials[role] = self.add_label(label)
        for label in labels:
            if label not in self._index:
                self.add_label(label)

    @classmethod
    def from_texts(cls, texts: Iterable[Union[str, Sequence[str]]], *, unit: str = "char",
                   **specials: Optional[str]) -> LabelEncoder:
        """Build from transcripts: each distinct character (or word) becomes a label, sorted for stability."""
        seen: set = set()
        probe = cls(unit=unit)
        for text in texts:
            seen.update(probe.split(text))
        return cls(sorted(seen), unit=unit, **specials)

    # -- vocabulary ---------------------------------------------------------------------------------------

    def add_label(self, label: str) -> int:
        """Append ``label``; returns its index. A label already present raises :class:`DataError`."""
        if not isinstance(label, str) or label == "":
            raise DataError(f"labels must be non-empty strings, got {label!r}")
        if label in self._index:
            raise DataError(f"label {label!r} is already in the encoder (index {self._index[label]})")
        self._index[label] = len(self.labels)
        self.labels.append(label)
        return self._index[label]

    def __len__(self) -> int:
        return len(self.labels)

    def __contains__(self, label: str) -> bool:
        return label in self._index

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, LabelEncoder) and type(other) is type(self) and other.labels == self.labels
                and other.specials == self.specials and other.unit == self.unit)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} labels, unit={self.unit!r}, specials={self.specials})"

    def index_of(self, label: str) -> int:
        """The id of ``label`` (the unk id for an unknown label when there is one)."""
        index = self._index.get(label)
        if index is not None:
            return index
        if "unk" in self.specials:
            return self.specials["unk"]
        raise DataError(f"label {label!r} is not in the encoder and it has no unk label (known: "
                        f"{''.join(self.labels[:60]) if self.unit == 'char' else self.labels[:20]}...)")

    def label_of(self, index: int) -> str:
        if not 0 <= index < len(self.labels):
            raise DataError(f"id {index} is outside the encoder's {len(self.labels)} labels")
        return self.labels[index]

    @property
    def blank_index(self) -> Optional[int]:
        return self.specials.get("blank")

    @property
    def bos_index(self) -> Optional[int]:
        return self.specials.get("bos")

    @property
    def eos_index(self) -> Optional[int]:
        return self.specials.get("eos")

    @property
    def unk_index(self) -> Optional[int]:
        return self.specials.get("unk")

    # -- encoding -----------------------------------------------------------------------------------------

    def split(self, text: Union[str, Sequence[str]]) -> list:
        """A transcript as labels: characters or whitespace-separated words for a string, else as given."""
        if isinstance(text, str):
            return list(text) if self.unit == "char" else text.split()
        return list(text)

    def encode(self, text: Union[str, Sequence[str]]) -> list:
        """Ids of a transcript (see :meth:`split`)."""
        return [self.index_of(label) for label in self.split(text)]

    def encode_tensor(self, text: Union[str, Sequence[str]]) -> torch.Tensor:
        """Ids as an int64 tensor (time,), ready for :class:`~speechkit.data.batch.PaddedBatch`."""
        return torch.tensor(self.encode(text), dtype=torch.int64)

    def with_bos(self, ids: Sequence[int]) -> list:
        """``[bos] + ids`` (decoder input for teacher forcing)."""
        return [self._special("bos")] + list(ids)

    def with_eos(self, ids: Sequence[int]) -> list:
        """``ids + [eos]`` (decoder target)."""
        return list(ids) + [self._special("eos")]

    def _special(self, role: str) -> int:
        if role not in self.specials:
            raise DataError(f"this encoder has no {role} label (create it with {role}='<{role}>')")
        return self.specials[role]

    # -- decoding -----------------------------------------------------------------------------------------

    def decode(self, ids: Ids, *, skip_special: bool = True) -> list:
        """Labels of ``ids`` (special labels left out unless ``skip_special=False``)."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        special_ids = set(self.specials.values()) if skip_special else set()
        return [self.label_of(int(index)) for index in ids if int(index) not in special_ids]

    def decode_text(self, ids: Ids, *, skip_special: bool = True) -> str:
        """A string: characters joined directly, words joined with spaces."""
        return ("" if self.unit == "char" else " ").join(self.decode(ids, skip_special=skip_special))

    # -- files --------------------------------------------------------------------------------------------

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write a text file: a header, ``@role index`` lines, then one JSON-quoted label per line by id."""
        path = os.fspath(path)
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        lines = [_HEADER, f"@class {type(self).__name__}", f"@unit {self.unit}"]
        lines += [f"@{role} {index}" for role, index in self.specials.items()]
        lines += [json.dumps(label, ensure_ascii=False) for label in self.labels]
        with atomic_write(path) as handle:
            handle.write("\n".join(lines) + "\n")

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> LabelEncoder:
        """Read a file written by :meth:`save` (errors name the file and line)."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except OSError as error:
            raise DataError(f"cannot read label encoder file {path}: {error}") from None
        if not lines or lines[0] != _HEADER:
            raise DataError(f"{path}, line 1: not a label encoder file (expected {_HEADER!r})")
        unit, specials, labels = "char", {}, []
        for number, line in enumerate(lines[1:], start=2):
            if not line:
                continue
            if line.startswith("@"):
                name, _, value = line[1:].partition(" ")
                if name == "unit":
                    unit = value
                elif name in SPECIAL_ROLES and value.isdigit():
                    specials[name] = int(value)
                elif name != "class":
                    raise DataError(f"{path}, line {number}: unknown setting {line!r}")
                continue
            try:
                label = json.loads(line)
            except json.JSONDecodeError:
                raise DataError(f"{path}, line {number}: a label must be a JSON string, "
                                f"got {line!r}") from None
            if not isinstance(label, str):
                raise DataError(f"{path}, line {number}: a label must be a JSON string, got {line!r}")
            labels.append(label)
        encoder = cls.__new__(cls)
        LabelEncoder.__init__(encoder, unit=unit)
        for number, label in enumerate(labels):
            try:
                encoder.add_label(label)
            except DataError as error:
                raise DataError(f"{path}: label {number}: {error}") from None
        for role, index in specials.items():
            if index >= len(labels):
                raise DataError(f"{path}: {role} id {index} is outside the {len(labels)} labels")
        encoder.specials = {role: specials[role] for role in SPECIAL_ROLES if role in specials}
        encoder._check_loaded(path)
        return encoder

    def _check_loaded(self, path: str) -> None:
        """Subclasses check their own invariants after :meth:`load`."""


class CTCLabelEncoder(LabelEncoder):
    """A label encoder for CTC: the blank label always has id 0.

    Example:
        >>> encoder = CTCLabelEncoder(["A", "B"])
        >>> encoder.blank_index, encoder.encode("BA")
        (0, [2, 1])
    """

    def __init__(self, labels: Iterable[str] = (), *, unit: str = "char", blank: str = "<blank>",
                 bos: Optional[str] = None, eos: Optional[str] = None, unk: Optional[str] = None):
        if blank is None:
            raise DataError("a CTC encoder needs a blank label")
        super().__init__(labels, unit=unit, blank=blank, bos=bos, eos=eos, unk=unk)

    def collapse(self, ids: Ids) -> list:
        """A CTC path to its label ids: merge runs of the same id, then drop blanks.

        Example:
            >>> CTCLabelEncoder(["A", "B"]).collapse([1, 1, 0, 1, 2, 2, 0])
            [1, 1, 2]
        """
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        collapsed, previous = [], None
        for index in ids:
            index = int(index)
            if index != previous and index != self.blank_index:
                collapsed.append(index)
            previous = index
        return collapsed

    def decode_ctc(self, ids: Ids) -> str:
        """Text of a frame-level CTC path (e.g. the argmax of each frame)."""
        return self.decode_text(self.collapse(ids))

    def _check_loaded(self, path: str) -> None:
        if self.specials.get("blank") != 0:
            raise DataError(f"{path}: a CTC encoder needs its blank at id 0, "
                            f"got {self.specials.get('blank')}")
