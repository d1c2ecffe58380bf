"""The package's modules import each other in one direction only.

Every import counts: module level, function level and ``if TYPE_CHECKING:`` alike (read with
``ast``, nothing is imported), so a module low in the layering (protocol/, plans/, worker/, the
feature modules) never names one above it (the ``DeltaTable`` facade, the package's
``__init__``). A failure names the cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "delta_connect_py"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source. ``from a import b``
    names ``a.b`` when that is a module, else ``a``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, name, path.name == "__init__.py")
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in modules else source)
    return {module for module in found if module in modules and module != name}


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None (depth-first, colours)."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack = [(start, iter(sorted(graph[start])))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                return [*path[path.index(child) :], child]
            elif child not in done:
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
                on_path.add(child)
    return None


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The reader finds module-level, function-level, relative and TYPE_CHECKING imports (a
    graph that missed them could pass on a package full of cycles)."""
    modules = {f"{PACKAGE}.a": Path("a.py"), f"{PACKAGE}.b": Path("b.py"), PACKAGE: Path()}
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from delta_connect_py.b import X\n"
        "def f():\n    from . import b\n    import delta_connect_py\n"
    )
    probe = tmp_path / "a.py"
    probe.write_text(source, encoding="utf-8")
    found = imported_modules(f"{PACKAGE}.a", probe, modules)
    assert found == {f"{PACKAGE}.b", PACKAGE}
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_package_modules_import_each_other_without_cycles() -> None:
    graph = import_graph()
    assert len(graph) > 30, "the package's modules were not found"
    cycle = find_cycle(graph)
    if cycle is not None:
        pytest.fail("import cycle: " + " -> ".join(cycle))


def test_lower_layers_never_import_the_facade() -> None:
    """protocol/, plans/ and worker/ name no feature module, Snapshot or DeltaTable."""
    graph = import_graph()
    upper = {f"{PACKAGE}.{name}" for name in ("table", "snapshot", "cdf", "checkpoints")}
    upper |= {name for name in graph if name.startswith(f"{PACKAGE}.cdf.")}
    for name, imports in graph.items():
        if name.split(".")[1:2] in (["protocol"], ["plans"], ["worker"]):
            assert not imports & (upper | {PACKAGE}), f"{name} imports {imports & upper}"
