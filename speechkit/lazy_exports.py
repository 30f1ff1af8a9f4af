"""A package's names imported on first use: a module ``__getattr__`` built from a table.

``import speechkit`` or ``import speechkit.data`` then stays light (no torch for the command line's
``--help``), while ``speechkit.data.PaddedBatch`` still works. Each entry names the module defining the
attribute: ``"pkg.module"`` (same name there), ``("pkg.module", "other_name")``, or ``("pkg.module", None)``
for the module itself. A module that is not there (an optional part left out) makes the attribute missing
(``AttributeError``, so ``hasattr`` answers False); an error inside an existing module propagates as is.

Example:
    >>> __getattr__ = lazy_exports("speechkit", {"Stage": "speechkit.stage"})
    >>> __getattr__("Stage").TRAIN.value
    'train'
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional, Union

Target = Union[str, "tuple[str, Optional[str]]"]


def lazy_exports(package: str, names: Mapping[str, Target],
                 submodules: Iterable[str] = ()) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``names`` maps an attribute to where it is defined; each of
    ``submodules`` is ``package.<name>`` itself."""
    submodules = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        target = names[name]
        module_name, attribute = target if isinstance(target, tuple) else (target, name)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise
            raise AttributeError(f"{package}.{name} is not available: {error}") from None
        return module if attribute is None else getattr(module, attribute)

    return __getattr__
