"""``speechkit plot-log results/asr/1234/train_log.txt``: the loss and metric curves of a run, per epoch, in
one PNG, for people without TensorBoard.

Reads the stage summary lines Brain writes (``epoch: 3 | stage: valid | lr: 0.001 | loss: 0.52 | WER: 12.3 |
duration: 4.1s``): one panel per quantity (loss first, then every metric, then the learning rate), one curve
per stage; the test stage, which has no epoch, is a single marker after the last epoch. Needs matplotlib
(``pip install 'speechkit[plot]'``).

Example:
    >>> with open("train_log.txt", "w") as log:   # what Brain writes at the end of each stage
    ...     for epoch, wer in [(1, 48.2), (2, 31.0), (3, 22.4)]:
    ...         print(f"epoch: {epoch} | stage: valid | loss: 0.5 | WER: {wer} | duration: 4.1s", file=log)
    >>> curves = parse_train_log("train_log.txt")
    >>> curves["valid"]["WER"]
    [(1, 48.2), (2, 31.0), (3, 22.4)]
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from speechkit.errors import DataError

SKIPPED = {"epoch", "stage", "duration"}  # not curves


def parse_train_log(path) -> dict:
    """``{stage: {quantity: [(epoch, value), ...]}}``; the test stage's epoch is ``None``.

    Raises:
        DataError: naming the file and line, for a line that is not a stage summary, or a missing file.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such train log")
    curves: dict = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = {}
        for part in line.split(" | "):
            key, sep, value = part.partition(": ")
            if not sep:
                raise DataError(f"{path}, line {number}: not a stage summary ('key: value | ...'): "
                                f"{line[:80]!r}")
            fields[key.strip()] = value.strip()
        if "update" in fields and "stage" not in fields:
            continue  # a recipe's per-update line (wav2vec 2.0 pretraining): the curves here are per epoch
        if "stage" not in fields:
            raise DataError(f"{path}, line {number}: no 'stage:' field: {line[:80]!r}")
        epoch = int(fields["epoch"]) if "epoch" in fields else None
        stage = curves.setdefault(fields["stage"], {})
        for key, value in fields.items():
            number_value = _number(value)
            if key not in SKIPPED and number_value is not None:
                stage.setdefault(key, []).append((epoch, number_value))
    if not curves:
        raise DataError(f"{path}: no stage summary lines")
    return curves


def plot_curves(curves: dict, output, title: Optional[str] = None) -> Path:
    """Draw :func:`parse_train_log`'s curves into the PNG ``output``; returns its path."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise DataError("plot-log needs matplotlib: pip install 'speechkit[plot]'") from error
    quantities = _ordered({key for stage in curves.values() for key in stage})
    last_epoch = max((e for stage in curves.values() for points in stage.values() for e, _ in points
                      if e is not None), default=0)
    columns = min(3, len(quantities))
    rows = -(-len(quantities) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.5 * columns, 3.2 * rows), squeeze=False)
    for axis, quantity in zip(axes.flat, quantities):
        for stage, values in curves.items():
            points = values.get(quantity, [])
            per_epoch = [(e, v) for e, v in points if e is not None]
            if per_epoch:
                axis.plot(*zip(*per_epoch), marker="o", markersize=3, label=stage)
            for _, value in (p for p in points if p[0] is None):
                axis.plot([last_epoch + 0.5], [value], marker="*", markersize=10, linestyle="", label=stage)
        axis.set_title(quantity)
        axis.set_xlabel("epoch")
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small")
    for axis in list(axes.flat)[len(quantities):]:
        axis.set_visible(False)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=100)
    plt.close(figure)
    return output


def _ordered(quantities: set) -> list:
    rest = sorted(quantities - {"loss", "lr"})
    return [q for q in ("loss",) if q in quantities] + rest + [q for q in ("lr",) if q in quantities]


def _number(text: str) -> Optional[float]:
    try:
        return float((text.split() or [""])[0].rstrip("s%"))  # `lr: 0.001 (from 1.5e-05)`: the first
    except ValueError:
        return None
