"""Write the API reference's pages: ``index.rst`` and one page per package of ``speechkit/`` (generated, not
kept in git), each module an ``automodule`` in the order of the layers (docs/design.md)."""

from __future__ import annotations

from pathlib import Path

#: Packages in the order of the layers; the modules of speechkit/ itself come first, others after these.
ORDER = ("errors", "distributed", "data", "features", "augment", "nn", "tokenizers", "metrics", "models",
         "decoding", "engine", "pretrained", "export", "streaming", "jobs", "serve", "corpus")

INTRO = """\
speechkit API reference
=======================

Generated from the docstrings by Sphinx (autodoc, with napoleon for the Google-style sections). The user guide
is the Markdown in ``docs/``; this reference lists every module, class and function with its arguments, tensor
shapes and examples, one page per package in the order of the layers (``docs/design.md``).

Build it with ``python -m sphinx -b html docs/api build/api`` (Sphinx is in the ``dev`` extra) and open
``build/api/index.html``. ``tests/docs/test_api_reference.py`` builds it with warnings as errors, so a
docstring that does not render fails the tests. The pages are written by ``docs/api/api_pages.py`` at each
build, from the modules on disk: a new module needs no listing.

Why Sphinx: its autodoc and napoleon extensions, both part of Sphinx itself, read the Google-style docstrings
the code already has (``Args:``, ``Returns:``, ``Raises:``, ``Example:``) with no further plugin, the build
needs no network, and it is the tool behind the references of PyTorch, torchaudio and SpeechBrain, so the
result looks the way their users expect. MkDocs would need mkdocstrings and a theme on top.

.. toctree::
   :maxdepth: 1

"""


def modules(root: Path) -> list:
    """Every module of the ``speechkit`` package under ``root`` (the repository), ``__main__`` left out."""
    found = []
    for path in sorted((root / "speechkit").rglob("*.py")):
        if path.name == "__main__.py" or "__pycache__" in path.parts:
            continue
        parts = path.relative_to(root).with_suffix("").parts
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(set(found))


def write_pages(folder: str) -> list:
    """Write ``index.rst`` and ``_generated/<package>.rst`` into ``folder``; return the package names."""
    folder_path = Path(folder)
    root = folder_path.parents[1]
    groups: dict = {}
    for name in modules(root):
        parts = name.split(".")
        in_package = len(parts) > 2 or (len(parts) == 2 and (root / "speechkit" / parts[1]).is_dir())
        package = parts[1] if in_package else "speechkit"
        groups.setdefault(package, []).append(name)
    others = sorted(set(groups) - set(ORDER) - {"speechkit"})
    names = ["speechkit"] + [p for p in ORDER if p in groups] + others
    out = folder_path / "_generated"
    out.mkdir(exist_ok=True)
    for package in names:
        title = "speechkit (top level)" if package == "speechkit" else f"speechkit.{package}"
        lines = [title, "=" * len(title), ""]
        for name in groups[package]:
            lines += [name, "-" * len(name), "", f".. automodule:: {name}", "   :ignore-module-all:", ""]
        _write_if_changed(out / f"{package}.rst", "\n".join(lines))
    _write_if_changed(folder_path / "index.rst", INTRO + "".join(f"   _generated/{p}\n" for p in names))
    return names


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:  # an unchanged page is not rebuilt
        path.write_text(text)
