"""The package's imports go one way: no module of ``ddrl`` imports, even inside a function, a
module that imports it back (directly or through others). A circle means neither module can
be read, moved or tested without the other."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "cte-power" / "ddrl"


def import_graph() -> dict[str, set[str]]:
    modules = {}
    for path in ROOT.rglob("*.py"):
        if "__pycache__" not in path.parts:
            parts = ("ddrl", *path.relative_to(ROOT).with_suffix("").parts)
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        # a package's __init__ is run by importing any of its modules: not an edge of its own
        graph[name] = {
            m for m in found if m in modules and m != name and not name.startswith(m + ".")
        }
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_two_modules_of_the_package_import_each_other():
    assert circles(import_graph()) == []


def test_a_circle_is_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_sagemaker_packages_map_names_its_modules_and_only_them():
    """sagemaker_rl/__init__.py's list is the map of the SageMaker side: every module in it, none
    that does not exist."""
    import re

    package = ROOT.parents[1] / "aws-sagemaker" / "rl-ray-pybullet" / "common" / "sagemaker_rl"
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
    listed = set(re.findall(r"^- ``(\w+)``|; ``(\w+)``:", doc, re.M))
    listed = {name for pair in listed for name in pair if name}
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    assert listed == modules, f"listed only: {listed - modules}; not listed: {modules - listed}"
