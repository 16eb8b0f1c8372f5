"""neuro's data layer is one folder, ``neuro/data/``: the names of the former module ``neuro.data``
(``from neuro.data import from_traces``) work unchanged and silently; the modules that lived beside it
(``neuro.reader``, ``neuro.store``, ...) still import at their old paths, as the module at the new path,
with a DeprecationWarning at the user's import line until scimech 0.3.0; and a study's folder from
before the move stays current (its task fingerprint and store names do not name modules)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: the modules that lived flat in neuro/ beside data.py, and their new homes, written down from the
#: package's listing before the move (the reader under ocean's role name, the store as `stores`)
OLD_TO_NEW = {
    "reader": "reading",
    "store": "stores",
    "suite2p": "suite2p",
    "taskstore": "taskstore",
    "zapbench": "zapbench",
}

#: ``neuro.data.__all__`` before it became a package (copied from the old module)
OLD_PUBLIC_NAMES = (
    "from_traces",
    "read_traces",
    "inspect_traces",
    "ID_SPLITS",
    "HELD_OUT_SUITE",
    "PROTOCOLS",
    "ZAPBENCH",
)


def _run(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


OLD_NEURO_IMPORT_STATEMENTS = r"""
import json, warnings
out = {}
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    import neuro.reader                                      # noqa
    from neuro import store
    from neuro.suite2p import read_suite2p
    from neuro.taskstore import load_task
    import neuro.zapbench as old_zapbench
import neuro.data.reading, neuro.data.stores, neuro.data.suite2p, neuro.data.taskstore, neuro.data.zapbench
out["same"] = [
    neuro.reader is neuro.data.reading,
    store is neuro.data.stores,
    read_suite2p is neuro.data.suite2p.read_suite2p,
    load_task is neuro.data.taskstore.load_task,
    old_zapbench is neuro.data.zapbench,
]
out["warned"] = sorted({(w.filename, w.lineno, str(w.message)) for w in seen if w.category is DeprecationWarning})
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    import neuro
    vars(neuro).pop("taskstore", None)
    attribute = neuro.taskstore                              # an attribute of the package
out["attribute"] = [attribute is neuro.data.taskstore, [str(w.message) for w in seen]]
print(json.dumps(out))
"""


def test_old_paths_give_the_modules_of_neuro_data_and_warn_at_the_import_line():
    out = _run(OLD_NEURO_IMPORT_STATEMENTS)
    assert out["same"] == [True] * 5
    lines = {"reader": 6, "store": 7, "suite2p": 8, "taskstore": 9, "zapbench": 10}
    assert sorted(out["warned"]) == sorted(
        [
            "<string>",
            line,
            f"neuro.{old} moved to neuro.data.{OLD_TO_NEW[old]}; the old path will be removed in scimech 0.3.0",
        ]
        for old, line in lines.items()
    )
    same, said = out["attribute"]
    assert same and said == [
        "neuro.taskstore moved to neuro.data.taskstore; the old path will be removed in scimech 0.3.0"
    ]


def test_the_table_and_the_folder_agree_and_no_file_is_left_at_an_old_path():
    from scimech._moved import NEURO_MOVED, TABLES, new_path, old_path

    assert NEURO_MOVED == {old: f"data.{new}" for old, new in OLD_TO_NEW.items()} and TABLES["neuro"] is NEURO_MOVED
    assert not [m for m in OLD_TO_NEW if (REPO / "neuro" / f"{m}.py").exists()]
    assert not (REPO / "neuro" / "data.py").exists()  # the module became the package
    assert {p.stem for p in (REPO / "neuro" / "data").glob("*.py")} >= set(OLD_TO_NEW.values()) | {"samples", "splits"}
    # the package itself is new, not an old path; its modules' old paths undo the new ones
    assert new_path("neuro.data") is None and old_path("neuro.data") == "neuro.data"
    assert new_path("neuro.reader") == "neuro.data.reading" and old_path("neuro.data.stores") == "neuro.store"
    assert new_path("neuro.tasks") is None and new_path("neurox.reader") is None


def test_the_names_of_the_former_module_work_silently_from_the_package():
    """``from neuro.data import from_traces`` (and every name of the old ``__all__``) is the function of
    its module, with no warning: these names did not move for the user."""
    import neuro.data as nd

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = {name: getattr(nd, name) for name in OLD_PUBLIC_NAMES}
    assert set(OLD_PUBLIC_NAMES) <= set(nd.__all__) and set(OLD_PUBLIC_NAMES) <= set(dir(nd))
    assert got["from_traces"].__module__ == "neuro.data.samples"
    assert got["ZAPBENCH"]["condition_offsets"][3] == 3078  # ZAPBench's `taxis` starts at step 3078
    assert got["HELD_OUT_SUITE"] == "held_out_condition" and got["ID_SPLITS"] == ("train", "val", "test")
    assert {"reading", "samples", "splits", "stores", "suite2p", "taskstore", "zapbench"} <= set(dir(nd))


def test_a_study_folder_from_before_the_move_stays_current(tmp_path):
    """The resume check (``task_fingerprint.txt``) and the store's manifest names of a traces task are
    those the code wrote before the move (computed at the commit before it: they hash arrays and
    names, not module paths)."""
    from neuro.data import from_traces
    from neuro.data.taskstore import save_task
    from neuro.run import task_fingerprint
    from neuro.synthetic import latent_traces

    traces = latent_traces(12, 600, rank=3, conditions=("dark", "flash", "grating"), dt=0.5, seed=0)
    task = from_traces(traces, context=4, horizon=8, max_windows=30)
    assert task_fingerprint([task]) == "55146c6e05ca9d5a"
    assert save_task(task, tmp_path).name == "task-traces-c4-h8-6d01138c86d90815.json"
    zap = latent_traces(10, 2400, rank=3, conditions=("gain", "taxis", "dark"), dt=1.0, seed=1)
    assert task_fingerprint([from_traces(zap, protocol="zapbench", context=4, horizon=32)]) == "b61fa02c8f8625a5"
