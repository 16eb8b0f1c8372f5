"""The core in subpackages by concern (scimech.capture, .causal, .analysis, .studies, .run): every
module imports by its new path without a DeprecationWarning (the core never imports an old path),
and every old path of scimech 0.1 (a shim until 0.3.0) warns once and is the same module object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "scimech"

CHECK = r"""
import importlib, json, sys, warnings
new, old = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {"new_warned": [], "old_silent": [], "not_same": [], "monkeypatch": None, "attribute": None}
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    for name in new:
        importlib.import_module(name)
    out["new_warned"] = [str(w.message) for w in seen if issubclass(w.category, DeprecationWarning)
                         and "scimech" in str(w.message)]
for old_name, new_name in old.items():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        mod = importlib.import_module(old_name)
    if not any(issubclass(w.category, DeprecationWarning) and f"{old_name} moved to {new_name}" in str(w.message)
               for w in seen):
        out["old_silent"].append(old_name)
    if mod is not sys.modules[new_name] or sys.modules[old_name] is not sys.modules[new_name]:
        out["not_same"].append(old_name)
import scimech, scimech.capture.sites
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import scimech.sites as old_sites
old_sites._planted_by_test = 1                      # a monkeypatch through the old path is seen by the new
out["monkeypatch"] = getattr(scimech.capture.sites, "_planted_by_test", None)
vars(scimech).pop("metrics", None)                  # bound by `import scimech.metrics` above
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    metrics = scimech.metrics                        # an attribute of the package: the moved module, warned
out["attribute"] = [metrics.__name__, [str(w.message) for w in seen]]
out["record_is_function"] = callable(scimech.record) and not isinstance(scimech.record, type(sys))
print(json.dumps(out))
"""


def _modules() -> tuple[list[str], dict[str, str]]:
    """(every module by its new path, {old path: new path} for every shim)."""
    from scimech._moved import MOVED

    moved = {f"scimech.{old}": f"scimech.{new}" for old, new in MOVED.items()}
    for old, new in list(moved.items()):
        folder = CORE / old.split(".")[1]
        if folder.is_dir():  # a shim package: each submodule has its shim too
            for f in sorted(folder.glob("*.py")):
                if f.stem != "__init__":
                    moved[f"{old}.{f.stem}"] = f"{new}.{f.stem}"
    shim_files = {CORE / (p.split(".", 1)[1].replace(".", "/") + ".py") for p in moved} | {
        CORE / p.split(".")[1] / "__init__.py" for p in moved
    }
    new = []
    for f in sorted(CORE.rglob("*.py")):
        if f in shim_files:
            continue
        parts = f.relative_to(REPO).with_suffix("").parts
        new.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return new, moved


def test_every_shim_file_is_a_moved_module_and_every_moved_module_has_one():
    new, moved = _modules()
    assert set(moved.values()) <= set(new)
    assert {
        "scimech.capture.sites",
        "scimech.studies.contract",
        "scimech.analysis.dictionary.saes",
        "scimech.studies.validate.suite",
        "scimech.run.cli",
    } <= set(moved.values())
    old_tops = {o.split(".")[1] for o in moved}
    assert not [m for m in new if m.split(".")[1:2] and m.split(".")[1] in old_tops], "a module left at an old path"
    for old in moved:
        path = CORE / old.split(".", 1)[1].replace(".", "/")
        text = (path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py").read_text()
        assert "sys.modules[__name__] = _moved" in text and "0.3.0" in text, old


def test_new_paths_import_silently_and_old_paths_are_the_same_module_with_a_warning():
    new, moved = _modules()
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(new), json.dumps(moved)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["new_warned"] == [], out["new_warned"]
    assert out["old_silent"] == [], out["old_silent"]
    assert out["not_same"] == [], out["not_same"]
    assert out["monkeypatch"] == 1
    name, warned = out["attribute"]
    assert name == "scimech.causal.metrics" and any(
        "scimech.metrics moved to scimech.causal.metrics" in w for w in warned
    )
    assert out["record_is_function"]


def test_the_old_cli_path_still_runs_as_a_script():
    new = subprocess.run(
        [sys.executable, "-m", "scimech.run.cli", "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    old = subprocess.run(
        [sys.executable, "-m", "scimech.cli", "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert new.returncode == old.returncode == 0, old.stderr[-2000:]
    assert old.stdout == new.stdout and "usage: scimech" in new.stdout


def test_no_code_of_the_repository_imports_an_old_path():
    """Users see the warning only for their own imports: no module of the repository (the core, the
    studies, the benchmarks, the tests other than this one) imports an old path, even in a function."""
    import ast

    import scimech

    _, moved = _modules()
    found = []
    for package in ("scimech", "ocean", "astro", "neuro", "bench", "tests", "scripts"):
        for f in sorted((REPO / package).rglob("*.py")):
            parts = f.relative_to(REPO).with_suffix("").parts
            if f == Path(__file__).resolve() or (
                package == "scimech" and ".".join(parts[:-1] if parts[-1] == "__init__" else parts) in moved
            ):
                continue
            here = ".".join(parts[:-1])
            for node in ast.walk(ast.parse(f.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        base = ".".join(
                            here.split(".")[: len(here.split(".")) - node.level + 1] + ([base] if base else [])
                        )
                    names = [base] + [
                        f"{base}.{a.name}"
                        for a in node.names  # sm.record is the function
                        if not (base == "scimech" and a.name in scimech.__all__)
                    ]
                found += [f"{f.relative_to(REPO)}: {n}" for n in names if n in moved]
    assert found == []


def test_a_fingerprint_names_a_moved_class_by_its_old_module():
    """A run folder from before the move stays current: a fingerprint of a dataclass of a moved module
    (a catalogue's Reading in astro's input fingerprint) is the one scimech 0.1 wrote (value computed
    with scimech.fingerprint at the commit before the move)."""
    from scimech.run.fingerprint import fingerprint
    from scimech.studies.reading import ReadRow

    assert fingerprint(ReadRow("sst", "tos", "standard_name", "K", "degC", "K -> degC")) == "9f49c1b790567038"
