"""The import graph of `src/onceflow` has no cycles.

Built from the source with `ast`: every `import` and `from ... import` counts, at module level,
inside functions (a deferred import is how a cycle hides) and under `if TYPE_CHECKING:` (a
type-only import still says which layer knows which). `from package import name` points at
the submodule `package.name` when there is one, else at the package. A package's
`__init__.py` importing its own submodules is not a cycle by itself; only explicit edges count.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, name: str, modules: set[str]) -> set[str]:
    """The onceflow modules `path` (module `name`) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in (SRC / "onceflow").rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, name, modules) for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_is_read():
    graph = import_graph()
    assert "onceflow.broker.server" in graph
    assert "onceflow.log.manager" in graph["onceflow.broker.state"]


def test_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles in src/onceflow:\n" + "\n".join(
        " <-> ".join(component) for component in found
    )


def package_graph(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The imports between the parts of `package`: each of its own modules, and each of its
    subpackages taken whole (with everything below it). An `__init__.py` importing from its
    own subpackages does not count, as in `import_graph`."""
    packages = {m for m in graph if (SRC / m.replace(".", "/") / "__init__.py").exists()}

    def part(module: str) -> str:
        return package + "." + module[len(package) + 1 :].split(".")[0]

    parts: dict[str, set[str]] = {}
    for module, imported in graph.items():
        if not module.startswith(package + "."):
            continue
        source = part(module)
        for target in imported:
            if not target.startswith(package + ".") or part(target) == source:
                continue
            if module in packages and target.startswith(module + "."):
                continue
            parts.setdefault(source, set()).add(part(target))
            parts.setdefault(part(target), set())
    return parts


def test_package_graph_takes_subpackages_whole():
    graph = {
        "p": set(),
        "p.config": {"p.net.security"},
        "p.net": set(),
        "p.net.security": set(),
        "p.net.network": {"p.config"},
    }
    assert package_graph(graph, "p") == {"p.config": {"p.net"}, "p.net": {"p.config"}}


def test_no_import_cycles_between_subpackages():
    """No loop through a package's modules and subpackages (client.config -> client.net ->
    client.config, client.consumer -> client.producer -> ...): each subpackage is a layer."""
    graph = import_graph()
    packages = sorted(m for m in graph if (SRC / m.replace(".", "/") / "__init__.py").exists())
    found = [
        f"{package}: " + " <-> ".join(component)
        for package in packages
        for component in cycles(package_graph(graph, package))
    ]
    assert not found, "import cycles between the parts of a package:\n" + "\n".join(found)
