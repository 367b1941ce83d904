"""The engine's modules depend on each other one way, in layers, and on nothing above the engine.

Every module under `engine/` is parsed with `ast` (not imported), and every import statement in
it counts: at module level, inside functions (a lazy import is still a dependency) and inside
`if TYPE_CHECKING:` blocks (a type-only import still ties the two modules' designs together, and
a cycle through annotations is a cycle a reader has to untangle). The implicit import of parent
packages that Python performs (`import engine.trace` first runs `engine/__init__.py`) is not an
edge: the package's `__init__` is the top layer that re-exports the rest, and an explicit
`import engine` or `from engine import Name` (a name that is not a submodule) still is one.

Layers, lowest first (a module may import its own layer and the layers below it, never above;
within a layer the graph must still be acyclic):

0. foundations: errors, lattice, order, canonical, budget, consolidation, reducers, sources;
1. the data plane: trace (batches, spine), kernels, columnar (runs, compiled kernels);
2. executors behind the boundary (`engine.executors`: base, inprocess, columnar);
3. the dataflow graph and its scheduler: progress, dataflow (`Scope`, `Operator`, `Dataflow`);
4. operators;
5. the Spark executor (it recognises the operators' time-only logic functions);
6. the fluent API: collection (`Collection`, `Arranged`, `Variable`, inputs);
7. the package `engine` itself.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parent.parent / "engine"

LAYERS: list[tuple[str, ...]] = [
    (
        "engine.errors",
        "engine.lattice",
        "engine.order",
        "engine.canonical",
        "engine.budget",
        "engine.consolidation",
        "engine.reducers",
        "engine.sources",
        "engine.fields",
        "engine.rows_at",
        "engine.columns_at",
        "engine.counting_sort",
        "engine.unique",
    ),
    ("engine.trace", "engine.rows_batch", "engine.counted_batch", "engine.kernels",
     "engine.columnar"),
    ("engine.columns_join",),
    ("engine.executors",),
    ("engine.progress", "engine.dataflow"),
    ("engine.operators",),
    ("engine.executors.spark",),
    ("engine.collection",),
    ("engine",),
]

# Packages the engine never imports: the SQL layer, the server, and what they are built on.
FORBIDDEN = {"sqlglot", "duckdb", "fastapi", "starlette", "uvicorn", "pydantic", "planner", "server"}
# Third-party packages only some layers may import.
ONLY_IN = {"pyspark": "engine.executors.spark"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ENGINE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def engine_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ENGINE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """The engine modules `name` imports, and the top-level names of everything else it imports."""
    is_package = path.name == "__init__.py"
    inside: set[str] = set()
    outside: set[str] = set()

    def add(target: str) -> None:
        if target.split(".")[0] != "engine":
            outside.add(target.split(".")[0])
            return
        # `import engine.a.b` names module engine.a.b; fall back to the longest known prefix.
        while target not in known and "." in target:
            target = target.rsplit(".", 1)[0]
        inside.add(target)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source == "__future__":
                continue
            for alias in node.names:
                sub = source + "." + alias.name
                add(sub if sub in known else source)
    inside.discard(name)
    return inside, outside


def graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    mods = engine_modules()
    known = set(mods)
    edges: dict[str, set[str]] = {}
    external: dict[str, set[str]] = {}
    for name, path in mods.items():
        edges[name], external[name] = imports_of(name, path, known)
    return edges, external


def layer_of(name: str) -> int:
    """The layer of the longest prefix (by dotted components) that a layer lists."""
    best, best_len = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """Some cycle of the graph, as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        path.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m) :] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        path.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_checker_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The parser counts lazy and type-only imports, resolves `from pkg import submodule`, and
    finds a cycle: checked on a small fake package, so a silent checker cannot pass."""
    src = tmp_path / "engine" / "sub"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from engine.sub.b import B\n"
        "def f():\n    import duckdb\n    from engine import lattice\n"
    )
    (src / "b.py").write_text("from engine.sub import a\nfrom . import c\n")
    (src / "c.py").write_text("from .a import f\n")
    known = {"engine", "engine.lattice", "engine.sub", "engine.sub.a", "engine.sub.b", "engine.sub.c"}
    ia, oa = imports_of("engine.sub.a", src / "a.py", known)
    ib, _ = imports_of("engine.sub.b", src / "b.py", known)
    ic, _ = imports_of("engine.sub.c", src / "c.py", known)
    assert ia == {"engine.sub.b", "engine.lattice"} and "duckdb" in oa
    assert ib == {"engine.sub.a", "engine.sub.c"} and ic == {"engine.sub.a"}
    cycle = find_cycle({"engine.sub.a": ia, "engine.sub.b": ib, "engine.sub.c": ic})
    assert cycle is not None and cycle[0] == cycle[-1]
    assert find_cycle({"x": {"y"}, "y": {"z"}, "z": set()}) is None


def test_engine_import_graph_has_no_cycle() -> None:
    edges, _ = graph()
    assert len(edges) > 30, "the engine's modules were not found"
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_every_module_has_a_layer_and_imports_only_downwards() -> None:
    edges, _ = graph()
    unplaced = sorted(n for n in edges if layer_of(n) < 0)
    assert not unplaced, "modules in no layer (add them to LAYERS): %s" % unplaced
    upward = sorted(
        "%s (layer %d) imports %s (layer %d)" % (n, layer_of(n), m, layer_of(m))
        for n, targets in edges.items()
        for m in targets
        if layer_of(m) > layer_of(n)
    )
    assert not upward, "imports against the layering:\n" + "\n".join(upward)


def test_engine_imports_no_sql_layer_and_spark_only_in_its_executor() -> None:
    _, external = graph()
    bad = sorted((n, x) for n, xs in external.items() for x in xs if x in FORBIDDEN)
    assert not bad, "the engine imports the SQL/server layers: %s" % bad
    for package, allowed in ONLY_IN.items():
        misplaced = sorted(
            n for n, xs in external.items()
            if package in xs and not (n == allowed or n.startswith(allowed + "."))
        )
        assert not misplaced, "%s imported outside %s: %s" % (package, allowed, misplaced)


def executor_classes() -> list[type]:
    from engine.executors.columnar import ColumnarExecutor
    from engine.executors.inprocess import InProcessExecutor
    from engine.executors.spark import SparkExecutor  # imports no pyspark until constructed

    return [InProcessExecutor, ColumnarExecutor, SparkExecutor]


@pytest.mark.parametrize("cls", executor_classes(), ids=lambda c: c.__name__)
def test_every_executor_implements_the_boundary(cls: type) -> None:
    """Each method of `Executor` exists on every executor, taking at least its required
    parameters in the same order (extra parameters must have defaults)."""
    from engine.executors.base import Executor

    assert isinstance(cls.name, str)
    for method, proto in inspect.getmembers(Executor, inspect.isfunction):
        if method.startswith("_"):
            continue
        impl = getattr(cls, method, None)
        assert callable(impl), "%s lacks %s" % (cls.__name__, method)
        required = [
            p.name for p in inspect.signature(proto).parameters.values() if p.default is p.empty
        ]
        params = list(inspect.signature(impl).parameters.values())
        if isinstance(inspect.getattr_static(cls, method), staticmethod):
            required = required[1:]
        assert [p.name for p in params[: len(required)]] == required, (cls.__name__, method)
        assert all(p.default is not p.empty for p in params[len(required) :]), (cls.__name__, method)
