"""``speechkit new-recipe TEMPLATE DEST``: copy a recipe template to a new folder, ready to run from there.

Templates ship inside the package (``speechkit/templates/``, copied there when a wheel is built); a checkout
(an editable install) reads the repository's ``templates/`` folder. A template refers to its own files with
relative paths; those stay valid after the copy. A path that leaves the template (``../../../data/corpus``
from inside ``templates/speech_recognition/ASR``, or ``../Tokenizer/...`` when only ``ASR`` is copied) is
rewritten to point inside the copy (``DEST/data/corpus``, ``DEST/Tokenizer/...``, written relative to the
file so the copy can move), so that whatever the copy writes (a corpus, a tokenizer) stays in it and never in
the installed package or the checkout. ``!include`` paths, only read, point back at the template's file.
``templates/<name>`` in commands (README, shell scripts) becomes ``DEST``.

A relative path is read the way the recipe reads it: from the recipe folder (the nearest folder with a
``train.py``, where ``python train.py hparams/x.yaml`` runs), except on ``!include`` lines, which hyperpyyaml
resolves from the including file's folder.

Example:
    $ speechkit new-recipe --list
    $ speechkit new-recipe speech_recognition my_asr
    $ cd my_asr/ASR && python train.py hparams/train.yaml
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Optional

from speechkit.errors import SpeechkitError

#: Files whose text is scanned for paths; anything else is copied byte for byte.
TEXT_SUFFIXES = (".yaml", ".yml", ".py", ".md", ".sh", ".txt", ".json", ".cfg")
#: Never copied: caches and the outputs of a template run in place.
IGNORED_NAMES = ("__pycache__", "results", ".pytest_cache", "*.pyc")

# A relative path that climbs out of its folder: one or more "../" then path characters.
_CLIMBING_PATH = re.compile(r"(?<![\w./-])((?:\.\./)+[\w.\-/]*)")


class TemplateError(SpeechkitError):
    """A template is unknown, or the destination cannot be written."""


def templates_root() -> Path:
    """Where the templates are: ``SPEECHKIT_TEMPLATES`` when set, else the package's own ``templates/``
    (a wheel), else the ``templates/`` folder beside the package (a checkout, an editable install)."""
    override = os.environ.get("SPEECHKIT_TEMPLATES")
    if override:
        return Path(override).resolve()
    package = Path(__file__).resolve().parent
    shipped = package / "templates"
    return shipped if shipped.is_dir() else (package.parent / "templates").resolve()


def available_templates(root: Optional[Path] = None) -> list:
    """Names accepted by :func:`copy_template`: each template folder and each of its sub-folders with a
    ``train.py`` (``speech_recognition``, ``speech_recognition/ASR``, ...), sorted."""
    root = templates_root() if root is None else Path(root)
    names = []
    for folder in template_folders(root):
        names.append(folder.name)
        recipes = [sub for sub in sorted(folder.iterdir()) if (sub / "train.py").is_file()]
        names += [f"{folder.name}/{sub.name}" for sub in recipes]
    return names


def template_folders(root: Path) -> list:
    """The templates themselves (the folders of ``root``), without their recipe sub-folders."""
    if not root.is_dir():
        return []
    return [p for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith((".", "_"))]


def no_templates_hint(root: Path) -> str:
    return (f"none: no templates folder at {root} (this installation lacks its templates: reinstall "
            "speechkit from a wheel or a checkout, or set SPEECHKIT_TEMPLATES to a checkout's templates "
            "folder)")


def copy_template(name: str, dest: str | Path, root: Optional[Path] = None, force: bool = False) -> Path:
    """Copy template ``name`` to ``dest`` and rewrite the paths that pointed outside it.

    Args:
        name: a name from :func:`available_templates`, e.g. ``"speech_recognition"``.
        dest: the new folder; it must not exist (or be empty) unless ``force``.
        root: the templates folder (default: :func:`templates_root`).
        force: copy into an existing, non-empty folder, overwriting files of the same name.

    Returns:
        The absolute destination folder.

    Example:
        >>> folder = copy_template("speech_recognition", "my_asr")
        >>> folder
        PosixPath('.../my_asr')
        >>> sorted(path.name for path in folder.iterdir())
        ['ASR', 'LM', 'README.md', 'Tokenizer']
    """
    root = templates_root() if root is None else Path(root).resolve()
    source = (root / name).resolve()
    known = available_templates(root)
    if name not in known or not source.is_dir():
        listing = ", ".join(known) if known else no_templates_hint(root)
        raise TemplateError(f"unknown template {name!r}; available templates: {listing}")
    dest = Path(dest).expanduser().resolve()
    if dest == source or source in dest.parents:
        raise TemplateError(f"destination {dest} is inside the template {source}")
    if dest.exists() and any(dest.iterdir()) and not force:
        raise TemplateError(f"destination {dest} exists and is not empty (pass --force to copy into it)")
    try:
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns(*IGNORED_NAMES), dirs_exist_ok=True)
        for path in sorted(dest.rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES:
                original = source / path.relative_to(dest)
                text = path.read_text(encoding="utf-8")
                rewritten = "".join(
                    rewrite_paths(line, _base_dir(original, line, source), source, dest, template_name=name,
                                  inside_copy="!include" not in line)
                    for line in text.splitlines(keepends=True)
                )
                if rewritten != text:
                    path.write_text(rewritten, encoding="utf-8")
    except OSError as error:
        raise TemplateError(f"cannot copy template {name!r} to {dest}: {error}") from error
    return dest


def _base_dir(file: Path, line: str, source: Path) -> Path:
    """The folder a relative path on ``line`` of ``file`` is resolved from (see the module docstring)."""
    if "!include" in line:
        return file.parent
    for folder in (file.parent, *file.parent.parents):
        if (folder / "train.py").is_file():
            return folder
        if folder == source:
            break
    return file.parent


def rewrite_paths(text: str, file_dir: Path, source: Path, dest: Path, template_name: str = "",
                  inside_copy: bool = True) -> str:
    """Rewrite the paths in one template file's text so that the copy at ``dest`` runs.

    Args:
        text: the file's content.
        file_dir: the folder relative paths start from, inside the template.
        source: the template's folder; paths resolving inside it are kept as they are.
        dest: the copy's folder, written where the text names ``templates/<template_name>``.
        template_name: the template's name as the text spells it in commands.
        inside_copy: a path leaving the template becomes the same path inside the copy (its leading
            ``../`` dropped), relative to the copy of ``file_dir``; with False (a file only read, an
            ``!include``) it becomes the absolute path of the template's file.

    Example:
        >>> rewrite_paths("data: ../../data", Path("/r/templates/x/ASR"), Path("/r/templates/x"), Path("/d"))
        'data: ../data'
        >>> rewrite_paths("a: !include:../../b.yaml", Path("/r/t/x/ASR"), Path("/r/t/x"), Path("/d"),
        ...               inside_copy=False)
        'a: !include:/r/t/b.yaml'
    """

    def climbing(match: re.Match) -> str:
        relative = match.group(1)
        target = Path(os.path.normpath(file_dir / relative))
        if target == source or source in target.parents:
            return relative  # stays inside the template: valid in the copy too
        trailing = "/" if relative.endswith("/") else ""
        if not inside_copy:
            return str(target) + trailing
        parts = Path(os.path.relpath(target, source)).parts
        in_copy = dest.joinpath(*[part for part in parts if part != ".."])
        copy_dir = dest / file_dir.relative_to(source) if source in (file_dir, *file_dir.parents) else dest
        return os.path.relpath(in_copy, copy_dir) + trailing

    text = _CLIMBING_PATH.sub(climbing, text)
    if template_name:
        text = re.sub(rf"(?<![\w/])templates/{re.escape(template_name)}(?![\w])", str(dest), text)
    return text
