"""Import a script of the repository (a benchmark, a tool, a recipe's train.py) as a module, to call its
functions in-process."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Optional


def load_script(path: Path, name: Optional[str] = None, search_path: Optional[Path] = None) -> ModuleType:
    """Execute ``path`` as module ``name`` (default: the file's stem), registered in ``sys.modules`` so that
    dataclasses and pickling find it; ``search_path`` is on ``sys.path`` while it imports (for its own
    neighbours, e.g. a recipe's ``prepare.py``).

    Example:
        >>> benchmark = load_script(REPO / "benchmarks" / "asr_train.py")  # doctest: +SKIP
    """
    name = name or Path(path).stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    if search_path is not None:
        sys.path.insert(0, str(search_path))
    try:
        spec.loader.exec_module(module)
    finally:
        if search_path is not None:
            sys.path.remove(str(search_path))
    return module
