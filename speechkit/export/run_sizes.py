"""The sizes a run was trained with, for the model folder ``speechkit export`` writes.

An inference YAML repeats the model's sizes (``d_model: 256``), and a run trained with others
(``--model.d_model 128``) would not load into it. The run's folder records what ran: its ``hyperparams.yaml``
holds the training YAML with every override applied (:mod:`speechkit.experiment`). Every top-level
whole-number key of the inference YAML that the run's YAML sets, at any depth, to one other whole number
takes the run's value; a key the run sets to several different numbers (``num_layers`` of two modules) is
left as it is, with a warning. Only whole numbers are taken: sizes, counts and indices, never decoding
weights or margins, which an inference YAML may mean to set otherwise.

Example:
    >>> run = "model: !include:ASR.yaml {d_model: 32}\\n"
    >>> adapt_sizes("d_model: 256  # the width\\nbeam_size: 8\\n", run, "run.yaml")
    ('d_model: 32  # the width\\nbeam_size: 8\\n', {'d_model': (256, 32)}, {})
"""
from __future__ import annotations

import pathlib
import re
from typing import Optional

from speechkit.errors import HparamsError

_INT = "tag:yaml.org,2002:int"


def find_run_hparams(checkpoints: str | pathlib.Path, levels: int = 3) -> Optional[pathlib.Path]:
    """The ``hyperparams.yaml`` of the run whose checkpoints (or checkpoint) folder this is: the nearest
    folder above it that holds one beside a ``command.txt`` (an experiment folder), or None."""
    folder = pathlib.Path(checkpoints).resolve()
    for candidate in [folder, *folder.parents][: levels + 1]:
        if (candidate / "hyperparams.yaml").is_file() and (candidate / "command.txt").is_file():
            return candidate / "hyperparams.yaml"
    return None


def int_values(text: str, where: str) -> dict:
    """``{key: {values}}`` of every key set to a plain whole number anywhere in the YAML ``text``."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        raise HparamsError(f"{where}: not readable YAML ({str(error).splitlines()[0]})") from None
    values: dict = {}
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(value, yaml.ScalarNode) and value.tag == _INT:
                    values.setdefault(key.value, set()).add(int(value.value.replace("_", ""), 0))
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return values


def adapt_sizes(inference_text: str, run_text: str, where: str) -> tuple:
    """``(text, changed, ambiguous)``: ``inference_text`` with its top-level whole numbers taken from the run
    (see the module docstring); ``changed`` maps each key to ``(old, new)``, ``ambiguous`` a key to the run's
    several values."""
    import yaml

    root = yaml.compose(inference_text, Loader=yaml.SafeLoader)
    run_values = int_values(run_text, where)
    changed, ambiguous = {}, {}
    for key, value in root.value if isinstance(root, yaml.MappingNode) else []:
        if not (isinstance(value, yaml.ScalarNode) and value.tag == _INT) or key.value not in run_values:
            continue
        old, found = int(value.value.replace("_", ""), 0), run_values[key.value]
        if len(found) > 1:
            ambiguous[key.value] = sorted(found)
            continue
        new = next(iter(found))
        if new != old:
            pattern = re.compile(rf"^({re.escape(key.value)}:[ \t]*){re.escape(value.value)}(?=[ \t]*(#|$))",
                                 re.MULTILINE)
            inference_text, count = pattern.subn(rf"\g<1>{new}", inference_text, count=1)
            if count:
                changed[key.value] = (old, new)
    return inference_text, changed, ambiguous
