"""The discovery study: simulator -> splits -> baselines -> tree searches with and without
structural priors over several search seeds -> ID / OOD / faithfulness table, verdicts with
intervals, the planted-truth table, a long-context (256 steps) task for the tail beat, figures
and a report.

Budgets (:data:`BUDGETS`): ``quick`` is the smoke test (one search seed, 12 nodes per search,
a small priors search at the long context); ``medium`` answers the study's questions on two
cores in about ten minutes (three search seeds, 3 trials per OOD suite, both searches at the
long context); ``full`` is the full-size data and budget.

Units of work go through :func:`scimech.parallel.map_units` into
:class:`scimech.results.UnitStore` folders under the output folder: one unit per baseline
fit (``baselines/``) and one per candidate evaluation of each search
(``search_<label>[_seed<s>]/units/``; the long context under ``long_context/``). With a Dask
``client`` they run on its workers; rerunning with the same output folder redoes only
unfinished units (and the searches resume from their journals).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import pickle
import time
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from scimech.study import assess

from .baselines import BASELINES, fit_baseline
from .faithfulness import faithfulness, physiology_scores, probe_model
from .search.offline import OfflineProposer
from .search.sandbox import SandboxLimits
from .search.tree import TreeSearch
from .tasks import OOD_SUITES, build_recording, build_task
from .verdicts import compare, verdict_better

__all__ = ["run_baselines", "run_search", "run_study", "findings", "baseline_unit", "BUDGETS", "SEEDED_BASELINES"]

COLS = ["val", "test", "ood_mean", "id_ood_gap"] + [f"ood_{s}" for s in OOD_SUITES] + [
    "sign_accuracy", "weight_correlation", "edge_auroc", "impulse_distance", "lr_phase", "rc_phase",
    "frequency", "frequency_error", "tail_phase_error", "tail_amplitude_ratio", "tail_beat_forecast", "lesion_mae"]

# nodes per search, search seeds, the long-context searches, wall-clock per search (s), OOD
# trials, Adam steps of the GRU and TiDE baselines (TiDE's validation MAE is still falling at
# 400 steps on the quick task: 0.333 at 100, 0.316 at 200, 0.304 at 400, 0.300-0.307 at 800)
BUDGETS = {
    "quick": dict(nodes=12, seeds=1, long_nodes=6, long_priors=(True,), search_seconds=90.0, ood_trials=1,
                  torch_steps=100),
    "medium": dict(nodes=24, seeds=3, long_nodes=10, long_priors=(True, False), search_seconds=240.0, ood_trials=3,
                   torch_steps=800),
    "full": dict(nodes=40, seeds=3, long_nodes=40, long_priors=(True, False), search_seconds=3600.0, ood_trials=3,
                 torch_steps=1500),
}
SEEDED_BASELINES = ("gru", "tide")  # trained from a random start: refitted for every search seed
_WINDOW_SPLITS = ("test",) + tuple(f"ood_{s}" for s in OOD_SUITES)


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


def _fit_and_score(name: str, task, quick: bool, seed: int = 0, torch_steps: int | None = None) -> dict:
    kw = {}
    if name in SEEDED_BASELINES:
        kw["seed"] = seed
        steps = torch_steps or (100 if quick else None)
        if steps:
            kw["steps"] = int(steps)
    t0 = time.perf_counter()
    model = fit_baseline(name, task, **kw)
    metrics, arrays = probe_model(model, task)
    row = _row(metrics, faithfulness(arrays, metrics, task))
    row["seconds"] = time.perf_counter() - t0
    row["window_mae"] = {sp: arrays[f"mae_window/{sp}"].tolist() for sp in _WINDOW_SPLITS
                         if f"mae_window/{sp}" in arrays}
    return row


@functools.lru_cache(maxsize=2)
def _load_task(path: str, stamp: tuple):
    with open(path, "rb") as f:
        return pickle.load(f)


def baseline_unit(name: str, task_file: str, quick: bool, seed: int = 0, torch_steps: int | None = None) -> dict:
    """One baseline fit and its scores (a unit of :func:`run_baselines`, picklable).

    ``task_file`` is the study's own pickled task (written by :func:`run_baselines` under the
    output folder; loaded once per worker process)."""
    st = os.stat(task_file)
    return _fit_and_score(name, _load_task(task_file, (st.st_mtime_ns, st.st_size)), quick, seed, torch_steps)


def run_baselines(task, names=None, quick: bool = True, *, store=None, client=None, seed: int = 0,
                  key_suffix: str = "", windows: dict | None = None, torch_steps: int | None = None) -> pd.DataFrame:
    """Fit and score baselines; one row per baseline (``seconds``: wall time of the fit, s).

    With ``store`` (a :class:`scimech.results.UnitStore` or folder) each baseline is a unit of
    :func:`scimech.parallel.map_units` (on ``client``'s workers if given): finished ones are
    skipped on a rerun. ``seed`` seeds the baselines trained from a random start
    (:data:`SEEDED_BASELINES`), trained for ``torch_steps`` Adam steps (default 100 when
    ``quick``, else the class default; part of their unit key); ``key_suffix`` is appended to
    the unit keys. A ``windows`` dict is filled with ``{name: {split: per-window MAE}}`` (test
    and OOD windows).
    """
    names = list(names or BASELINES)
    if store is None and client is None:
        rows = {name: _fit_and_score(name, task, quick, seed, torch_steps) for name in names}
    else:
        from scimech.parallel import map_units
        from scimech.results import UnitStore, atomic_write_bytes

        store = store if isinstance(store, UnitStore) else UnitStore(store)
        task_file = store.root / "task.pkl"
        steps = torch_steps or (100 if quick else "default")
        keys = {n: f"{n}-steps{steps}{key_suffix}" if n in SEEDED_BASELINES else f"{n}{key_suffix}" for n in names}
        todo = [n for n in names if not store.done(keys[n])]
        if todo:  # workers need the task; the parent's copy is the only one (no re-simulation)
            if task.signal == "rates" and "impulse_true" not in task.probes:
                # simulated once here, not once per worker (and again for the searches)
                from .faithfulness import true_impulse_response

                task.probes["impulse_true"] = true_impulse_response(task)
            atomic_write_bytes(task_file, pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL))
        units = {keys[n]: dict(name=n, task_file=str(task_file.resolve()), quick=quick, seed=seed,
                               torch_steps=torch_steps) for n in names}
        done = map_units(baseline_unit, units, store, client=client, desc="baselines")
        rows = {n: done[keys[n]] for n in names}
    if windows is not None:
        for n in names:
            windows[n] = {k: np.asarray(v, float) for k, v in (rows[n].get("window_mae") or {}).items()}
    table = pd.DataFrame({n: {k: (np.nan if v is None else v) for k, v in rows[n].items() if k != "window_mae"}
                          for n in names}).T
    order = [c for c in COLS if c in table.columns]  # the stored JSON has its keys sorted
    return table[order + [c for c in table.columns if c not in order]]


def run_search(task, out_dir: Path, priors: bool, *, max_nodes: int = 10, max_seconds: float = 120.0,
               workers: int = 2, seed: int = 0, proposer=None, policy: str = "greedy", generation: int | None = None,
               client=None, unit_store=None, baseline_scores: dict | None = None):
    """One tree search (see :class:`neuro.search.tree.TreeSearch`); returns ``(search, nodes)``.

    Without a ``proposer`` the offline one drafts from the baselines' structures, best first
    when ``baseline_scores`` (``{name: ID validation MAE}``) are given."""
    proposer = proposer or OfflineProposer(priors=priors, baseline_scores=baseline_scores, context=task.context)
    ts = TreeSearch(task, proposer, out_dir, policy=policy, max_nodes=max_nodes, max_seconds=max_seconds,
                    workers=workers, seed=seed, limits=SandboxLimits(wall_seconds=60, cpu_seconds=60),
                    n_drafts=min(5, max(2, max_nodes // 2)), generation=generation, client=client,
                    unit_store=unit_store)
    nodes = ts.run()
    return ts, nodes


def _node_row(node) -> dict:
    metrics = {"val": node.val, "test": node.test, **{f"ood_{k}": v for k, v in node.ood.items()}}
    return _row(metrics, node.faith)


def _node_arrays(ts, node) -> dict:
    f = ts.out / f"node_{node.id:04d}.npz"
    if not f.exists():
        return {}
    with np.load(f) as z:
        return {k: z[k] for k in z.files}


# ----------------------------------------------------------------------------- evidence
def _ood_windows(task, per_split: dict) -> tuple[np.ndarray, np.ndarray]:
    """All OOD windows' errors concatenated, with a cluster label per (suite, trial)."""
    vals, labels = [], []
    for k, s in enumerate(OOD_SUITES):
        v = per_split.get(f"ood_{s}")
        if v is None:
            return None, None
        vals.append(np.asarray(v, float))
        labels.append(1000 * k + np.asarray(task.ood[s].trial))
    return np.concatenate(vals), np.concatenate(labels)


def gather_evidence(task, seeds, searches: dict, base_windows: dict, base_val: dict) -> dict:
    """Per-seed, per-window errors of the study's picks (all chosen on ID validation only).

    ``searches[(label, seed)] = TreeSearch``; ``base_windows[seed][name][split]``;
    ``base_val[name]`` = mean ID validation MAE over seeds. Returns arrays ``(S, windows)``
    for the best baseline, the best discovered program of each search and of both together.
    """
    best_base = min(base_val, key=base_val.get)
    ev = {"seeds": list(seeds), "best_baseline": best_base, "test_trials": np.asarray(task.test.trial)}
    ev["baseline_test"] = np.stack([base_windows[s][best_base]["test"] for s in seeds])
    b_ood = [_ood_windows(task, base_windows[s][best_base])[0] for s in seeds]
    ev["baseline_ood"] = np.stack(b_ood) if all(o is not None for o in b_ood) else None
    for label in ("priors", "no priors"):
        tests, oods, nodes, arrays = [], [], [], []
        for s in seeds:
            ts = searches.get((label, s))
            b = ts.best() if ts is not None else None
            arr = _node_arrays(ts, b) if b is not None else {}
            if b is None or "mae_window/test" not in arr:
                tests = None
                break
            per = {k.split("/", 1)[1]: v for k, v in arr.items() if k.startswith("mae_window/")}
            o, lab = _ood_windows(task, per)
            tests.append(per["test"])
            oods.append(o)
            nodes.append(b)
            arrays.append(arr)
            ev["ood_clusters"] = lab
        if tests is not None:
            ev[f"{label}/test"] = np.stack(tests)
            ev[f"{label}/ood"] = np.stack(oods) if all(o is not None for o in oods) else None
            ev[f"{label}/nodes"] = nodes
            ev[f"{label}/arrays"] = arrays
    # the study's pick per seed: the best validation score over both searches
    picks = []
    for k in range(len(seeds)):
        cands = [(ev[f"{lab}/nodes"][k].val, lab) for lab in ("priors", "no priors") if f"{lab}/nodes" in ev]
        if not cands:
            picks = None
            break
        picks.append(min(cands)[1])
    if picks:
        ev["picks"] = picks
        ev["discovered_test"] = np.stack([ev[f"{lab}/test"][k] for k, lab in enumerate(picks)])
        if all(ev.get(f"{lab}/ood") is not None for lab in picks):
            ev["discovered_ood"] = np.stack([ev[f"{lab}/ood"][k] for k, lab in enumerate(picks)])
    return ev


def _fmt_ci(c: dict, key: str) -> str:
    return f"{c[key]:.3f} [{c[key + '_low']:.3f}, {c[key + '_high']:.3f}]"


def _seed_values(ev: dict, label: str, key: str) -> np.ndarray:
    return np.array([float(n.faith.get(key, np.nan)) if n.faith.get(key) is not None else np.nan
                     for n in ev.get(f"{label}/nodes", [])])


def findings(ev: dict) -> list[str]:
    """Plain statements of which reference findings reproduce, from the numbers: intervals
    are 95 % two-level bootstrap intervals over search seeds and test trials
    (:func:`neuro.verdicts.cluster_bootstrap`); a verdict never overrides its interval."""
    out = []
    S = len(ev["seeds"])
    scope = f"{S} search seed{'s' if S > 1 else ''} x {len(np.unique(ev['test_trials']))} test trials"
    if "discovered_test" not in ev:
        return ["No discovered model finished; no finding can be assessed."]
    c = compare(ev["discovered_test"], ev["baseline_test"], ev["test_trials"])
    v = verdict_better(c)
    verdict = {"a better": "REPRODUCED", "b better": "NOT reproduced (the baseline is better)",
               "undecided": "UNDECIDED (the interval holds 0)"}[v]
    verdict = _not_assessed(_interval_numbers(c, "ID test MAE"), verdict)
    picks = ", ".join(sorted(set(ev["picks"])))
    ood = ""
    if ev.get("discovered_ood") is not None and ev.get("baseline_ood") is not None:
        co = compare(ev["discovered_ood"], ev["baseline_ood"], ev["ood_clusters"])
        ood = (f" Out of distribution the same programs score {_fmt_ci(co, 'a')} vs {_fmt_ci(co, 'b')} "
               f"(difference {_fmt_ci(co, 'diff')}, {len(np.unique(ev['ood_clusters']))} OOD trials).")
    out.append(f"{verdict}: discovered programs beat the baselines in distribution (ID test MAE of the best "
               f"discovered program per seed [{picks}] {_fmt_ci(c, 'a')} vs best baseline [{ev['best_baseline']}] "
               f"{_fmt_ci(c, 'b')}; difference {_fmt_ci(c, 'diff')}; {scope}).{ood}")
    if ev.get("no_prior"):
        out.append("NOT ASSESSED: search with vs without wiring priors (these traces came without a wiring prior, "
                   "so both searches were unconstrained; give prior_mask / prior_sign to neuro.data.from_traces).")
        out.append("NOT ASSESSED: recovery of connectivity and impulse responses (no true circuit behind "
                   "recorded traces).")
    elif "priors/test" in ev and "no priors/test" in ev:
        cid = compare(ev["no priors/test"], ev["priors/test"], ev["test_trials"])
        vid = verdict_better(cid)
        if ev.get("priors/ood") is not None and ev.get("no priors/ood") is not None:
            cood = compare(ev["no priors/ood"], ev["priors/ood"], ev["ood_clusters"])
            vood = verdict_better(cood)
            free_worse_ood = vood == "b better"
            free_fine_id = vid != "b better"
            verdict = ("REPRODUCED" if (free_worse_ood and free_fine_id) else
                       "PARTLY reproduced (priors better both ID and OOD)" if free_worse_ood else
                       "NOT reproduced (priors not worse ID, and not better OOD)" if vood == "undecided"
                       else "NOT reproduced (the unconstrained search is better OOD)")
            verdict = _not_assessed({**_interval_numbers(cid, "ID test MAE"), **_interval_numbers(cood, "OOD MAE")},
                                    verdict)
            out.append(f"{verdict}: unconstrained search does well in distribution but worse on novel conditions "
                       f"than search with wiring priors (ID test MAE without vs with priors {_fmt_ci(cid, 'a')} vs "
                       f"{_fmt_ci(cid, 'b')}, difference {_fmt_ci(cid, 'diff')}; OOD MAE {_fmt_ci(cood, 'a')} vs "
                       f"{_fmt_ci(cood, 'b')}, difference {_fmt_ci(cood, 'diff')} over "
                       f"{len(np.unique(ev['ood_clusters']))} OOD trials).")
        pa, fa = _seed_values(ev, "priors", "edge_auroc"), _seed_values(ev, "no priors", "edge_auroc")
        if not (np.isfinite(pa).any() or np.isfinite(fa).any()):
            out.append("NOT ASSESSED: recovery of connectivity and impulse responses (no true circuit behind "
                       "recorded traces).")
            if "long" in ev:
                out.append(ev["long"])
            return out
        ps, fs = _seed_values(ev, "priors", "sign_accuracy"), _seed_values(ev, "no priors", "sign_accuracy")
        auc_all = bool(np.all(pa > fa)) and len(pa) > 0
        sg_all = bool(np.all(ps > fs)) and len(ps) > 0
        auc_any, sg_any = bool(np.any(pa > fa)), bool(np.any(ps > fs))
        verdict = ("REPRODUCED" if (auc_all and sg_all) else
                   "PARTLY reproduced" if (auc_any or sg_any) else "NOT reproduced")
        verdict = _not_assessed(_seed_numbers({"edge AUROC with priors": pa, "edge AUROC without": fa,
                                               "sign accuracy with priors": ps, "sign accuracy without": fs}), verdict)
        out.append(f"{verdict}: priors recover effective connectivity better (edge AUROC {_span(pa)} vs "
                   f"{_span(fa)}; sign accuracy {_span(ps)} vs {_span(fs)}; reproduced if better on both in every "
                   f"seed; the wiring prior allows {_prior_note(ev)}).")
        pi, fi = _seed_values(ev, "priors", "impulse_distance"), _seed_values(ev, "no priors", "impulse_distance")
        ok = np.isfinite(pi) & np.isfinite(fi)
        verdict = ("REPRODUCED" if ok.all() and np.all(pi < fi) else
                   "PARTLY reproduced" if np.any(pi[ok] < fi[ok]) else "NOT reproduced")
        verdict = _not_assessed(_seed_numbers({"impulse distance with priors": pi, "impulse distance without": fi}),
                                verdict)
        out.append(f"{verdict}: priors recover impulse responses better (relative distance to the simulator's "
                   f"response {_span(pi)} vs {_span(fi)}; 1 = no response; reproduced if better in every seed).")
    if "long" in ev:
        out.append(ev["long"])
    return out


def _interval_numbers(c: dict, what: str) -> dict[str, float]:
    """The estimates and interval bounds of a :func:`compare` result a verdict rests on."""
    return {f"{what} {k}": c.get(k) for k in ("a", "b", "diff", "diff_low", "diff_high")}


def _seed_numbers(values: dict[str, np.ndarray]) -> dict[str, float]:
    """Per-seed values, each a number the verdict rests on (an empty set of seeds is one missing number)."""
    out: dict[str, float] = {}
    for name, v in values.items():
        v = np.asarray(v, float)
        if len(v) == 0:
            out[name] = np.nan
        out.update({f"{name} (seed {i})": float(x) for i, x in enumerate(v)})
    return out


def _not_assessed(numbers: dict, verdict: str) -> str:
    """``verdict``, or ``NOT ASSESSED (...)`` naming the numbers that are missing or NaN: a verdict
    never rests on a number that is not there (:func:`scimech.study.assess`)."""
    judged = assess("", True, numbers=numbers)
    return verdict if judged.assessed else f"NOT ASSESSED ({judged.reason})"


def _span(v: np.ndarray) -> str:
    v = np.asarray(v, float)
    if len(v) == 0 or not np.isfinite(v).any():
        return "nan"
    if len(v) == 1:
        return f"{v[0]:.3f}"
    return f"{np.nanmean(v):.3f} (seeds {np.nanmin(v):.3f}-{np.nanmax(v):.3f})"


def _prior_note(ev: dict) -> str:
    return ev.get("prior_note", "")


def _tail_beat_line(long_table: pd.DataFrame, context: int) -> str:
    fc = long_table["tail_beat_forecast"].astype(float) if "tail_beat_forecast" in long_table else pd.Series(dtype=float)
    yes = [n for n, v in fc.items() if np.isfinite(v) and v >= 0.5]
    best = fc.astype(float).idxmax() if fc.notna().any() else None
    detail = "; ".join(f"{n} {fc[n]:.2f} (|phase error| {float(long_table.loc[n, 'tail_phase_error']):.2f} cycles, "
                       f"amplitude {float(long_table.loc[n, 'tail_amplitude_ratio']):.2f})"
                       for n in fc.index if np.isfinite(fc[n]))
    head = (f"YES: at context {context}, the free run of {', '.join(yes)} forecasts the tail beat in at least half "
            "of the swimming windows" if yes else
            f"NO: at context {context}, no model's free run forecasts the tail beat in half of the swimming windows"
            + (f" (closest: {best})" if best is not None else ""))
    return (f"{head} (fraction of swimming probe windows whose free-run tail angle is within 1/8 cycle and at least "
            f"half the amplitude of the true beat: {detail}).")


# ----------------------------------------------------------------------------- the study
def _evidence_dataset(ev: dict, config: dict) -> xr.Dataset:
    """The per-seed, per-window errors behind the verdicts, labelled."""
    from scimech import __version__

    data = {"baseline_test": (("seed", "test_window"), ev["baseline_test"])}
    if ev.get("baseline_ood") is not None:
        data["baseline_ood"] = (("seed", "ood_window"), ev["baseline_ood"])
    for lab in ("priors", "no priors"):
        key = lab.replace(" ", "_")
        if f"{lab}/test" in ev:
            data[f"{key}_test"] = (("seed", "test_window"), ev[f"{lab}/test"])
            if ev.get(f"{lab}/ood") is not None:
                data[f"{key}_ood"] = (("seed", "ood_window"), ev[f"{lab}/ood"])
    if "discovered_test" in ev:
        data["discovered_test"] = (("seed", "test_window"), ev["discovered_test"])
    if ev.get("discovered_ood") is not None:
        data["discovered_ood"] = (("seed", "ood_window"), ev["discovered_ood"])
    coords = {"seed": ev["seeds"], "test_trial": ("test_window", ev["test_trials"])}
    if "ood_clusters" in ev and any(k.endswith("_ood") for k in data):
        coords["ood_trial"] = ("ood_window", ev["ood_clusters"])
    ds = xr.Dataset(data, coords=coords)
    for v in ds.data_vars:
        ds[v].attrs.update(units="z", description="mean absolute error of one forecast window (z-scored activity)")
    ds.attrs.update(version=__version__, best_baseline=ev["best_baseline"], config=json.dumps(config),
                    picks=json.dumps(ev.get("picks", [])))
    return ds


def task_fingerprint(tasks) -> str:
    """A hash of the tasks' data (every array a search or baseline sees) and names: results
    computed for one fingerprint are not results for another."""
    h = hashlib.sha256()
    for t in tasks:
        h.update(str(t.name).encode())
        for k, v in sorted(t.data_arrays("full").items()):
            a = np.ascontiguousarray(v)
            h.update(f"{k}{a.shape}{a.dtype}".encode())
            h.update(a.tobytes())
    return h.hexdigest()[:16]


def _set_aside_stale_results(out_dir: Path, tasks) -> None:
    """Resume only results of the same tasks: when ``out_dir`` holds a study of other data (a
    changed simulator, other traces, other sizes), move it to ``out_dir/stale-<fingerprint>/``
    (nothing is deleted) and start afresh (:func:`scimech.fingerprint.set_aside_stale`)."""
    from scimech.fingerprint import set_aside_stale

    set_aside_stale(out_dir, task_fingerprint(tasks), name="task_fingerprint.txt", stacklevel=3)


def run_study(out_dir: Path, quick: bool = True, *, context: int = 4, horizon: int = 32, max_nodes: int | None = None,
              workers: int = 2, seed: int = 0, proposer_factory=None, duration: float | None = None,
              baselines=None, client=None, generation: int | None = None, max_windows: int = 400,
              search_seconds: float | None = None, budget: str | None = None, seeds: int | None = None,
              long_context: int | None = 256, long_nodes: int | None = None,
              task=None) -> Path:
    """Run the whole study and write ``out_dir/report.md``; returns its path.

    Parameters
    ----------
    budget
        ``"quick"``, ``"medium"`` or ``"full"`` (:data:`BUDGETS`); default ``"quick"`` if
        ``quick`` else ``"full"``. ``medium`` uses the quick-size data.
    seeds
        Search seeds (``seed``, ``seed + 1``, ...); default from the budget.
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
        Wall-clock budget per search, s (default from the budget). The node budget is
        reproducible, a time budget is not: give a large one when comparing runs.
    long_context
        Context of the long-context task (ZAPBench's 256), ``None`` or 0 to skip it; skipped
        (and said so in the report) when the trials are too short for it.
    long_nodes
        Node budget of each long-context search (default from the budget).
    task
        A task to study instead of simulating one (your traces: :func:`neuro.data.from_traces`).
    """
    from scimech.report import Report

    from .plots import plot_activity, plot_tail_angle, plot_tree, tail_readout
    from .recovery import format_table, planted_truth, summary_line

    budget = budget or ("quick" if quick else "full")
    if budget not in BUDGETS:
        from scimech.errors import ConfigError

        raise ConfigError(f"budget must be one of {sorted(BUDGETS)}; got {budget!r}.")
    B = BUDGETS[budget]
    data_quick = budget != "full"
    seed_list = [seed + k for k in range(int(seeds or B["seeds"]))]
    n_nodes = max_nodes or B["nodes"]
    n_long = long_nodes or (min(B["long_nodes"], n_nodes) if max_nodes else B["long_nodes"])
    s_budget = search_seconds or B["search_seconds"]
    config = dict(budget=budget, seeds=seed_list, nodes=n_nodes, long_nodes=n_long, context=context, horizon=horizon,
                  long_context=long_context, duration=duration, max_windows=max_windows, generation=generation,
                  search_seconds=s_budget)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if task is None:
        rec = build_recording(data_quick, duration=duration, seed=seed, ood_trials=B["ood_trials"])
        task = build_task(data_quick, context=context, horizon=horizon, seed=seed, max_windows=max_windows,
                          recording=rec)
        T = rec.sizes["time"]
    else:
        T = 0  # your traces: the long-context task is cut from a simulated recording only
    long_task, long_note = None, ""
    if long_context:
        if T >= long_context + max(horizon, 64) + 20:
            long_task = build_task(data_quick, context=long_context, horizon=horizon, seed=seed,
                                   max_windows=max_windows, recording=rec)
        elif T == 0:
            long_note = (f"The context-{long_context} task was not run: it is cut from a simulated recording, "
                         f"not from your traces (give --context {long_context} to study them at that context).")
        else:
            long_note = (f"The context-{long_context} task was skipped: trials of {T} steps are too short "
                         f"(need at least {long_context + max(horizon, 64) + 20}).")
    t_sim = time.perf_counter() - t0
    _set_aside_stale_results(out_dir, [t for t in (task, long_task) if t is not None])
    true_phys = physiology_scores(task.probes.get("swim_target"), task) if "swim_target" in task.probes else {}

    # baselines: every one once; those trained from a random start once per search seed
    names = list(baselines or BASELINES)
    base_windows, base_tables = {}, {}
    for k, s in enumerate(seed_list):
        todo = names if k == 0 else [n for n in names if n in SEEDED_BASELINES]
        win = {}
        tab = run_baselines(task, todo, quick=data_quick, store=out_dir / "baselines", client=client, seed=s,
                            key_suffix="" if k == 0 else f"-seed{s}", windows=win, torch_steps=B["torch_steps"])
        if k > 0:
            win = {**{n: base_windows[seed_list[0]][n] for n in names if n not in todo}, **win}
            tab = pd.concat([base_tables[seed_list[0]].drop(index=todo), tab]).loc[names]
        base_windows[s], base_tables[s] = win, tab
    table = base_tables[seed_list[0]].copy()
    base_val = {n: float(np.mean([base_tables[s].loc[n, "val"] for s in seed_list])) for n in names}
    t_base = time.perf_counter() - t0 - t_sim

    searches = {}
    for k, s in enumerate(seed_list):
        scores = {n: float(base_tables[s].loc[n, "val"]) for n in names}
        for label, priors in (("priors", True), ("no priors", False)):
            prop = proposer_factory(priors) if proposer_factory else None
            folder = out_dir / (f"search_{label.replace(' ', '_')}" + ("" if k == 0 else f"_seed{s}"))
            ts, _nodes = run_search(task, folder, priors, max_nodes=n_nodes, workers=workers, seed=s, proposer=prop,
                                    max_seconds=s_budget, generation=generation, client=client,
                                    unit_store=folder / "units", baseline_scores=scores)
            searches[(label, s)] = ts
            best = ts.best()
            if best is not None:
                table.loc[f"discovered ({label})" + ("" if k == 0 else f" seed {s}")] = pd.Series(_node_row(best))
    t_search = time.perf_counter() - t0 - t_sim - t_base

    ev = gather_evidence(task, seed_list, searches, base_windows, base_val)
    M = task.meta["prior_mask"] > 0
    W = task.true_weights
    off = ~np.eye(len(M), dtype=bool)
    wired = "" if W is None else f", {int(((W != 0) & off).sum())} of them truly wired"
    ev["no_prior"] = bool(W is None and (M | ~off).all())   # your traces, given no wiring prior
    ev["prior_note"] = (f"{int((M & off).sum())} of {int(off.sum())} pairs{wired}: the edge set is largely "
                        "given by the prior")

    # the long context: baselines and small searches, for the tail beat
    long_table, long_searches = None, {}
    t_long = 0.0
    if long_task is not None:
        t1 = time.perf_counter()
        lt_dir = out_dir / "long_context"
        long_table = run_baselines(long_task, names, quick=data_quick, store=lt_dir / "baselines", client=client,
                                   seed=seed_list[0], torch_steps=B["torch_steps"])
        scores = {n: float(long_table.loc[n, "val"]) for n in names}
        for label, priors in (("priors", True), ("no priors", False)):
            if priors not in B["long_priors"]:
                continue
            prop = proposer_factory(priors) if proposer_factory else None
            folder = lt_dir / f"search_{label.replace(' ', '_')}"
            ts, _nodes = run_search(long_task, folder, priors, max_nodes=n_long, workers=workers, seed=seed_list[0],
                                    proposer=prop, max_seconds=s_budget, generation=generation, client=client,
                                    unit_store=folder / "units", baseline_scores=scores)
            long_searches[label] = ts
            best = ts.best()
            if best is not None:
                long_table.loc[f"discovered ({label})"] = pd.Series(_node_row(best))
        ev["long"] = _tail_beat_line(long_table, long_task.context)
        t_long = time.perf_counter() - t1

    # planted truth vs what the structural-prior search found
    rec_table = None
    if "priors/nodes" in ev and task.true_weights is not None:
        k_best = int(np.argmin([n.val for n in ev["priors/nodes"]]))
        long_arrays = None
        if "priors" in long_searches and long_searches["priors"].best() is not None:
            long_arrays = _node_arrays(long_searches["priors"], long_searches["priors"].best())
        rec_table = planted_truth(task, ev["priors/arrays"][k_best], long_task=long_task if long_arrays else None,
                                  long_arrays=long_arrays, seed=seed)
        rec_table.attrs["seed"] = seed_list[k_best]
    fnd = findings(ev)

    rep = Report(out_dir, title="Model discovery against a simulated larval zebrafish")
    rep.text(f"Budget `{budget}`: {len(seed_list)} search seed(s) {seed_list}, {n_nodes} nodes per search"
             f"{f', {n_long} per long-context search' if long_task is not None else ''}. Task `{task.name}`: "
             f"{task.n_neurons} observed units, context {task.context} and horizon {task.horizon} steps of "
             f"{task.dt * 1000:.0f} ms; MAE in z units (per-neuron train z-score). {len(task.train_series)} training "
             f"trials; ID val/test windows {len(task.val)}/{len(task.test)}; OOD suites "
             f"{', '.join(f'{k} ({len(v)})' for k, v in task.ood.items())}. Simulation {t_sim:.0f} s, baselines "
             f"{t_base:.0f} s, searches {t_search:.0f} s, long context {t_long:.0f} s. {long_note}")
    rep.heading("Which reference findings reproduce")
    rep.text("\n".join(f"- {s}" for s in fnd))
    if rec_table is not None:
        rep.heading("Planted truth vs what the study found")
        rep.text(f"The structural-prior search's pick (seed {rec_table.attrs['seed']}, best ID validation over "
                 f"seeds) against the simulated circuit; 95 % bootstrap intervals.\n\n"
                 f"{summary_line(rec_table)}\n\n```\n{format_table(rec_table)}\n```")
    if true_phys:
        rep.text(f"Simulator physiology (true swimming probes): left-right phase {true_phys['lr_phase']:.2f} cycles "
                 f"(0.5 = antiphase), rostro-caudal phase {true_phys['rc_phase']:.3f} cycles over "
                 f"{np.diff(sorted({int(s) for s in task.meta['segment'] if s >= 0}))[0]} segments, "
                 f"dominant frequency {true_phys['frequency']:.1f} Hz.")
    cols = [c for c in COLS if c in table.columns]
    rep.table(table[cols].astype(float), caption="ID / OOD MAE and faithfulness of every baseline and the best "
              "discovered programs (selection used ID validation only)")
    if long_table is not None:
        lcols = [c for c in ("val", "test", "ood_mean", "edge_auroc", "frequency", "tail_phase_error",
                             "tail_amplitude_ratio", "tail_beat_forecast") if c in long_table.columns]
        rep.table(long_table[lcols].astype(float), caption=f"Context {long_task.context}: ID / OOD MAE and the tail "
                  "beat of the free run (|phase error| in cycles, amplitude ratio, fraction of swimming windows "
                  "forecast)")
    for label in ("priors", "no priors"):
        ts = searches.get((label, seed_list[0]))
        if ts is None:
            continue
        nodes = ts.nodes
        rep.figure(plot_tree(nodes, title=f"search tree ({label}, seed {seed_list[0]})"),
                   f"tree_{label.replace(' ', '_')}",
                   caption=f"Search tree with {label}: ID validation MAE per node; failed nodes marked x")
        summary = pd.DataFrame([{"id": n.id, "parent": n.parent, "op": n.op, "status": n.status, "val": n.val,
                                 "quick_val": n.quick_val, "error": (n.error or "")[:60]} for n in nodes]).set_index("id")
        rep.table(summary, caption=f"Nodes of the search with {label} (seed {seed_list[0]})")
    # activity and tail angle on one swimming probe
    if "swim_target" in task.probes:
        kk = 0
        tgt = task.probes["swim_target"][kk][: task.horizon]
        preds = {}
        for label in ("priors", "no priors"):
            ts = searches.get((label, seed_list[0]))
            b = ts.best() if ts is not None else None
            if b is not None:
                arr = _node_arrays(ts, b)
                if "swim_pred" in arr:
                    preds[f"discovered ({label})"] = arr["swim_pred"][kk][: task.horizon]
        m = fit_baseline("ridge_arx", task)
        _, arr = probe_model(m, task)
        preds["ridge_arx"] = arr["swim_pred"][kk][: task.horizon]
        names_ = task.meta["name"]
        mn = [int(i) for i in np.flatnonzero(np.asarray(task.meta["type"]) == "MN")[:2]]
        v2a = [int(i) for i in np.flatnonzero(np.asarray(task.meta["type"]) == "V2a")[:2]]
        rep.figure(plot_activity(tgt, preds, names_, task.dt, units=tuple(mn + v2a)), "activity",
                   caption="Activity predicted vs true on a swimming window (z units)")
        ro = tail_readout(task)
        rep.figure(plot_tail_angle(ro(tgt[None])[0], {k: ro(v[None])[0] for k, v in preds.items()}, task.dt),
                   "tail_angle", caption="Tail angle (rad) read out linearly from true vs predicted MN activity")
    if long_task is not None and "swim_target" in long_task.probes:
        ro = tail_readout(long_task)
        tgt = long_task.probes["swim_target"][0][: long_task.horizon]
        preds = {}
        for label, ts in long_searches.items():
            b = ts.best()
            arr = _node_arrays(ts, b) if b is not None else {}
            if "swim_pred" in arr:
                preds[f"discovered ({label})"] = arr["swim_pred"][0][: long_task.horizon]
        m = fit_baseline("ridge_arx", long_task)
        _, arr = probe_model(m, long_task)
        preds["ridge_arx"] = arr["swim_pred"][0][: long_task.horizon]
        rep.figure(plot_tail_angle(ro(tgt[None])[0], {k: ro(v[None])[0] for k, v in preds.items()}, long_task.dt),
                   "tail_angle_long", caption=f"Context {long_task.context}: tail angle (rad) read out from true vs "
                   "predicted activity after a context ending 50 ms into a bout")
    table.to_csv(out_dir / "results.csv")
    if long_table is not None:
        long_table.to_csv(out_dir / "long_context.csv")
    from scimech.results import atomic_write_text

    _evidence_dataset(ev, config).to_netcdf(out_dir / "evidence.nc")
    atomic_write_text(out_dir / "findings.json", json.dumps(fnd, indent=1))
    atomic_write_text(out_dir / "findings.txt", "".join(f"{s}\n" for s in fnd))
    if rec_table is not None:
        rec_table.drop(columns=[]).to_csv(out_dir / "recovery.csv")
        atomic_write_text(out_dir / "recovery.txt", f"{summary_line(rec_table)}\n\n{format_table(rec_table)}\n")
    else:
        why = ("your traces have no planted circuit to recover" if task.true_weights is None
               else "no structural-prior program finished")
        atomic_write_text(out_dir / "recovery.txt", f"neuro planted truth: 0 of 0 recovered ({why})\n")
    return rep.write()
