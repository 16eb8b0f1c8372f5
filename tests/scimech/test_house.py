"""The house shows its architecture: ``scimech/`` lists its package file, the errors, the alias table
and the folders by concern; every path of scimech 0.1, and every old path of ocean's data layer (now
the subpackage ``ocean.data``), still imports (the module at its new home, with a DeprecationWarning)
until 0.3.0; ``dir(scimech)`` lists the public API; and no folder of the
core imports one above it (run < capture < causal < analysis < studies < cli)."""

from __future__ import annotations

import ast
import json
import rlcompleter
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "scimech"

#: the module paths of scimech 0.1 (a flat package), written down from its file listing: every one must
#: still import until scimech 0.3.0 (the packages `dictionary` and `validate` with their modules)
PATHS_OF_0_1 = {
    "ablation", "atp", "attention", "attribution", "batches", "calls", "cli", "concepts", "config",
    "dictionary", "fingerprint", "geometry", "hooks", "intervene", "layout", "metrics", "model_profile",
    "options", "parallel", "prefix_reuse", "probe", "progress", "reading", "record", "report", "results",
    "samples", "sites", "stats", "study", "sweep", "validate", "verdicts",
}  # fmt: skip

#: the modules of ocean's data layer at their old, flat paths (``ocean.stores``, ...), written down from
#: the package's listing before they moved into the subpackage ``ocean.data``
OCEAN_DATA_LAYER = {"files", "gridaxes", "products", "reading", "samples", "splits", "stores", "timeaxis", "validation"}

#: ``(file, old path)``: modules that still import an old path of ocean's data layer (served by the alias
#: table meanwhile); the set only shrinks, and a new import of an old path fails the test below
OLD_PATHS_STILL_IMPORTED: set[tuple[str, str]] = set()

#: the floors of the core, bottom to top: a folder may import only its own floor and those below
FLOORS = ("run", "capture", "causal", "analysis", "studies", "cli")

#: imports the design allows across floors, each with why (none: the model profile, which record
#: reads, lives in capture since it moved down from causal)
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()


IMPORT_OLD_PATHS = r"""
import importlib, json, pkgutil, sys, warnings
import scimech
from scimech._moved import TABLES
out = {"checked": [], "silent": [], "not_same": [], "missing": []}
for old, new in [(f"{p}.{old}", f"{p}.{new}") for p, table in TABLES.items() for old, new in table.items()]:
    pairs = [(old, new)]
    target = importlib.import_module(new)
    if hasattr(target, "__path__"):  # a moved package: each of its modules moved with it
        pairs += [(f"{old}.{m.name}", f"{new}.{m.name}") for m in pkgutil.iter_modules(target.__path__)]
    for old_name, new_name in pairs:
        sys.modules.pop(old_name, None)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                mod = importlib.import_module(old_name)
            except ImportError as err:
                out["missing"].append(f"{old_name}: {err}")
                continue
        out["checked"].append(old_name)
        said = [str(w.message) for w in seen if issubclass(w.category, DeprecationWarning)]
        if not any(f"{old_name} moved to {new_name}" in m and "0.3.0" in m for m in said):
            out["silent"].append(old_name)
        if mod is not importlib.import_module(new_name):
            out["not_same"].append(old_name)
print(json.dumps(out))
"""


def _run(code: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_scimech_lists_its_package_errors_alias_table_and_concern_folders():
    entries = sorted(p.name for p in CORE.iterdir() if p.name != "__pycache__")
    assert entries == [
        "__init__.py",
        "__main__.py",
        "_moved.py",
        "analysis",
        "capture",
        "causal",
        "cli",
        "errors.py",
        "run",
        "studies",
    ]


def test_every_old_path_imports_as_the_moved_module_with_a_warning():
    """Each old path of scimech 0.1 and of ocean's data layer (fresh interpreter: nothing imported
    before) is the module object of its new path, with a DeprecationWarning naming both and the
    release that removes it."""
    from scimech._moved import MOVED, OCEAN_MOVED, TABLES

    # the tables cover scimech 0.1 (`scimech.cli` is again a real package: the CLI's new home) and the
    # data layer that ocean kept flat
    assert {k for k in MOVED if "." not in k} == PATHS_OF_0_1 - {"cli"}
    assert set(OCEAN_MOVED) == OCEAN_DATA_LAYER and set(OCEAN_MOVED.values()) == {f"data.{m}" for m in OCEAN_DATA_LAYER}
    assert set(TABLES) == {"scimech", "ocean", "neuro", "astro"}
    assert not [m for m in OCEAN_DATA_LAYER if (REPO / "ocean" / f"{m}.py").exists()]  # no file left at an old path
    out = _run(IMPORT_OLD_PATHS)
    assert out["missing"] == [] and out["silent"] == [] and out["not_same"] == []
    checked = set(out["checked"])
    assert {
        "scimech.record",
        "scimech.sites",
        "scimech.dictionary",
        "scimech.dictionary.saes",
        "scimech.validate.suite",
        "scimech.run.cli",
    } <= checked
    assert {f"ocean.{m}" for m in OCEAN_DATA_LAYER} <= checked
    assert len(checked) > len(MOVED) + len(OCEAN_MOVED) + 10  # the modules of the two moved packages came too


OLD_OCEAN_IMPORT_STATEMENTS = r"""
import json, sys, warnings
out = {}
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    import ocean.stores                                      # noqa
    from ocean import products
    from ocean.timeaxis import read_time
    from ocean.files import open_files
    import ocean.reading as old_reading
    validation = __import__("ocean").validation              # an attribute of the package
    gridaxes = __import__("ocean").gridaxes
import ocean.data.files, ocean.data.gridaxes, ocean.data.products, ocean.data.reading, ocean.data.stores
import ocean.data.timeaxis, ocean.data.validation
out["same"] = [
    ocean.stores is ocean.data.stores,
    products is ocean.data.products,
    read_time is ocean.data.timeaxis.read_time,
    open_files is ocean.data.files.open_files,
    old_reading is ocean.data.reading,
    validation is ocean.data.validation,
    gridaxes is ocean.data.gridaxes,
]
out["warned"] = sorted({(w.filename, w.lineno, str(w.message)) for w in seen if w.category is DeprecationWarning})
out["gathered"] = [ocean.data.open_store is ocean.data.products.open_store, ocean.data.validate is ocean.data.validation.validate]
print(json.dumps(out))
"""


def test_old_paths_of_the_ocean_data_layer_give_the_modules_of_ocean_data_and_warn_at_the_import_line():
    """``import ocean.stores``, ``from ocean import products``, ``ocean.validation``: the module of
    ``ocean.data`` itself, with one warning per old name, at the line of the user's code that named it."""
    out = _run(OLD_OCEAN_IMPORT_STATEMENTS)
    assert out["same"] == [True] * 7
    assert out["gathered"] == [True, True]
    lines = {"stores": 6, "products": 7, "timeaxis": 8, "files": 9, "reading": 10, "validation": 11, "gridaxes": 12}
    assert sorted(out["warned"]) == sorted(
        ["<string>", line, f"ocean.{m} moved to ocean.data.{m}; the old path will be removed in scimech 0.3.0"]
        for m, line in lines.items()
    )


OLD_IMPORT_STATEMENTS = r"""
import json, sys, warnings
out = {}
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    import scimech.record                                   # noqa
    from scimech.intervene import patching_sweep as old_sweep
    from scimech.dictionary import saes as old_saes
    from scimech.dictionary.train import train_dictionary as old_train
    import scimech.validate.suite as old_suite
    from scimech.run.cli import main as old_main
import scimech
import scimech.analysis.dictionary.train, scimech.cli, scimech.studies.validate.suite
out["same"] = [
    old_sweep is scimech.patching_sweep,
    old_saes is sys.modules["scimech.analysis.dictionary.saes"],
    old_train is scimech.analysis.dictionary.train.train_dictionary,
    old_suite is scimech.studies.validate.suite,
    old_main is scimech.cli.main,
]
out["warned_at"] = sorted({(w.filename, w.category.__name__) for w in seen})
out["record_is_function"] = callable(scimech.record) and not isinstance(scimech.record, type(sys))
import scimech.capture.sites
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import scimech.sites as old_sites
old_sites._planted_by_test = 1                              # a monkeypatch through the old path is seen by the new
out["monkeypatch"] = getattr(scimech.capture.sites, "_planted_by_test", None)
vars(scimech).pop("metrics", None)
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    metrics = scimech.metrics                               # an attribute of the package: the moved module, warned
out["attribute"] = [metrics.__name__, [str(w.message) for w in seen]]
try:
    import scimech.dictionary.no_such_module
except ModuleNotFoundError as err:
    out["missing"] = str(err)
print(json.dumps(out))
"""


def test_old_import_statements_give_the_new_objects_and_warn_at_the_import_line():
    out = _run(OLD_IMPORT_STATEMENTS)
    assert out["same"] == [True] * 5
    # the warning points at the user's import statement, not at importlib or the alias table
    assert out["warned_at"] == [["<string>", "DeprecationWarning"]]
    assert out["record_is_function"]
    assert out["monkeypatch"] == 1
    name, warned = out["attribute"]
    assert name == "scimech.causal.metrics" and any(
        "scimech.metrics moved to scimech.causal.metrics" in w for w in warned
    )
    assert out["missing"] == "No module named 'scimech.dictionary.no_such_module'"


def test_the_cli_runs_from_its_new_home_and_its_old_paths():
    runs = {
        argv[-2]: subprocess.run(
            [sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=120, env=None
        )
        for argv in (["-m", "scimech", "--help"], ["-m", "scimech.cli", "--help"], ["-m", "scimech.run.cli", "--help"])
    }
    assert all(r.returncode == 0 for r in runs.values()), {k: r.stderr[-2000:] for k, r in runs.items()}
    assert runs["scimech"].stdout.startswith("usage: scimech")
    assert runs["scimech.cli"].stdout == runs["scimech"].stdout == runs["scimech.run.cli"].stdout
    # the old path's warning is there for whoever turns DeprecationWarnings on
    shown = subprocess.run(
        [sys.executable, "-W", "default::DeprecationWarning", "-m", "scimech.run.cli", "--version"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0 and "scimech.run.cli moved to scimech.cli.commands" in shown.stderr


def test_the_console_script_is_the_cli_of_its_new_home():
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, func = scripts["scimech"].partition(":")
    assert module == "scimech.cli" and func == "main"
    import importlib

    from scimech.cli.commands import main

    assert getattr(importlib.import_module(module), func) is main


def test_dir_and_tab_completion_list_the_public_api():
    import scimech

    listed = dir(scimech)
    # the verbs a user reaches for first, written down by hand
    for name in ("record", "ablate", "patch", "patching_sweep", "ablation_sweep", "attribution_patching",
                 "probe_sites", "list_sites", "profile", "show_versions", "__version__"):  # fmt: skip
        assert name in listed, name
    for sub in ("capture", "causal", "analysis", "studies", "run", "cli", "errors"):
        assert sub in listed, sub
    assert "annotations" not in listed and not [n for n in listed if n.startswith("_") and n != "__version__"]
    for name in listed:  # everything listed resolves
        getattr(scimech, name)
    # what `sm.rec<TAB>` offers (the standard library's completer reads dir(), as IPython's does)
    completer = rlcompleter.Completer({"sm": scimech})
    offered = []
    while (word := completer.complete("sm.rec", len(offered))) is not None:
        offered.append(word.rstrip("("))
    assert offered == ["sm.record"]


def _imports(path: Path, root: Path = REPO) -> list[tuple[str, int]]:
    """``(module, line)`` of every import of ``path`` (function level too), relative ones resolved;
    ``from scimech import record`` is the module the package takes ``record`` from, and
    ``from ocean import timeaxis`` (``from . import timeaxis`` in ocean) names the module at the old path."""
    import scimech
    from scimech._moved import new_path

    parts = path.relative_to(root).with_suffix("").parts
    package = list(parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            if base == "scimech":
                for a in node.names:
                    if a.name in scimech._LAZY:
                        found.append((f"scimech.{scimech._LAZY[a.name]}", node.lineno))
                    elif a.name in scimech._SUBPACKAGES or new_path(f"scimech.{a.name}"):
                        found.append((f"scimech.{a.name}", node.lineno))
            else:
                found.append((base, node.lineno))
                if new_path(base) is None:  # `from ocean import timeaxis`: the module at an old path
                    found += [(f"{base}.{a.name}", node.lineno) for a in node.names if new_path(f"{base}.{a.name}")]
    return found


def upward_imports(root: Path = REPO) -> list[str]:
    """``file:line: module`` for every import of a floor of the core from a floor below it."""
    found = []
    for path in sorted((root / "scimech").rglob("*.py")):
        rel = path.relative_to(root).parts
        if len(rel) < 3 or rel[1] not in FLOORS:
            continue
        for module, line in _imports(path, root):
            words = module.split(".")
            if words[0] != "scimech" or len(words) < 2 or words[1] not in FLOORS:
                continue
            above = FLOORS.index(words[1]) > FLOORS.index(rel[1])
            if above and (path.relative_to(root).as_posix(), ".".join(words[:3])) not in KNOWN_EXCEPTIONS:
                found.append(f"{path.relative_to(root).as_posix()}:{line}: {module}")
    return found


def test_the_layer_check_finds_a_planted_upward_import(tmp_path):
    for floor in ("run", "capture", "cli"):
        (tmp_path / "scimech" / floor).mkdir(parents=True)
    (tmp_path / "scimech" / "run" / "a.py").write_text("def f():\n    from scimech.cli import commands\n")
    (tmp_path / "scimech" / "capture" / "b.py").write_text("from ..run import a\nfrom scimech import ablate\n")
    (tmp_path / "scimech" / "cli" / "c.py").write_text("from scimech.capture import b\n")
    assert upward_imports(tmp_path) == [
        "scimech/capture/b.py:2: scimech.causal.intervene",
        "scimech/run/a.py:2: scimech.cli",
    ]


def test_no_folder_of_the_core_imports_one_above_it():
    assert upward_imports() == []


@pytest.mark.parametrize("package", ["scimech", "ocean", "astro", "neuro", "bench", "scripts", "tests"])
def test_no_code_of_the_repository_imports_an_old_path(package):
    """Users see the warning only for their own imports: no module of the repository imports an old
    path, even in a function (the old paths are exercised by the tests of the alias table above)."""
    from scimech._moved import new_path

    here = Path(__file__).resolve()
    found = []
    for f in sorted((REPO / package).rglob("*.py")):
        if f == here:
            continue
        for module, line in _imports(f):
            if (
                new_path(module) is not None
                and (f.relative_to(REPO).as_posix(), module) not in OLD_PATHS_STILL_IMPORTED
            ):
                found.append(f"{f.relative_to(REPO)}:{line}: {module}")
    assert found == []


def test_the_old_path_check_sees_every_spelling_of_an_import(tmp_path):
    (tmp_path / "ocean").mkdir()
    (tmp_path / "ocean" / "a.py").write_text(
        "from . import timeaxis, data\nfrom .stores import write_zarr\nimport ocean.files\n"
        "from ocean.data import products\nfrom scimech import metrics, record\n"
    )
    moved = [(m, line) for m, line in _imports(tmp_path / "ocean" / "a.py", tmp_path) if m.split(".")[-1] != "data"]
    from scimech._moved import new_path

    assert [(m, line) for m, line in moved if new_path(m)] == [
        ("ocean.timeaxis", 1),
        ("ocean.stores", 2),
        ("ocean.files", 3),
        ("scimech.metrics", 5),
    ]


def test_a_fingerprint_names_a_moved_class_by_its_old_module():
    """A run folder from before the move stays current: a fingerprint of a dataclass of a moved module
    (a catalogue's Reading in astro's input fingerprint) is the one scimech 0.1 wrote (value computed
    with scimech.fingerprint at the commit before the move)."""
    from scimech.run.fingerprint import fingerprint
    from scimech.studies.reading import ReadRow

    assert fingerprint(ReadRow("sst", "tos", "standard_name", "K", "degC", "K -> degC")) == "9f49c1b790567038"


@pytest.mark.parametrize(
    "study, moved",
    [
        ("astro", {"planted_recovery", "planted_findings", "verdict_wording", "recovery_line", "study_findings",
                   "recovery_text", "_all_finite"}),
        ("ocean", {"recovery_text", "no_planted_truth"}),
    ],
)  # fmt: skip
def test_findings_still_gives_the_names_that_moved_to_recovery_with_a_warning(study, moved):
    """Planted truth vs what was found lives in ``recovery.py`` in every study; the names of scimech 0.1
    (``from astro.findings import planted_recovery``) are the recovery module's functions, warned."""
    import importlib
    import warnings

    findings = importlib.import_module(f"{study}.findings")
    recovery = importlib.import_module(f"{study}.recovery")
    public = {n for n in moved if not n.startswith("_")}
    assert public <= set(recovery.__all__) and not moved & set(findings.__all__)
    assert not [n for n in moved if n in vars(findings)]  # defined once, in recovery.py
    for name in sorted(moved):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            old = getattr(findings, name)
        assert old is getattr(recovery, name), name
        assert [str(w.message) for w in seen] == [
            f"{study}.findings.{name} moved to {study}.recovery.{name}; the old path will be removed in scimech 0.3.0"
        ]
        assert seen[0].filename == __file__  # the warning points at the line that named it
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        findings.no_such_name  # noqa: B018


def test_old_path_and_new_path_undo_each_other():
    """A fingerprint names a class of a moved module by its old path (``scimech.run.fingerprint``):
    ``old_path`` undoes ``new_path`` for every entry of every table, a moved package's modules too."""
    from scimech._moved import TABLES, new_path, old_path

    for package, table in TABLES.items():
        for old in table:
            for name in (f"{package}.{old}", f"{package}.{old}.sub"):
                assert old_path(new_path(name)) == name, name
    assert new_path("ocean.stores") == "ocean.data.stores" and old_path("ocean.data.stores") == "ocean.stores"
    assert old_path("ocean.data") == "ocean.data" and new_path("ocean.data") is None  # the package itself is new
    assert new_path("oceanx.stores") is None and new_path("ocean") is None and old_path("ocean.plan") == "ocean.plan"
