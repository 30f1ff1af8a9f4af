"""A package's names imported on first use: each kind of entry, and the errors a user can meet."""
from __future__ import annotations

import sys

import pytest

import speechkit
from speechkit.lazy_exports import lazy_exports


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A real package on sys.path: ``lazypkg.heavy`` (a class), ``lazypkg.broken`` (imports a missing
    module), and no ``lazypkg.absent``."""
    root = tmp_path / "lazypkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "heavy.py").write_text("class Model:\n    pass\n\ndef build():\n    return Model()\n")
    (root / "broken.py").write_text("import a_module_nobody_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "lazypkg"
    for name in [m for m in sys.modules if m == "lazypkg" or m.startswith("lazypkg.")]:
        del sys.modules[name]


def test_each_kind_of_entry_resolves_on_first_use(package):
    getattr_ = lazy_exports(package, {"Model": "lazypkg.heavy", "make": ("lazypkg.heavy", "build"),
                                      "heavy_module": ("lazypkg.heavy", None)}, submodules={"heavy"})
    assert "lazypkg.heavy" not in sys.modules
    assert getattr_("Model").__name__ == "Model"
    assert "lazypkg.heavy" in sys.modules
    assert type(getattr_("make")()).__name__ == "Model"
    assert getattr_("heavy_module") is sys.modules["lazypkg.heavy"] is getattr_("heavy")


def test_an_unknown_name_or_a_missing_module_is_a_missing_attribute(package):
    getattr_ = lazy_exports(package, {"Gone": "lazypkg.absent"})
    with pytest.raises(AttributeError, match="module 'lazypkg' has no attribute 'Nope'"):
        getattr_("Nope")
    with pytest.raises(AttributeError, match="lazypkg.Gone is not available"):
        getattr_("Gone")


def test_a_failing_import_inside_an_existing_module_propagates(package):
    getattr_ = lazy_exports(package, {"Thing": "lazypkg.broken"})
    with pytest.raises(ModuleNotFoundError, match="a_module_nobody_installed"):
        getattr_("Thing")


def test_the_packages_use_it():
    assert speechkit.Checkpointer.__name__ == "Checkpointer"
    assert speechkit.distributed.__name__ == "speechkit.distributed"
    assert not hasattr(speechkit, "no_such_name")
