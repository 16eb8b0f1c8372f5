"""Every module of scimech / ocean / astro / neuro imports on its own in a fresh process, and
the imports among the repository's own modules form no cycle.

Import graph: ``import`` / ``from ... import`` statements resolved to the repository's
modules with :mod:`ast`, either those that run when the module is imported (class bodies
and ``if`` / ``try`` blocks included, function bodies and ``if TYPE_CHECKING:`` excluded:
a cycle there breaks the import) or all of them (a function-level import that closes a
circle still ties two modules into one idea); a cycle is found with
:class:`graphlib.TopologicalSorter`. Fresh imports: one child process per module, forked
from a parent that has imported only third-party libraries (torch, xarray, ... cost
seconds each; importing them once keeps the test fast). In each child no repository
module is loaded yet, exactly as in ``python -c 'import X'``.

Both checks are first shown to fail on a small package with a planted cycle.
"""

from __future__ import annotations

import ast
import graphlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("scimech", "ocean", "astro", "neuro")

_FRESH_IMPORTS = r"""
import importlib, json, os, sys, traceback
modules, preload = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for name in preload:
    try:
        importlib.import_module(name)
    except Exception:
        pass  # a library the module itself would fail on: the child reports it
failed = {}
for name in modules:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code, msg = 0, b""
        try:
            importlib.import_module(name)
        except BaseException:
            code, msg = 1, traceback.format_exc().encode()[-4000:]
        os.write(w, msg)
        os._exit(code)
    os.close(w)
    msg = b""
    while chunk := os.read(r, 65536):
        msg += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        failed[name] = msg.decode() or f"exit status {status}"
print(json.dumps(failed))
"""


def module_files(root: Path, packages) -> dict[str, tuple[Path, bool]]:
    """``{module name: (file, is_package)}`` for every ``.py`` file of ``packages`` under ``root``."""
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            is_pkg = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level(body):
    """Statements that run when the module is imported (not function bodies)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _module_level(node.body)
            yield from _module_level(node.orelse)
            continue
        yield node
        if isinstance(node, ast.ClassDef):
            yield from _module_level(node.body)
        for field in ("body", "orelse", "finalbody", "handlers"):
            if isinstance(node, (ast.Try, ast.With)) and hasattr(node, field):
                for sub in getattr(node, field):
                    yield from _module_level(sub.body if isinstance(sub, ast.ExceptHandler) else [sub])


def imported_names(name: str, path: Path, is_pkg: bool, lazy: bool = False) -> set[str]:
    """Dotted names imported by module ``name`` (relative imports resolved): at module level,
    or anywhere in the file with ``lazy``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if is_pkg else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree) if lazy else _module_level(tree.body):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def import_graph(modules: dict[str, tuple[Path, bool]], lazy: bool = False) -> dict[str, set[str]]:
    """``{module: repository modules it imports}`` (at module level; anywhere with ``lazy``)."""
    graph = {}
    for name, (path, is_pkg) in modules.items():
        deps = set()
        for imp in imported_names(name, path, is_pkg, lazy):
            # the longest prefix that is one of our modules (``a.b.c`` -> ``a.b`` if c is a name)
            parts = imp.split(".")
            for k in range(len(parts), 0, -1):
                cand = ".".join(parts[:k])
                if cand in modules:
                    # a module's own enclosing packages are imported before it by Python itself
                    # (``from . import sibling`` names the parent): not an edge of the graph
                    if cand != name and not name.startswith(cand + "."):
                        deps.add(cand)
                    break
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        return list(err.args[1])
    return None


def third_party(modules: dict[str, tuple[Path, bool]]) -> list[str]:
    """Module-level imports that are not the repository's (imported once before forking)."""
    roots = {m.split(".")[0] for m in modules}
    names = set()
    for name, (path, is_pkg) in modules.items():
        names.update(n for n in imported_names(name, path, is_pkg) if n and n.split(".")[0] not in roots)
    return sorted(names)


def import_each_fresh(root: Path, modules: list[str], preload: list[str], timeout: float = 600) -> dict[str, str]:
    """``{module: traceback}`` of the modules that fail to import in a fresh process."""
    proc = subprocess.run(
        [sys.executable, "-c", _FRESH_IMPORTS, json.dumps(modules), json.dumps(preload)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={
            "PYTHONPATH": str(root),
            "PATH": "/usr/bin:/bin",
            "MPLBACKEND": "Agg",
            "OMP_NUM_THREADS": "1",
            "SCIMECH_QUIET": "1",
            "HOME": str(Path.home()),
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def cyclic_package(tmp_path):
    """``pkg.a`` and ``pkg.b`` import each other at module level (``pkg.c`` only lazily)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import B\nA = 1\n")
    (pkg / "b.py").write_text("from .a import A\nB = 2\n")
    (pkg / "c.py").write_text(
        textwrap.dedent("""
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from .d import D
        def lazy():
            from .d import D
            return D
        C = 3
    """)
    )
    (pkg / "d.py").write_text("from .c import C\nD = 4\n")
    return tmp_path


def test_the_checks_catch_a_planted_cycle(cyclic_package):
    modules = module_files(cyclic_package, ["pkg"])
    graph = import_graph(modules)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"}
    assert graph["pkg.c"] == set()  # lazy and TYPE_CHECKING imports are not module-level edges
    cycle = find_cycle(graph)
    assert cycle is not None and set(cycle) == {"pkg.a", "pkg.b"}
    # and the cycle really breaks a fresh import (Python: "partially initialized module")
    failed = import_each_fresh(cyclic_package, sorted(modules), [])
    assert set(failed) == {"pkg.a", "pkg.b"}
    assert "partially initialized" in failed["pkg.a"]
    assert find_cycle({k: v for k, v in graph.items() if k not in ("pkg.a", "pkg.b")}) is None
    # counting function-level imports, c (lazily) and d (at module level) import each other
    lazy = import_graph(modules, lazy=True)
    assert lazy["pkg.c"] == {"pkg.d"}
    assert set(find_cycle({k: v for k, v in lazy.items() if k not in ("pkg.a", "pkg.b")})) == {"pkg.c", "pkg.d"}


def test_repository_imports_have_no_cycle():
    modules = module_files(REPO, PACKAGES)
    assert len(modules) > 40 and "ocean.variables" in modules
    graph = import_graph(modules)
    # the ocean data layer reads the variable tables from ocean.variables, not from the simulator
    assert "ocean.synthetic" not in graph["ocean.data"] and "ocean.variables" in graph["ocean.data"]
    cycle = find_cycle(graph)
    assert cycle is None, f"module-level import cycle: {' -> '.join(cycle)}"
    cycle = find_cycle(import_graph(modules, lazy=True))
    assert cycle is None, f"import cycle (through a function-level import): {' -> '.join(cycle)}"


@pytest.mark.slow  # one fresh interpreter per module (minutes)
def test_every_module_imports_in_a_fresh_process():
    modules = module_files(REPO, PACKAGES)
    failed = import_each_fresh(REPO, sorted(modules), third_party(modules))
    assert not failed, "\n\n".join(f"{m}:\n{tb}" for m, tb in failed.items())


def _private_imports(root: Path, package: str) -> list[str]:
    """``module: name`` for every private name (``_x``) a module of ``package`` imports from another
    module of the repository (aliases such as ``progress as _progress`` import a public name)."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                mod = node.module or ""
                inside = node.level > 0 or mod.split(".")[0] in PACKAGES + ("mypkg",)
                found += [
                    f"{path.relative_to(root)}: {a.name}"
                    for a in node.names
                    if inside and a.name.startswith("_") and not a.name.startswith("__")
                ]
    return found


def test_no_module_of_the_core_imports_a_private_name_of_another(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("def _helper():\n    return 1\n")
    (pkg / "b.py").write_text("from .a import _helper\n")
    assert _private_imports(tmp_path, "mypkg") == ["mypkg/b.py: _helper"]  # the check finds a planted one
    assert _private_imports(REPO, "scimech") == []
