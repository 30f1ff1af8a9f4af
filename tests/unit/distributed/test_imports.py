"""The modules of speechkit.distributed import each other without a cycle, counting imports inside functions.

A cycle (launch -> ops -> runtime -> launch) works only as long as one edge stays a lazy import inside a
function; this keeps the graph a hierarchy: env, processes and failfast at the bottom, runtime and ops above
them, the launcher beside them (it needs neither the context nor the collectives).
"""
from __future__ import annotations

import ast
from pathlib import Path

import speechkit.distributed

PACKAGE = "speechkit.distributed"


def import_graph() -> dict:
    folder = Path(speechkit.distributed.__file__).parent
    modules = {path.stem for path in folder.glob("*.py") if path.stem != "__init__"}
    graph = {}
    for name in modules:
        edges = set()
        for node in ast.walk(ast.parse((folder / f"{name}.py").read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            edges |= {t.split(".")[2] for t in targets if t.startswith(PACKAGE + ".")} & modules
        graph[name] = edges - {name}
    return graph


def find_cycle(graph: dict):
    state: dict = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path + [node, nxt]
            if nxt not in state:
                found = visit(nxt, path + [node])
                if found:
                    return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [])
            if found:
                return found
    return None


def test_no_import_cycle_in_the_distributed_package():
    graph = import_graph()
    assert {"launch", "ops", "runtime"} <= set(graph)
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_launcher_does_not_depend_on_the_collectives():
    assert not {"ops", "runtime"} & import_graph()["launch"]
