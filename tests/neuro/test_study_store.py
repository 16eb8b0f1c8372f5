"""What a run leaves behind: every array in the study's store once, as open files (``.npy`` and
JSON, no pickle), read back bit for bit; units that hold scores, not copies of data; and
resumption that still redoes only unfinished units."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from neuro.data.stores import ArrayStore, is_ref
from neuro.data.taskstore import load_task, save_task


def _same(a, b) -> bool:
    """Equal bit for bit, with the same dtype, shape and memory order."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.ndim > 1 and (a.flags.f_contiguous and not a.flags.c_contiguous) != (
        b.flags.f_contiguous and not b.flags.c_contiguous
    ):
        return False
    return list(a.flat) == list(b.flat) if a.dtype == object else a.tobytes() == b.tobytes()


def _files(root) -> list:
    return sorted(p.name for p in (root / "arrays").iterdir())


def test_an_array_is_written_once_and_read_back_exactly(tmp_path):
    store = ArrayStore(tmp_path / "store")
    x = np.arange(12.0).reshape(3, 4)
    arrays = {
        "c": x,
        "f": np.asfortranarray(x),
        "view": x[:, ::2],
        "scalar": np.array(0.005),
        "flag": np.array(True),
        "names": np.array(["MN", "V2a"], dtype=object),
        "prior": np.broadcast_to(np.float32(1.0), (500, 500)),
        "text": np.array(["L", "R"]),
        "empty": np.zeros((0, 3), np.float32),
    }
    refs = store.put(arrays)
    got = store.get(refs)
    assert list(got) == list(arrays) and all(_same(arrays[k], got[k]) for k in arrays)
    assert got["names"].dtype == object and got["prior"].strides == (0, 0)  # a broadcast value stays one value
    files = _files(store.root)
    assert len(files) == len(arrays) and all(f.endswith(".npy") for f in files)
    assert max((store.root / "arrays" / f).stat().st_size for f in files) < 1000  # the prior: one float, not 250,000
    # the same arrays again, under other names and in another manifest: nothing new is written
    again = store.put({"copy": x.copy(), "same": x})
    assert again["copy"] == again["same"] == refs["c"] and _files(store.root) == files
    m1, m2 = store.save("a", arrays, note="x"), store.save("a", arrays, note="x")
    assert m1 == m2 and ArrayStore.load(m1)[1] == {"note": "x"}
    for f in files:  # plain .npy: open without pickles
        np.load(store.root / "arrays" / f, allow_pickle=False)
    with pytest.raises(TypeError, match="pickle"):
        store.put({"bad": np.array([{"a": 1}], dtype=object)})


def test_a_task_round_trips_through_the_store(small_task, tmp_path):
    from neuro.faithfulness import true_impulse_response
    from neuro.run import _fit_and_score

    task = pickle.loads(pickle.dumps(small_task))  # a copy: the shared fixture stays as it is
    task.probes["impulse_true"] = true_impulse_response(task)
    assert task.probes["impulse_true"].flags.f_contiguous  # a layout the store must keep
    manifest = save_task(task, tmp_path / "store")
    back = load_task(str(manifest))
    for k in ("name", "context", "horizon", "signal", "dt"):
        assert getattr(back, k) == getattr(task, k)
    assert _same(back.train_series, task.train_series) and _same(back.true_weights, task.true_weights)
    for sp, w in task.windows().items():
        assert all(
            _same(getattr(back.windows()[sp], f), getattr(w, f))
            for f in ("context", "stim_context", "stim_future", "target", "trial", "start")
        )
    assert list(back.meta) == list(task.meta) and all(_same(back.meta[k], task.meta[k]) for k in task.meta)
    assert list(back.probes) == list(task.probes) and all(_same(back.probes[k], task.probes[k]) for k in task.probes)
    assert all(_same(back.recording[k].values, task.recording[k].values) for k in ("observed", "split", "tail_angle"))
    # written once: saving it again writes no array, and neither does a search's data (the same arrays)
    from neuro.search.sandbox import save_data

    files = _files(tmp_path / "store")
    assert save_task(task, tmp_path / "store") == manifest and _files(tmp_path / "store") == files
    save_data(task.data_arrays("full"), ArrayStore(tmp_path / "store"))
    scalars = [f for f in _files(tmp_path / "store") if f not in files]  # meta/dt & co. as 0-d arrays
    assert all((tmp_path / "store" / "arrays" / f).stat().st_size < 200 for f in scalars)
    assert not list(tmp_path.rglob("*.pkl"))
    # a baseline fitted and scored on the stored task gives the same row, to the last bit
    a, b = _fit_and_score("ridge_arx", task, True), _fit_and_score("ridge_arx", back, True)
    a.pop("seconds"), b.pop("seconds")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_the_quick_stage_is_cut_from_the_full_data(small_task, tmp_path):
    from neuro.search.sandbox import read_data, save_data
    from neuro.tasks import quick_stage

    full = small_task.data_arrays("full")
    want = small_task.data_arrays("quick")
    for got in (quick_stage(full), read_data(save_data(full, ArrayStore(tmp_path), "quick"))):
        assert list(got) == list(want) and all(_same(got[k], want[k]) for k in want)
    assert list(read_data(save_data(full, ArrayStore(tmp_path), "full"))) == list(full)


def test_baselines_read_the_task_from_the_store_and_resume(small_task, tmp_path):
    from neuro.run import run_baselines

    names = ["mean", "last_value"]
    first = run_baselines(small_task, names, store=tmp_path / "baselines", array_store=tmp_path / "store")
    assert not list(tmp_path.rglob("*.pkl")) and len(list((tmp_path / "store").glob("task-*.json"))) == 1
    records = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.done.json")}
    again = run_baselines(small_task, names, store=tmp_path / "baselines", array_store=tmp_path / "store")
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.done.json")} == records  # nothing redone
    assert first.drop(columns="seconds").equals(again.drop(columns="seconds"))


def test_a_search_keeps_scores_in_its_units_and_arrays_once(small_task, tmp_path):
    from neuro.search.offline import OfflineProposer
    from neuro.search.sandbox import SandboxLimits
    from neuro.search.tree import TreeSearch

    store = ArrayStore(tmp_path / "store")

    def search(folder, max_nodes):
        return TreeSearch(
            small_task,
            OfflineProposer(priors=True),
            tmp_path / folder,
            max_nodes=max_nodes,
            n_drafts=2,
            limits=SandboxLimits(wall_seconds=30, cpu_seconds=30),
            unit_store=tmp_path / folder / "units",
            store=store,
        )

    ts = search("s", 2)
    nodes = ts.run()
    ok = [n for n in nodes if n.status == "ok"]
    assert ok and all(n.arrays and all(is_ref(r) for r in n.arrays.values()) for n in ok)
    arrays = ts.node_arrays(ok[0])
    assert {"jacobian", "mae/val", "mae_window/test"} <= set(arrays) and arrays["jacobian"].dtype == np.float64
    # the search's folder holds its journal and unit records only: no data file, no copy of an array
    left = sorted(str(p.relative_to(tmp_path / "s")) for p in (tmp_path / "s").rglob("*") if p.is_file())
    assert all(p == "journal.jsonl" or p.startswith("units/") for p in left), left
    for rec in (tmp_path / "s" / "units" / "units").glob("node=*.json"):
        if rec.name.endswith(".done.json"):
            continue
        res = json.loads(rec.read_text())
        assert all(is_ref(r) for r in res["arrays"].values()) and rec.stat().st_size < 20_000
    # a second search on the same task writes no data array again to the shared store: only
    # the probes the first one's scoring added to the task since (its tail-angle readout)
    before = set(_files(store.root))
    search("other", 0)
    probes = {
        r["file"]
        for m in store.root.glob("data-*.json")
        for k, r in json.loads(m.read_text())["arrays"].items()
        if k.startswith("probe/")
    }
    assert set(_files(store.root)) - before <= probes

    # resumption: a rerun redoes nothing; a unit whose arrays are gone is redone
    (tmp_path / "s" / "journal.jsonl").write_text("")  # as if killed before the journal was written
    records = {p: p.stat().st_mtime_ns for p in (tmp_path / "s").rglob("*.done.json")}
    again = search("s", 2).run()
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "s").rglob("*.done.json")} == records
    assert [(n.status, n.val, n.arrays) for n in again] == [(n.status, n.val, n.arrays) for n in nodes]
    (tmp_path / "s" / "journal.jsonl").write_text("")
    for r in ok[0].arrays.values():
        (store.root / "arrays" / r["file"]).unlink(missing_ok=True)
    third = search("s", 2).run()
    redone = [p for p in (tmp_path / "s").rglob("*.done.json") if p.stat().st_mtime_ns != records.get(p)]
    assert redone and [(n.status, n.val) for n in third] == [(n.status, n.val) for n in nodes]
    assert store.has(third[ok[0].id].arrays)
