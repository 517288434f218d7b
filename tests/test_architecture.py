"""ARCHITECTURE.md stays the map of the code, and the project's modules keep to their layers.

Static checks on exclust/ and flows/ (nothing is imported; an import inside a function counts):
the module map names every module under exclust/ and nothing else; no import cycle; scipy.ndimage
only in exclust/datasets/; kernels import nothing of the project but each other and stdlib-only
modules, and only kernels import numba; a module imports its own layer and those below; few
modules at the top, none long; a short longest chain of imports. Each checker takes the root of a
source tree, and each is shown to fail on a copy of the tree with one offending import added.
"""
from __future__ import annotations

import ast
import functools
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "exclust"
MAP = ROOT / "ARCHITECTURE.md"
SOURCE_DIRS = ("exclust", "flows")  # the project's modules: the package and the Prefect flows

def module_files() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py")}


def mapped_modules() -> list[str]:
    """The module column of the map's table: one `exclust/...py` per row."""
    text = MAP.read_text(encoding="utf-8")
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(exclust/[\w/]+\.py)` \|", section, flags=re.M)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_type_checking_block(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): imports for the type checker alone."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def run_time_nodes(tree: ast.AST):
    """Every node of ``tree`` as ast.walk gives them, but none under an ``if TYPE_CHECKING:``
    (its body never runs, so its imports make no layer edge or cycle; an ``else:`` still counts)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if is_type_checking_block(node):
            assert isinstance(node, ast.If)
            todo.extend(node.orelse)
            todo.append(node.test)
        else:
            todo.extend(ast.iter_child_nodes(node))


@functools.cache
def statements_of(text: str, package: tuple[str, ...]) -> tuple[tuple[str, int, str], ...]:
    """(absolute module path, line, statement) per name imported by the source ``text`` of a module
    of ``package``; cached by text, as every checker reads every module."""
    found = []
    for node in run_time_nodes(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: made absolute from the importer's package
                base = ".".join(package[: len(package) - node.level + 1] + ((base,) if base else ()))
            found.extend((f"{base}.{alias.name}", node) for alias in node.names)
    return tuple((name, node.lineno, ast.unparse(node)) for name, node in found)


def import_statements(path: Path, root: Path = ROOT) -> tuple[tuple[str, int, str], ...]:
    """(absolute module path, line, statement) for every name an import statement of ``path``
    names: ``from a import b`` gives a.b."""
    package = tuple(module_name(path, root).split("."))
    return statements_of(path.read_text(encoding="utf-8"), package if path.name == "__init__.py" else package[:-1])


def imported_names(path: Path, root: Path = ROOT) -> set[str]:
    """Every absolute module path an import statement of ``path`` names (``from a import b`` gives a.b)."""
    return {name for name, _, _ in import_statements(path, root)}


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every module of exclust/ and flows/ under ``root``."""
    return {module_name(p, root): p for d in SOURCE_DIRS for p in sorted((root / d).rglob("*.py"))}


@dataclass(frozen=True)
class Import:
    """One import statement naming one project module, for messages that point at it."""

    importer: str
    target: str  # the project module it resolves to
    name: str  # the name as written, made absolute
    where: str  # path:line
    statement: str

    def __str__(self) -> str:
        return f"{self.importer} imports {self.target} ({self.where}: `{self.statement}`)"


def project_imports(root: Path = ROOT) -> list[Import]:
    """Every import of a project module by a project module. A name resolves to its longest
    module prefix: ``from exclust.reference import base`` is exclust.reference.base, while
    ``from exclust.reference import KMeans`` is the package exclust.reference."""
    modules = project_modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    found = []
    for importer, path in modules.items():
        for name, line, statement in import_statements(path, root):
            target = resolve(name) if name.split(".")[0] in SOURCE_DIRS else None
            if target and target != importer:
                found.append(Import(importer, target, name, f"{path.relative_to(root).as_posix()}:{line}", statement))
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Project module -> the project modules it imports."""
    graph: dict[str, set[str]] = {name: set() for name in project_modules(root)}
    for i in project_imports(root):
        graph[i.importer].add(i.target)
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


# dataplane/parts.py sets the thread count numba's parallel kernels use on the calling thread
# (1 inside a Dask worker, whose threads already fill the cores); it compiles nothing, and may
# call these functions of numba and no others.
NUMBA_THREAD_CONTROL = {"exclust.dataplane.parts": {"get_num_threads", "set_num_threads"}}


def numba_uses(path: Path, root: Path = ROOT) -> set[str]:
    """The names of numba that ``path`` reads: ``numba.x`` attributes and ``from numba import x``."""
    used = {n.attr for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "numba"}
    return used | {name.partition(".")[2] for name in imported_names(path, root) if name.startswith("numba.")}


def imports_numba(path: Path, root: Path = ROOT) -> bool:
    return any(n == "numba" or n.startswith("numba.") for n in imported_names(path, root))


def kernels(root: Path = ROOT) -> set[str]:
    """The numba kernels: the modules that import numba, but for the thread control above."""
    return {m for m, p in project_modules(root).items() if imports_numba(p, root) and m not in NUMBA_THREAD_CONTROL}


def stdlib_only(root: Path = ROOT) -> set[str]:
    """Project modules that import nothing beyond the standard library (``tree.node_kinds``'s
    constants, ``errors``): importing one loads nothing a kernel should not. Not those that
    import modules by name at run time through importlib (the lazy names of ``exclust``)."""
    return {m for m, p in project_modules(root).items()
            if all(n.split(".")[0] in sys.stdlib_module_names - {"importlib"} for n in imported_names(p, root))}


def kernel_import_violations(imports: list[Import], kernel_modules: set[str], plain: set[str]) -> list[str]:
    """A kernel imports nothing of the project but other kernels and stdlib-only modules."""
    return [f"kernel {i}: a kernel imports only other kernels and stdlib-only modules"
            for i in imports if i.importer in kernel_modules and i.target not in kernel_modules | plain]


def check_kernel_imports(root: Path = ROOT) -> list[str]:
    return kernel_import_violations(project_imports(root), kernels(root), stdlib_only(root))


def check_numba_outside_kernels(root: Path = ROOT) -> list[str]:
    """Only kernels, named ``_*.py``, import numba; the thread control uses its named functions only."""
    found = []
    for module, path in project_modules(root).items():
        if module in NUMBA_THREAD_CONTROL:
            extra = numba_uses(path, root) - NUMBA_THREAD_CONTROL[module]
            if extra:
                found.append(f"{module} may use numba only to set its thread count, but uses {sorted(extra)}")
        elif imports_numba(path, root) and not path.name.startswith("_"):
            found.append(f"{module} imports numba but is not a kernel module named _*.py "
                         f"({path.relative_to(root).as_posix()})")
    return found


# Bottom-up; a module imports its own layer and the layers below, never above. What issue 18
# demands in so many words follows from the order and is checked by
# test_the_layer_order_forbids_what_the_issue_forbids: kernels import nothing but each other
# (rule 1); nothing below the job layer imports the jobs, the report or the CLI; the
# algorithms never import the job layer.
LAYERS = [
    ("exclust.errors",),
    ("exclust.dataplane",),
    ("exclust.sources", "exclust.outputs"),
    ("exclust.tree",),
    ("exclust.scoring",),
    ("exclust.estimator",),  # the estimator base scores a tree (TreeExplainer.score reads scoring)
    ("exclust.reference",),
    ("exclust.algorithms",),
    ("exclust.report",),
    ("exclust.jobs",),
    ("exclust.cli", "flows"),
]
JOBS = LAYERS.index(("exclust.jobs",))
# Beside the layers: data that exclust makes. It may import anything below the jobs; nothing
# but the CLI imports it (tests and bench/ do too, outside the checked tree).
DATASETS = "exclust.datasets"
DATASETS_IMPORTERS = {"exclust.cli"}
# exclust/__init__.py names the public names as strings, imported lazily: it is exempt as an
# importer. Importing it gives those lazy names, which reach every layer unseen by these
# checks, so the only name other modules may take from it is the version.
PACKAGE_ROOT = "exclust"
ROOT_NAMES_ALLOWED = {"exclust.__version__"}


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) for p in layer if within(module, p)), None)


def layer_violations(imports: list[Import], modules: set[str], kernel_modules: frozenset = frozenset()) -> list[str]:
    """Kernels are the bottom layer wherever their folder is (they sit beside the code they serve):
    their imports answer to the kernel rule alone."""
    found = [f"{m} is in no layer: place it in LAYERS of tests/test_architecture.py"
             for m in sorted(modules)
             if m != PACKAGE_ROOT and not within(m, DATASETS) and layer_of(m) is None]
    for i in imports:
        if i.importer == PACKAGE_ROOT or i.importer in kernel_modules:
            continue
        if i.target == PACKAGE_ROOT:
            if i.name not in ROOT_NAMES_ALLOWED:
                found.append(f"{i}: import the module that defines the name, not the package root's lazy names")
            continue
        source, target = layer_of(i.importer), layer_of(i.target)
        if within(i.target, DATASETS):
            if not within(i.importer, DATASETS) and i.importer not in DATASETS_IMPORTERS:
                found.append(f"{i}: only {sorted(DATASETS_IMPORTERS)} import {DATASETS}")
        elif within(i.importer, DATASETS):
            if target is None or target >= JOBS:
                found.append(f"{i}: {DATASETS} imports only what lies below the jobs")
        elif source is not None and target is not None and target > source:
            found.append(f"{i}: layer {source} {LAYERS[source]} imports layer {target} {LAYERS[target]} above it")
    return found


def check_layers(root: Path = ROOT) -> list[str]:
    return layer_violations(project_imports(root), set(project_modules(root)), frozenset(kernels(root)))


MAX_TOP_LEVEL = 8  # modules directly in exclust/, besides its __init__.py
MAX_LINES = 500  # every module of exclust/ and flows/ is shorter


def check_sizes(root: Path = ROOT) -> list[str]:
    top = sorted(p.name for p in (root / "exclust").glob("*.py") if p.name != "__init__.py")
    found = [f"exclust/ holds {len(top)} modules directly, more than {MAX_TOP_LEVEL}: {top}"
             ] if len(top) > MAX_TOP_LEVEL else []
    for path in project_modules(root).values():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines >= MAX_LINES:
            found.append(f"{path.relative_to(root).as_posix()} has {lines} lines, {MAX_LINES} or more")
    return found


MAX_CHAIN = 12  # modules in the longest chain of imports (a -> b -> c is 3)


def longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest path of the import graph, which must have no cycle, as its list of modules."""
    longest: dict[str, list[str]] = {}
    visiting: set[str] = set()

    def from_(v: str) -> list[str]:
        if v in longest:
            return longest[v]
        if v in visiting:
            raise ValueError(f"the import graph has a cycle through {v}")
        visiting.add(v)
        tails = [from_(w) for w in sorted(graph[v])]
        visiting.discard(v)
        longest[v] = [v] + max(tails, key=len, default=[])
        return longest[v]

    return max((from_(v) for v in sorted(graph)), key=len, default=[])


def check_chain(root: Path = ROOT, limit: int = MAX_CHAIN) -> list[str]:
    chain = longest_chain(import_graph(root))
    if len(chain) <= limit:
        return []
    return [f"the longest chain of imports has {len(chain)} modules, more than {limit}: {' -> '.join(chain)}"]


def test_every_module_is_in_the_map():
    missing = sorted(module_files() - set(mapped_modules()))
    assert not missing, f"add a line for each to the module map of ARCHITECTURE.md: {missing}"


def test_every_module_in_the_map_exists():
    mapped = mapped_modules()
    duplicated = sorted({m for m in mapped if mapped.count(m) > 1})
    assert not duplicated, f"named twice in the module map: {duplicated}"
    gone = sorted(set(mapped) - module_files())
    assert not gone, f"the module map names modules that do not exist: {gone}"


# A package's __init__ docstring says what lives in it, naming each module as ``name.py`` and each
# sub-package as ``name/``: those names must exist, and every module of the package be named.
DOCSTRING_MODULE = re.compile(r"``([\w]+(?:\.py|/))``")


def docstring_module_violations(root: Path = ROOT) -> list[str]:
    found = []
    for init in sorted(p for d in SOURCE_DIRS for p in (root / d).rglob("__init__.py")):
        package = init.parent
        where = init.relative_to(root).as_posix()
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        named = set(DOCSTRING_MODULE.findall(doc))
        present = {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
        present |= {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()}
        found += [f"{where}'s docstring names {n}, which is not in {package.relative_to(root).as_posix()}/"
                  for n in sorted(named - present)]
        found += [f"{where}'s docstring does not name its module {n}" for n in sorted(present - named)]
    return found


def test_package_docstrings_name_their_modules():
    found = docstring_module_violations()
    assert not found, "\n".join(found)


def test_the_docstring_check_fails_on_a_gone_and_a_new_module(tmp_path):
    root = copy_of_the_tree(tmp_path)
    assert docstring_module_violations(root) == []
    (root / "exclust" / "scoring" / "curves.py").rename(root / "exclust" / "scoring" / "cost_curves.py")
    assert docstring_module_violations(root) == [
        "exclust/scoring/__init__.py's docstring names curves.py, which is not in exclust/scoring/",
        "exclust/scoring/__init__.py's docstring does not name its module cost_curves.py"]


def test_an_import_for_the_type_checker_alone_makes_no_edge(tmp_path):
    root = copy_of_the_tree(tmp_path)
    append(root, "exclust/errors.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
           "    from exclust.jobs import steps\nelse:\n    from exclust.tree import style")
    targets = {i.target for i in project_imports(root) if i.importer == "exclust.errors"}
    assert targets == {"exclust.tree.style"}


def test_no_import_cycle_among_project_modules():
    found = sorted(sorted(c) for c in cycles(import_graph()))
    assert not found, f"project modules import each other in a cycle: {found}"


def test_scipy_ndimage_stays_in_the_datasets():
    offenders = sorted(
        module_name(p) for p in PACKAGE.rglob("*.py")
        if "datasets" not in p.relative_to(PACKAGE).parts
        and any(n == "scipy.ndimage" or n.startswith("scipy.ndimage.") for n in imported_names(p))
    )
    assert not offenders, f"only exclust/datasets/ may import scipy.ndimage: {offenders}"


RULES = {
    "kernels import only kernels and stdlib-only modules": check_kernel_imports,
    "only kernels import numba": check_numba_outside_kernels,
    "modules import their own layer and below": check_layers,
    "few modules at the top and none long": check_sizes,
    "the longest chain of imports is short": check_chain,
}


@pytest.mark.parametrize("rule", RULES, ids=list(RULES))
def test_the_tree_keeps_the_rule(rule):
    found = RULES[rule]()
    assert not found, "\n".join(found)


def edge(importer: str, target: str, name: str | None = None) -> Import:
    return Import(importer, target, name or target, "x.py:1", f"import {name or target}")


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_an_import_resolves_to_the_longest_module_it_names(tmp_path):
    empty = ("exclust/__init__.py", "exclust/reference/__init__.py", "exclust/reference/base.py",
             "exclust/jobs/__init__.py", "flows/__init__.py")
    for path, text in {
        **dict.fromkeys(empty, ""),
        "exclust/jobs/steps.py": "def f():\n    from exclust.reference import base, KMeans\n",
        "exclust/jobs/config.py": "from ..reference import base\nfrom . import steps\n",
        "flows/explain.py": "import exclust.jobs.config\nimport numpy\n",
    }.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    assert import_graph(tmp_path) == {
        "exclust": set(), "exclust.reference": set(), "exclust.reference.base": set(), "exclust.jobs": set(),
        "exclust.jobs.steps": {"exclust.reference", "exclust.reference.base"},
        "exclust.jobs.config": {"exclust.reference.base", "exclust.jobs.steps"},
        "flows": set(), "flows.explain": {"exclust.jobs.config"},
    }
    # and in the real tree: flows/explain.py says `from exclust.jobs.explain import pipeline`
    assert "exclust.jobs.explain.pipeline" in import_graph()["flows.explain"]


def test_kernels_may_import_constants_but_no_lazy_names():
    plain = stdlib_only()
    assert {"exclust.errors", "exclust.tree.node_kinds"} <= plain
    assert not {"exclust", "exclust.reference", "exclust.tree", "exclust.dataplane.parts"} & plain
    assert {"exclust.tree._routing", "exclust.dataplane._row_hash"} <= kernels()
    assert "exclust.dataplane.parts" not in kernels()


def test_the_kernel_rule_on_a_synthetic_graph():
    imports = [edge("_a", "_b"), edge("_a", "consts"), edge("_a", "exclust.sources.dataset"),
               edge("exclust.sources.dataset", "_a")]
    found = kernel_import_violations(imports, kernel_modules={"_a", "_b"}, plain={"consts"})
    assert len(found) == 1 and found[0].startswith("kernel _a imports exclust.sources.dataset (x.py:1:"), found


def test_the_layer_order_forbids_what_the_issue_forbids():
    below_jobs = [layer[0] + ".m" for layer in LAYERS[:JOBS]]
    forbidden = [edge(m, "exclust.jobs.registry") for m in below_jobs]
    forbidden += [edge(m, top) for m in below_jobs for top in ("exclust.cli", "flows.explain")]
    forbidden += [edge(m, "exclust.report.page") for m in below_jobs if layer_of(m) < layer_of("exclust.report")]
    forbidden += [
        edge("exclust.algorithms.cart", "exclust.jobs.explain.steps"),
        edge("exclust.dataplane.parts", "exclust.sources.parquet"),
        edge("exclust.scoring.metrics", "exclust.reference.kmeans"),
        edge("exclust.algorithms.cart", "exclust.datasets.synthetic"),
        edge("flows.explain", "exclust.datasets.synthetic"),
        edge("exclust.datasets.synthetic", "exclust.jobs.explain.steps"),
        edge("exclust.algorithms.histogram.imm", "exclust", name="exclust.KMedians"),
    ]
    for i in forbidden:
        assert len(layer_violations([i], set())) == 1, f"the layers allow {i}"
    allowed = [
        edge("exclust.jobs.explain.pipeline", "exclust.algorithms.cart"),
        edge("flows.explain", "exclust.jobs.explain.steps"),
        edge("exclust.cli", "exclust.datasets.synthetic"),
        edge("exclust.datasets.synthetic", "exclust.reference.kmeans"),
        edge("exclust.outputs.staging", "exclust.sources.storage"),
        edge("exclust.report.page", "exclust", name="exclust.__version__"),
        edge("exclust", "exclust.datasets.synthetic"),
    ]
    assert layer_violations(allowed, {"exclust", "exclust.cli", "flows.explain", "exclust.datasets.synthetic"}) == []
    assert layer_violations([], {"exclust.loose"}) == [
        "exclust.loose is in no layer: place it in LAYERS of tests/test_architecture.py"]


def test_the_longest_chain_finder():
    graph = {"a": {"b", "c"}, "b": {"d"}, "c": set(), "d": set(), "e": {"a"}}
    assert longest_chain(graph) == ["e", "a", "b", "d"]
    with pytest.raises(ValueError, match="cycle"):
        longest_chain({"a": {"b"}, "b": {"a"}})


def copy_of_the_tree(tmp_path: Path) -> Path:
    for d in SOURCE_DIRS:
        shutil.copytree(ROOT / d, tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def append(root: Path, path: str, text: str) -> None:
    with open(root / path, "a", encoding="utf-8") as f:
        f.write("\n" + text + "\n")


BREAKS = {  # rule checker, module, appended offending text, the violation it must report
    "a kernel imports a source": (check_kernel_imports, "exclust/tree/_routing.py",
                                  "from exclust.sources import dataset",
                                  "kernel exclust.tree._routing imports exclust.sources.dataset"),
    "a kernel imports lazy names": (check_kernel_imports, "exclust/dataplane/_row_hash.py",
                                    "from exclust.reference import KMeans",
                                    "kernel exclust.dataplane._row_hash imports exclust.reference "),
    "numba outside a kernel": (check_numba_outside_kernels, "exclust/scoring/metrics.py",
                               "def compiled():\n    from numba import njit\n    return njit",
                               "exclust.scoring.metrics imports numba but is not a kernel module named _*.py"),
    "the thread control compiles": (check_numba_outside_kernels, "exclust/dataplane/parts.py",
                                    "def compiled():\n    import numba\n    return numba.njit",
                                    "exclust.dataplane.parts may use numba only to set its thread count, but uses "
                                    "['njit']"),
    "an algorithm imports the jobs": (check_layers, "exclust/algorithms/cart.py",
                                      "from exclust.jobs import registry",
                                      "exclust.algorithms.cart imports exclust.jobs.registry "),
    "the core imports the datasets": (check_layers, "exclust/scoring/drift.py",
                                      "def f():\n    from exclust.datasets import synthetic",
                                      "exclust.scoring.drift imports exclust.datasets.synthetic "),
    "a cycle": (lambda root: [" ".join(sorted(c)) for c in cycles(import_graph(root))], "exclust/errors.py",
                "from exclust.jobs.explain import steps", "exclust.errors "),
}


@pytest.mark.parametrize("break_", BREAKS, ids=list(BREAKS))
def test_each_rule_fails_on_an_offending_import(tmp_path, break_):
    check, path, text, expected = BREAKS[break_]
    root = copy_of_the_tree(tmp_path)
    before = set(check(root))
    append(root, path, text)
    found = [v for v in check(root) if v not in before]
    assert len(found) == 1 and expected in found[0], found


def test_too_many_or_too_long_modules_fail(tmp_path):
    root = copy_of_the_tree(tmp_path)
    before = check_sizes(root)
    for n in range(MAX_TOP_LEVEL + 1):
        (root / "exclust" / f"loose_{n}.py").write_text("", encoding="utf-8")
    append(root, "exclust/errors.py", "\n" * MAX_LINES)
    found = [v for v in check_sizes(root) if v not in before]
    assert [v.split(" ")[:2] for v in found] == [["exclust/", "holds"], ["exclust/errors.py", "has"]], found
    assert "loose_0.py" in found[0]


def test_a_longer_chain_fails(tmp_path):
    root = copy_of_the_tree(tmp_path)
    chain = longest_chain(import_graph(root))
    assert check_chain(root, limit=len(chain)) == []
    (root / "flows" / "caller.py").write_text(f"import {chain[0]}\n", encoding="utf-8")
    assert check_chain(root, limit=len(chain)) == [
        f"the longest chain of imports has {len(chain) + 1} modules, more than {len(chain)}: "
        + " -> ".join(["flows.caller"] + chain)]
