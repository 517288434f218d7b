"""ARCHITECTURE.md stays the map of the code, and exclust's modules import each other without cycles.

Static checks on the source tree (no module is imported): the module map names every module
under exclust/ and nothing else; no import statement, at module level or inside a function,
closes a cycle among exclust modules; scipy.ndimage is imported by exclust/datasets/ only.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "exclust"
MAP = ROOT / "ARCHITECTURE.md"

def module_files() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py")}


def mapped_modules() -> list[str]:
    """The module column of the map's table: one `exclust/...py` per row."""
    text = MAP.read_text(encoding="utf-8")
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(exclust/[\w/]+\.py)` \|", section, flags=re.M)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path) -> set[str]:
    """Every absolute module path an import statement of ``path`` names (``from a import b`` gives a.b)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    """exclust module -> the exclust modules it imports (a name resolves to its longest module prefix)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        targets = {resolve(n) for n in imported_names(path) if n.split(".")[0] == "exclust"}
        graph[name] = {t for t in targets if t and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_is_in_the_map():
    missing = sorted(module_files() - set(mapped_modules()))
    assert not missing, f"add a line for each to the module map of ARCHITECTURE.md: {missing}"


def test_every_module_in_the_map_exists():
    mapped = mapped_modules()
    duplicated = sorted({m for m in mapped if mapped.count(m) > 1})
    assert not duplicated, f"named twice in the module map: {duplicated}"
    gone = sorted(set(mapped) - module_files())
    assert not gone, f"the module map names modules that do not exist: {gone}"


def test_no_import_cycle_among_exclust_modules():
    found = sorted(sorted(c) for c in cycles(import_graph()))
    assert not found, f"exclust modules import each other in a cycle: {found}"


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_scipy_ndimage_stays_in_the_datasets():
    offenders = sorted(
        module_name(p) for p in PACKAGE.rglob("*.py")
        if "datasets" not in p.relative_to(PACKAGE).parts
        and any(n == "scipy.ndimage" or n.startswith("scipy.ndimage.") for n in imported_names(p))
    )
    assert not offenders, f"only exclust/datasets/ may import scipy.ndimage: {offenders}"
