"""speechkit's import graph: no circles, every import pointing down the layers of docs/design.md, and every
module importable first, alone.

The graph is read from the source (every ``import`` statement, those inside functions included: an import
deferred to call time is still a dependency), so the check is exact and fast. Importing ``a.b.c`` runs the
``__init__`` of ``a`` and ``a.b`` as well, so an import also depends on the imported module's packages
(except those that hold the importing module: they are already being imported). A graph without circles
imports the same way whatever the order; the subprocess check then confirms it on the real interpreter,
importing each package first in a fresh state, and all of them in two orders (one process: torch is loaded
once, speechkit's modules are dropped from ``sys.modules`` between tries).
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

from tests.helpers.processes import REPO, clean_env

PACKAGE = REPO / "speechkit"


def module_files() -> dict:
    """Dotted module name -> source file, for every module of speechkit."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _ancestors(name: str) -> list:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph(modules: dict) -> dict:
    """Module -> the set of speechkit modules its import statements (anywhere in the file) run."""
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module
                targets.add(source)
                targets.update(f"{source}.{alias.name}" for alias in node.names)  # `from pkg import module`
        edges = set()
        for target in targets:
            while target not in modules and "." in target:  # `from pkg.module import name` -> pkg.module
                target = target.rpartition(".")[0]
            if target not in modules or not target.startswith("speechkit"):
                continue
            own_packages = set(_ancestors(name)) | {name}
            edges.update(m for m in [*_ancestors(target), target] if m not in own_packages)
        graph[name] = edges
    return graph


def find_cycle(graph: dict):
    """One circle of the graph as a list of modules (first == last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def design_layers() -> dict:
    """Top-level package or module of speechkit -> its layer number, from docs/design.md's table."""
    layers = {}
    for line in (REPO / "docs" / "design.md").read_text(encoding="utf-8").splitlines():
        match = re.match(r"\|\s*(\d)\s*\|([^|]*)\|", line)
        if match:
            cell = re.sub(r"\([^)]*\)", "", match.group(2))  # "(`env`, `ops`, ...)" lists submodules
            for name in re.findall(r"`([\w/]+)`", cell):
                layers[name.rstrip("/")] = int(match.group(1))
    return layers


def _top(name: str) -> str:
    return name.split(".")[1] if "." in name else name


def test_graph_reader_sees_a_circle_and_the_package_edges():
    # The checks below are only as good as the reader: a deferred import closing a circle is found, and
    # importing a package's module depends on the package's __init__.
    graph = {"speechkit.a": {"speechkit.b"}, "speechkit.b": {"speechkit.c"}, "speechkit.c": {"speechkit.a"}}
    assert find_cycle(graph) == ["speechkit.a", "speechkit.b", "speechkit.c", "speechkit.a"]
    modules = module_files()
    graph = import_graph(modules)
    assert {"speechkit.nn", "speechkit.nn.masks"} <= graph["speechkit.features.filterbanks"]
    assert "speechkit.features.filterbanks" in graph["speechkit.features"]
    assert "speechkit.pretrained.evaluate" in graph["speechkit.commands.evaluate"]
    assert "speechkit.jobs.runner" in graph["speechkit.commands.infer"]  # imported inside a function


def test_speechkit_has_no_import_circle():
    cycle = find_cycle(import_graph(module_files()))
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_imports_point_down_the_layers_of_the_design():
    layers = design_layers()
    modules = module_files()
    unplaced = sorted({_top(m) for m in modules if m != "speechkit"} - set(layers))
    assert not unplaced, f"modules missing from docs/design.md's layer table: {unplaced}"
    upward = [f"{a} (layer {layers[_top(a)]}) imports {b} (layer {layers[_top(b)]})"
              for a, targets in import_graph(modules).items() if a != "speechkit"
              for b in sorted(targets) if b != "speechkit" and layers[_top(b)] > layers[_top(a)]]
    assert not upward, "\n".join(upward)


def test_export_sits_above_pretrained_so_an_import_back_up_is_caught():
    # export/ writes what pretrained/ runs: pretrained/ must never import it (not even through a callback's
    # module), which only a higher layer makes visible to the test above.
    layers = design_layers()
    assert layers["export"] > layers["pretrained"]
    graph = import_graph(module_files())
    assert not [(a, b) for a, targets in graph.items() if _top(a) == "pretrained"
                for b in targets if _top(b) == "export"]


_IMPORT_EACH_FIRST = r"""
import faulthandler, importlib, json, sys, traceback
faulthandler.dump_traceback_later(240, exit=True)  # a hang ends with every thread's stack, never silently
import torch  # noqa: F401  (loaded once: the tries below measure speechkit's own imports)
failures = {}
for order in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m == "speechkit" or m.startswith("speechkit.")]:
        del sys.modules[loaded]
    for name in order:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as error:
            if (error.name or "").startswith("speechkit"):
                failures[" then ".join(order)] = traceback.format_exc(limit=-3)
            # else an optional dependency this machine lacks; the static checks still cover the module
        except Exception:
            failures[" then ".join(order)] = traceback.format_exc(limit=-3)
# The registries alone in a fresh state: each lookup imports the module defining the entry.
for loaded in [m for m in sys.modules if m == "speechkit" or m.startswith("speechkit.")]:
    del sys.modules[loaded]
from speechkit.jobs.registry import SHIPPED_TASKS, make_task
from speechkit.pretrained.registry import SHIPPED_INTERFACES, interface_named
for name, module in SHIPPED_TASKS.items():
    if type(make_task(name)).__module__ != module:
        failures["task " + name] = type(make_task(name)).__module__
for name, module in SHIPPED_INTERFACES.items():
    found = interface_named(name, "hyperparams.yaml")
    if (found.__name__, found.__module__) != (name, module):
        failures["interface " + name] = f"{found.__module__}.{found.__name__}"
print(json.dumps(failures))
"""


def test_each_package_imports_first_and_each_registry_alone_finds_its_entries():
    names = set(module_files()) - {"speechkit.__main__"}  # importing it runs the command line
    packages = sorted({"speechkit." + _top(m) for m in names if m != "speechkit"})
    # Each package first and alone, and the modules of the registries and of the STFT (which used to close
    # circles) each first; then every package in one order and in the reverse order; then each registry
    # alone finds every shipped entry.
    entries = ["speechkit.jobs.tasks", "speechkit.jobs.audio_tasks", "speechkit.jobs.generate_task",
               "speechkit.pretrained.interfaces", "speechkit.pretrained.separation",
               "speechkit.pretrained.vocoder", "speechkit.pretrained.wav2vec2_features",
               "speechkit.nn.stft_loss", "speechkit.features.filterbanks"]
    orders = [[name] for name in packages + entries] + [packages, packages[::-1]]
    result = subprocess.run([sys.executable, "-c", _IMPORT_EACH_FIRST, json.dumps(orders)],
                            capture_output=True, text=True, timeout=300, env=clean_env(), cwd=REPO)
    assert result.returncode == 0, result.stderr[-6000:]
    failures = json.loads(result.stdout.strip().splitlines()[-1])
    assert not failures, "\n".join(f"{name}:\n{error}" for name, error in failures.items())
