"""The package's shape (issue 22): imports between its top-level parts point one way, few loose modules, short
files, one name one module, and MLflow behind the store. Read from the source's AST: nothing is imported."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "scalestudy"
MAX_LOOSE_MODULES = 8  # __init__.py included
MAX_LINES = 450


def sources(root: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def top_part(root: Path, path: Path) -> str:
    """The top-level part a file belongs to: its package's folder, or the loose module's name."""
    first = path.relative_to(root).parts[0]
    return first.removesuffix(".py")


def imported_parts(root: Path, path: Path) -> set[str]:
    """The top-level parts of the package that `path` imports anywhere in it (function-level imports too)."""
    name = root.name
    here = list(path.relative_to(root).with_suffix("").parts)  # e.g. ['paper', 'tables'], ['ui', '__init__']
    package = here[:-1]  # the package the file is in, relative to the root
    parts: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                head, _, rest = alias.name.partition(".")
                if head == name and rest:
                    parts.add(rest.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                head, _, rest = (node.module or "").partition(".")
                if head != name:
                    continue
                target = rest.split(".") if rest else []
            else:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = base + (node.module.split(".") if node.module else [])
            if target:
                parts.add(target[0])
            else:  # `from scalestudy import derive` or `from .. import derive` at the top
                parts.update(alias.name for alias in node.names)
    return {p for p in parts if p != "__init__"}


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """{top-level part: the other top-level parts it imports}."""
    graph: dict[str, set[str]] = {}
    for path in sources(root):
        part = top_part(root, path)
        if part == "__init__":
            continue
        graph.setdefault(part, set()).update(imported_parts(root, path) - {part})
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


# --------------------------------------------------------------------------------------------
# The checks on the package


def test_no_import_cycle_between_top_level_parts():
    graph = import_graph()
    assert find_cycle(graph) is None, f"import cycle between top-level parts: {' -> '.join(find_cycle(graph))}"


def test_the_graph_sees_imports_of_every_kind():
    """The graph is not empty by mistake: known arrows of each import form are found."""
    graph = import_graph()
    assert "store" in graph["paper"]  # from ..store import load_runs (paper/__main__.py, a relative import)
    assert "derive" in graph["paper"]  # from .. import derive (paper/tables.py)
    assert {"store", "harness"} <= graph["train"] | graph["harness"]
    assert "schema" in graph["store"] and "paper" not in graph["store"]


def test_at_most_eight_loose_modules():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= MAX_LOOSE_MODULES, f"{len(loose)} loose modules in {PACKAGE}: {loose}"


def test_no_file_over_450_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in sources() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_no_two_modules_of_the_same_name():
    names = [p.stem for p in sources() if p.stem not in ("__init__", "__main__")]
    names += [p.name for p in PACKAGE.rglob("*") if p.is_dir() and (p / "__init__.py").exists() and p != PACKAGE]
    twice = sorted(name for name, n in Counter(names).items() if n > 1)
    assert not twice, f"module names used twice: {twice}"


def test_only_the_store_imports_mlflow():
    outside = []
    for path in sources():
        if top_part(PACKAGE, path) == "store":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            modules += [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            outside += [f"{path.relative_to(PACKAGE)}: {m}" for m in modules if m.split(".")[0] == "mlflow"]
    assert not outside, f"mlflow imported outside scalestudy.store: {outside}"


# --------------------------------------------------------------------------------------------
# The checker itself, on a package made here


def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_planted_cycle_is_found(tmp_path):
    """launch -> slurm -> launch, as the harness had it: absolute, relative and function-level imports."""
    root = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "launch.py": "def f():\n    from .slurm.commands import srun\n",
            "slurm/__init__.py": "",
            "slurm/commands.py": "from pkg import schema\n",
            "slurm/sweep.py": "def g():\n    from ..launch import JobOutcome\n",
            "schema.py": "import os\n",
        },
    )
    graph = import_graph(root)
    assert graph == {"launch": {"slurm"}, "slurm": {"schema", "launch"}, "schema": set()}
    assert find_cycle(graph) == ["launch", "slurm", "launch"]


def test_a_package_without_cycle_passes(tmp_path):
    root = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "paper/__init__.py": "from .. import derive\nimport pkg.store.read\n",
            "store/__init__.py": "from ..schema import X\n",
            "derive.py": "from .schema import X\n",
            "schema.py": "",
        },
    )
    graph = import_graph(root)
    assert graph == {"paper": {"derive", "store"}, "store": {"schema"}, "derive": {"schema"}, "schema": set()}
    assert find_cycle(graph) is None
