"""Every code block of README.md and docs/*.md runs as written: bash and Python blocks are executed, YAML
blocks are built by the hyperparameter loader, JSON blocks are parsed.

Each page runs in a folder of its own, in the order of its blocks (the Python blocks of a page share one
namespace, as a reader's session would), with ``recipes/``, ``templates/``, ``tools/`` and ``benchmarks/``
of this repository linked in and, where the page uses ``data/corpus``, the built-in corpus at its tiny size.
How a block runs (tiny settings, files it is saved as, what it assumes exists) and why a block cannot run
here are said in the page itself, by the ``doc-test`` markers of :mod:`tests.helpers.doc_blocks`; run
``pytest tests/docs -rsx`` to see the list of blocks left out and why.
"""

from __future__ import annotations

import contextlib
import doctest
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from speechkit.experiment.hparams import load_hparams
from tests.helpers.doc_blocks import RUNNABLE, command_lines, read_blocks
from tests.helpers.processes import REPO, clean_env

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCKS = [block for page in PAGES for block in read_blocks(page)]
LINKED = ("recipes", "templates", "tools", "benchmarks", "Makefile")
COMMAND_TIMEOUT_S = 300


def _block_id(block) -> str:
    return f"{block.where}-{block.lang or 'output'}"


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus") / "corpus"
    _bash(f"python -m speechkit corpus {folder} --size tiny", folder.parent, "tiny corpus")
    return folder


_pages: dict = {}


@pytest.fixture
def page_state(request, tmp_path_factory):
    """The folder and Python namespace of the page of the current block (made on its first block)."""
    block = request.node.callspec.params["block"]
    if block.page not in _pages:
        folder = tmp_path_factory.mktemp(block.page.stem)
        for name in LINKED:
            (folder / name).symlink_to(REPO / name)
        if "data/corpus" in block.page.read_text():
            (folder / "data").mkdir()
            (folder / "data" / "corpus").symlink_to(request.getfixturevalue("tiny_corpus"))
        _pages[block.page] = {"folder": folder, "namespace": {"__name__": "__doc__"}}
    return _pages[block.page]


def _runs_commands(page) -> bool:
    return any((block.lang == "bash" and not block.skip) or block.run
               for block in BLOCKS if block.page == page)


# A page whose blocks start processes is `slow` as a whole: its later blocks use what the earlier ones made.
PARAMS = [pytest.param(block, id=_block_id(block),
                       marks=[pytest.mark.slow] if _runs_commands(block.page) else []) for block in BLOCKS]


@pytest.mark.parametrize("block", PARAMS)
def test_block_runs(block, page_state):
    if block.lang not in RUNNABLE:
        assert not _looks_like_a_command(block.code), (
            f"{block.where}: a block without a language (or `text`) is output, but this one reads like a "
            "command: give it its language (```bash) so that it runs")
        pytest.skip("output, not code")
    folder, namespace = page_state["folder"], page_state["namespace"]
    if block.skip:
        if block.lang == "bash":
            _check_named_files(command_lines(block.code), folder, block.where)
        pytest.skip(f"{block.where}: {block.skip}")
    try:
        _run(block, folder, namespace)
    except Exception as error:
        if block.pending:
            pytest.xfail(f"{block.where}: pending ({block.pending}): {type(error).__name__}: {error}")
        raise
    for regex, why in block.skip_lines:
        left_out = [line for line in command_lines(block.code) if regex.search(line)]
        assert left_out, f"{block.where}: skip-lines /{regex.pattern}/ matches no command"
        _check_named_files(left_out, folder, block.where)
        print(f"{block.where}: left out ({why}): {' | '.join(left_out)}")


def _run(block, folder: Path, namespace: dict) -> None:
    code = block.prepared(block.code)
    if block.file:
        path = folder / block.file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    if block.lang == "python":
        for setup in block.setup:
            _exec(setup, folder, namespace, f"{block.where} (setup)")
        if not block.file:
            _exec(code, folder, namespace, block.where)
    elif block.lang == "bash":
        for setup in block.setup:
            _bash(setup, folder, f"{block.where} (setup)")
        if not block.file:
            lines = [line for line in command_lines(code)
                     if not any(regex.search(line) for regex, _ in block.skip_lines)]
            _bash("\n".join(lines), folder, block.where)
    elif block.lang == "yaml":
        path = folder / (block.file or f"block-{block.line}.yaml")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(block.setup) + code)
        with _cwd(folder):
            load_hparams(path)
    elif block.lang == "json":
        _parse_json(code, block.where)
    for command in block.run:
        _bash(command, folder, f"{block.where} (run)")


def _exec(code: str, folder: Path, namespace: dict, where: str) -> None:
    with _cwd(folder):
        if code.lstrip().startswith(">>>"):
            parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(
                optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
            test = parser.get_doctest(code, namespace, where, where, 0)
            failures = []
            runner.run(test, out=failures.append, clear_globs=False)
            assert runner.failures == 0, "".join(failures)
        else:
            try:
                exec(compile(code, where, "exec"), namespace)
            finally:
                _unregister(namespace["__name__"])


def _unregister(module_name: str) -> None:
    """Take out of speechkit's registries what a page's code registered (the tests after it see none)."""
    from speechkit.jobs.registry import TASKS
    from speechkit.pretrained.registry import INTERFACES

    for registry in (TASKS, INTERFACES):
        for name in [name for name, cls in registry.items() if getattr(cls, "__module__", "") == module_name]:
            del registry[name]


def _bash(code: str, folder: Path, where: str) -> None:
    env = clean_env()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    try:
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=folder, env=env,
                                capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired as error:
        raise AssertionError(f"{where}: still running after {COMMAND_TIMEOUT_S} s:\n{code}\n"
                             f"{error.stdout or ''}{error.stderr or ''}") from None
    assert result.returncode == 0, (f"{where}: exit status {result.returncode}:\n{code}\n--- stdout\n"
                                    f"{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}")


RECIPE_FOLDERS = [script.parent for pattern in ("recipes/*/*/train.py", "templates/*/*/train.py")
                  for script in REPO.glob(pattern)]
_SCRIPT_OR_CONFIG = re.compile(r"[\w./-]+\.(py|yaml|sbatch|sh)")


def _check_named_files(lines: list, folder: Path, where: str) -> None:
    """The scripts and YAML files named by a command that is not run exist (relative to the repository, the
    page's folder, a ``cd`` before it, the script before them, ``recipes/X/train.py hparams/a.yaml``, or a
    recipe's folder)."""
    base, missing = Path("."), []
    for line in lines:
        words = shlex.split(line, comments=True)
        if words[:1] == ["cd"] and len(words) > 1:
            base = base / words[1]
            continue
        if "pip" in words:  # package names (ruamel.yaml), not files
            continue
        script_dir = Path(".")
        for word in words:
            if "$" in word or "<" in word or not _SCRIPT_OR_CONFIG.fullmatch(word):
                continue
            candidates = [root / place / word for root in (REPO, folder) for place in (base, script_dir)]
            candidates += [recipe / word for recipe in RECIPE_FOLDERS]  # `hparams/x.yaml` of some recipe
            if not any(candidate.exists() for candidate in candidates):
                missing.append(word)
            elif word.endswith(".py"):
                script_dir = base / Path(word).parent
    assert not missing, f"{where}: names files that do not exist: {', '.join(missing)}"


def _parse_json(code: str, where: str) -> None:
    try:
        json.loads(code)
    except json.JSONDecodeError:
        for number, line in enumerate(code.splitlines(), 1):  # JSON lines
            if line.strip():
                try:
                    json.loads(line)
                except json.JSONDecodeError as error:
                    raise AssertionError(f"{where}, line {number} of the block: {error}") from None


@contextlib.contextmanager
def _cwd(folder: Path):
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def _looks_like_a_command(code: str) -> bool:
    first = code.lstrip().split(None, 1)[0] if code.strip() else ""
    return first in ("speechkit", "python", "torchrun", "pip", "bash", "srun", "sbatch", "make", "cd")


def test_skips_name_a_category_and_covered_blocks_name_an_existing_test():
    """The list of blocks left out stays short, each with a reason; `covered` names the test that runs it."""
    skipped = [block for block in BLOCKS if block.lang in RUNNABLE and block.skip]
    for block in skipped:
        if block.skip.startswith("covered:"):
            named = [word.strip("`.,;()") for word in block.skip.split()
                     if word.startswith(("tests/", "`tests/"))]
            assert named and all((REPO / name.split("::")[0]).exists() for name in named), block.where
    print("\n".join(f"{block.where} [{block.lang}] {block.skip}" for block in skipped))
    runnable = [block for block in BLOCKS if block.lang in RUNNABLE]
    # Blocks whose commands run in another test cost nothing here; the others are not checked at all.
    unchecked = [block for block in skipped if not block.skip.startswith("covered:")]
    assert len(unchecked) <= len(runnable) // 4, "more than a quarter of the code blocks run nowhere"
