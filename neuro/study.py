"""The discovery study: simulator -> splits -> baselines -> tree search with and without
structural priors -> ID / OOD / faithfulness table, figures and a report.

Units of work go through :func:`scimech.parallel.map_units` into
:class:`scimech.results.UnitStore` folders under the output folder: one unit per baseline
fit (``baselines/``) and one per candidate evaluation of each search
(``search_<label>/units/``). With a Dask ``client`` they run on its workers; rerunning with the
same output folder redoes only unfinished units (and the searches resume from their journals).
"""

from __future__ import annotations

import functools
import json
import math
import os
import pickle
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .baselines import BASELINES, fit_baseline
from .faithfulness import faithfulness, physiology_scores, probe_model
from .search.offline import OfflineProposer
from .search.sandbox import SandboxLimits
from .search.tree import TreeSearch
from .tasks import OOD_SUITES, build_task

__all__ = ["run_baselines", "run_search", "run_study", "findings", "baseline_unit"]

COLS = ["val", "test", "ood_mean", "id_ood_gap"] + [f"ood_{s}" for s in OOD_SUITES] + [
    "sign_accuracy", "weight_correlation", "edge_auroc", "impulse_distance", "lr_phase", "rc_phase",
    "frequency", "frequency_error", "lesion_mae"]


def _row(metrics: dict, faith: dict) -> dict:
    r = {"val": metrics.get("val"), "test": metrics.get("test")}
    oods = [metrics.get(f"ood_{s}") for s in OOD_SUITES]
    for s, v in zip(OOD_SUITES, oods):
        r[f"ood_{s}"] = v
    fin = [v for v in oods if v is not None and math.isfinite(v)]
    r["ood_mean"] = float(np.mean(fin)) if fin else np.nan
    r["id_ood_gap"] = r["ood_mean"] - r["test"] if r["test"] is not None else np.nan
    r.update({k: faith.get(k) for k in COLS if k in faith})
    return r


def _fit_and_score(name: str, task, quick: bool) -> dict:
    kw = {"steps": 100} if (quick and name in ("gru", "tide")) else {}
    t0 = time.perf_counter()
    model = fit_baseline(name, task, **kw)
    metrics, arrays = probe_model(model, task)
    row = _row(metrics, faithfulness(arrays, metrics, task))
    row["seconds"] = time.perf_counter() - t0
    return row


@functools.lru_cache(maxsize=2)
def _load_task(path: str, stamp: tuple):
    with open(path, "rb") as f:
        return pickle.load(f)


def baseline_unit(name: str, task_file: str, quick: bool) -> dict:
    """One baseline fit and its scores (a unit of :func:`run_baselines`, picklable).

    ``task_file`` is the study's own pickled task (written by :func:`run_baselines` under the
    output folder; loaded once per worker process)."""
    st = os.stat(task_file)
    return _fit_and_score(name, _load_task(task_file, (st.st_mtime_ns, st.st_size)), quick)


def run_baselines(task, names=None, quick: bool = True, *, store=None, client=None) -> pd.DataFrame:
    """Fit and score baselines; one row per baseline (``seconds``: wall time of the fit, s).

    With ``store`` (a :class:`scimech.results.UnitStore` or folder) each baseline is a unit of
    :func:`scimech.parallel.map_units` (on ``client``'s workers if given): finished ones are
    skipped on a rerun.
    """
    names = list(names or BASELINES)
    if store is None and client is None:
        return pd.DataFrame({name: _fit_and_score(name, task, quick) for name in names}).T
    from scimech.parallel import map_units
    from scimech.results import UnitStore, atomic_write_bytes

    store = store if isinstance(store, UnitStore) else UnitStore(store)
    task_file = store.root / "task.pkl"
    todo = [n for n in names if not store.done(n)]
    if todo:  # workers need the task; the parent's copy is the only one (no re-simulation)
        if task.signal == "rates" and "impulse_true" not in task.probes:
            # simulated once here, not once per worker (and again for the searches)
            from .faithfulness import true_impulse_response

            task.probes["impulse_true"] = true_impulse_response(task)
        atomic_write_bytes(task_file, pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL))
    units = {n: dict(name=n, task_file=str(task_file.resolve()), quick=quick) for n in names}
    rows = map_units(baseline_unit, units, store, client=client, desc="baselines")
    table = pd.DataFrame({n: {k: (np.nan if v is None else v) for k, v in rows[n].items()} for n in names}).T
    order = [c for c in COLS if c in table.columns]  # the stored JSON has its keys sorted
    return table[order + [c for c in table.columns if c not in order]]


def run_search(task, out_dir: Path, priors: bool, *, max_nodes: int = 10, max_seconds: float = 120.0,
               workers: int = 2, seed: int = 0, proposer=None, policy: str = "greedy", generation: int | None = None,
               client=None, unit_store=None):
    """One tree search (see :class:`neuro.search.tree.TreeSearch`); returns ``(search, nodes)``."""
    proposer = proposer or OfflineProposer(priors=priors)
    ts = TreeSearch(task, proposer, out_dir, policy=policy, max_nodes=max_nodes, max_seconds=max_seconds,
                    workers=workers, seed=seed, limits=SandboxLimits(wall_seconds=60, cpu_seconds=60),
                    n_drafts=min(5, max(2, max_nodes // 2)), generation=generation, client=client,
                    unit_store=unit_store)
    nodes = ts.run()
    return ts, nodes


def _node_row(node) -> dict:
    metrics = {"val": node.val, "test": node.test, **{f"ood_{k}": v for k, v in node.ood.items()}}
    return _row(metrics, node.faith)


def findings(table: pd.DataFrame) -> list[str]:
    """Plain statements of which reference findings reproduce, from the numbers."""
    out = []
    base = table[~table.index.str.startswith("discovered")]
    disc = table[table.index.str.startswith("discovered")]
    if len(disc) == 0:
        return ["No discovered model finished; no finding can be assessed."]
    bb = base["val"].astype(float).idxmin()
    bd = disc["val"].astype(float).idxmin()
    ok = float(disc.loc[bd, "test"]) < float(base.loc[bb, "test"])
    out.append(f"{'REPRODUCED' if ok else 'NOT reproduced'}: discovered programs beat the baselines in "
               f"distribution (best discovered test MAE {float(disc.loc[bd, 'test']):.3f} [{bd}] vs best baseline "
               f"{float(base.loc[bb, 'test']):.3f} [{bb}]).")
    if "discovered (no priors)" in disc.index and "discovered (priors)" in disc.index:
        f, p = disc.loc["discovered (no priors)"], disc.loc["discovered (priors)"]
        f_id, p_id = float(f["test"]), float(p["test"])
        f_ood, p_ood = float(f["ood_mean"]), float(p["ood_mean"])
        id_close = f_id <= 1.05 * p_id          # unconstrained does (about) as well in distribution ...
        ood_worse = f_ood > 1.05 * p_ood        # ... but clearly worse out of distribution
        verdict = "REPRODUCED" if (id_close and ood_worse) else (
            "PARTLY reproduced (priors better both ID and OOD)" if ood_worse else "NOT reproduced")
        out.append(f"{verdict}: unconstrained search does well in distribution but worse on novel conditions than "
                   f"search with wiring priors (ID test {f_id:.3f} vs {p_id:.3f}; OOD mean {f_ood:.3f} vs "
                   f"{p_ood:.3f}; ID-OOD gap {float(f['id_ood_gap']):.3f} vs {float(p['id_ood_gap']):.3f}).")
        if not np.isfinite([float(p.get(k, np.nan)) for k in ("edge_auroc", "impulse_distance")]).any():
            out.append("NOT ASSESSED: recovery of connectivity and impulse responses (no true circuit behind "
                       "recorded traces).")
            return out
        auc_ok = float(p.get("edge_auroc", np.nan)) > float(f.get("edge_auroc", np.nan))
        sg_ok = float(p.get("sign_accuracy", np.nan)) > float(f.get("sign_accuracy", np.nan))
        out.append(f"{'REPRODUCED' if (auc_ok and sg_ok) else ('PARTLY reproduced' if (auc_ok or sg_ok) else 'NOT reproduced')}: "
                   f"priors recover effective connectivity better (edge AUROC {float(p['edge_auroc']):.3f} vs "
                   f"{float(f['edge_auroc']):.3f}; sign accuracy {float(p['sign_accuracy']):.3f} vs {float(f['sign_accuracy']):.3f}).")
        ir_ok = float(p.get("impulse_distance", np.inf)) < float(f.get("impulse_distance", np.inf))
        out.append(f"{'REPRODUCED' if ir_ok else 'NOT reproduced'}: priors recover impulse responses better "
                   f"(relative distance {float(p['impulse_distance']):.3f} vs {float(f['impulse_distance']):.3f}).")
    return out


def run_study(out_dir: Path, quick: bool = True, *, context: int = 4, horizon: int = 32, max_nodes: int | None = None,
              workers: int = 2, seed: int = 0, proposer_factory=None, duration: float | None = None,
              baselines=None, client=None, generation: int | None = None, max_windows: int = 400,
              search_seconds: float | None = None, task=None) -> Path:
    """Run the whole study and write ``out_dir/report.md``; returns its path.

    Parameters
    ----------
    client
        A Dask client: baseline fits and candidate evaluations run on its workers. Without
        one, baselines run in this process and a generation's evaluations on ``workers``
        threads (each candidate in its own sandbox process either way).
    generation
        Candidates proposed per search generation (default ``workers``); with the seed it fixes
        the trees, whatever runs them.
    max_windows
        Windows per split of the task (fewer: faster, noisier scores).
    search_seconds
        Wall-clock budget per search, s (default 90 quick, 3600 full). The node budget is
        reproducible, a time budget is not: give a large one when comparing runs.
    task
        A task to study instead of simulating one (your traces: :func:`neuro.data.from_traces`).
    """
    from scimech.report import Report

    from .plots import plot_activity, plot_tail_angle, plot_tree, tail_readout

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if task is None:
        task = build_task(quick, context=context, horizon=horizon, duration=duration, seed=seed,
                          max_windows=max_windows)
    t_sim = time.perf_counter() - t0
    true_phys = physiology_scores(task.probes.get("swim_target"), task) if "swim_target" in task.probes else {}
    table = run_baselines(task, baselines, quick=quick, store=out_dir / "baselines", client=client)
    t_base = time.perf_counter() - t0 - t_sim
    searches = {}
    n_nodes = max_nodes or (12 if quick else 40)
    for label, priors in (("priors", True), ("no priors", False)):
        prop = proposer_factory(priors) if proposer_factory else None
        folder = out_dir / f"search_{label.replace(' ', '_')}"
        ts, nodes = run_search(task, folder, priors, max_nodes=n_nodes, workers=workers, seed=seed, proposer=prop,
                               max_seconds=search_seconds or (90 if quick else 3600), generation=generation,
                               client=client, unit_store=folder / "units")
        searches[label] = (ts, nodes)
        best = ts.best()
        if best is not None:
            table.loc[f"discovered ({label})"] = pd.Series(_node_row(best))
    t_search = time.perf_counter() - t0 - t_sim - t_base
    rep = Report(out_dir, title="Model discovery against a simulated larval zebrafish")
    rep.text(f"Task `{task.name}`: {task.n_neurons} observed units, context {task.context} and horizon "
             f"{task.horizon} steps of {task.dt * 1000:.0f} ms; MAE in z units (per-neuron train z-score). "
             f"{len(task.train_series)} training trials; ID val/test windows {len(task.val)}/{len(task.test)}; "
             f"OOD suites {', '.join(f'{k} ({len(v)})' for k, v in task.ood.items())}. "
             f"Simulation {t_sim:.0f} s, baselines {t_base:.0f} s, search {t_search:.0f} s.")
    rep.heading("Which reference findings reproduce")
    rep.text("\n".join(f"- {s}" for s in findings(table)))
    if true_phys:
        rep.text(f"Simulator physiology (true swimming probes): left-right phase {true_phys['lr_phase']:.2f} cycles "
                 f"(0.5 = antiphase), rostro-caudal phase {true_phys['rc_phase']:.3f} cycles over "
                 f"{np.diff(sorted({int(s) for s in task.meta['segment'] if s >= 0}))[0]} segments, "
                 f"dominant frequency {true_phys['frequency']:.1f} Hz.")
    cols = [c for c in COLS if c in table.columns]
    rep.table(table[cols].astype(float), caption="ID / OOD MAE and faithfulness of every baseline and the best "
              "discovered programs (selection used ID validation only)")
    for label, (_ts, nodes) in searches.items():
        rep.figure(plot_tree(nodes, title=f"search tree ({label})"), f"tree_{label.replace(' ', '_')}",
                   caption=f"Search tree with {label}: ID validation MAE per node; failed nodes marked x")
        summary = pd.DataFrame([{"id": n.id, "parent": n.parent, "op": n.op, "status": n.status, "val": n.val,
                                 "quick_val": n.quick_val, "error": (n.error or "")[:60]} for n in nodes]).set_index("id")
        rep.table(summary, caption=f"Nodes of the search with {label}")
    # activity and tail angle on one swimming probe
    if "swim_target" in task.probes:
        k = 0
        tgt = task.probes["swim_target"][k][: task.horizon]
        preds = {}
        for label, (ts, _nodes) in searches.items():
            b = ts.best()
            if b is not None:
                f = ts.out / f"node_{b.id:04d}.npz"
                if f.exists():
                    with np.load(f) as z:
                        if "swim_pred" in z.files:
                            preds[f"discovered ({label})"] = z["swim_pred"][k][: task.horizon]
        m = fit_baseline("ridge_arx", task)
        _, arr = probe_model(m, task)
        preds["ridge_arx"] = arr["swim_pred"][k][: task.horizon]
        names = task.meta["name"]
        mn = [int(i) for i in np.flatnonzero(np.asarray(task.meta["type"]) == "MN")[:2]]
        v2a = [int(i) for i in np.flatnonzero(np.asarray(task.meta["type"]) == "V2a")[:2]]
        rep.figure(plot_activity(tgt, preds, names, task.dt, units=tuple(mn + v2a)), "activity",
                   caption="Activity predicted vs true on a swimming window (z units)")
        ro = tail_readout(task)
        rep.figure(plot_tail_angle(ro(tgt[None])[0], {k: ro(v[None])[0] for k, v in preds.items()}, task.dt),
                   "tail_angle", caption="Tail angle (rad) read out linearly from true vs predicted MN activity")
    table.to_csv(out_dir / "results.csv")
    (out_dir / "findings.json").write_text(json.dumps(findings(table), indent=1))
    return rep.write()
