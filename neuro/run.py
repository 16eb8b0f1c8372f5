"""Running the discovery study: the tasks (simulated, or your traces), the baselines, the tree
searches with and without structural priors over several search seeds, and the long-context
(256 steps) task for the tail beat.

Units of work go through :func:`scimech.run.parallel.map_units` into
:class:`scimech.run.results.UnitStore` folders under the output folder: one unit per baseline
fit (``baselines/``) and one per candidate evaluation of each search
(``search_<label>[_seed<s>]/units/``; the long context under ``long_context/``). The arrays
the units read and write (the tasks, the searches' data, every evaluated program's outputs)
are in the study's store, ``store/`` (:class:`neuro.data.stores.ArrayStore`), each written once
and read from there by the units; the units' records hold scores. With a Dask
``client`` they run on its workers; rerunning with the same output folder redoes only
unfinished units (and the searches resume from their journals). A folder holding a study of
other data (a changed simulator, other traces or sizes: another :func:`task_fingerprint`) is
set aside, never resumed.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from scimech._moved import warn_moved
from scimech.run.fingerprint import set_aside_stale
from scimech.run.parallel import map_units
from scimech.run.results import UnitStore
from scimech.studies.evidence import Evidence as StudyEvidence
from scimech.studies.verdicts import PlantedTruthRow

from .baselines import BASELINES, fit_baseline
from .ceiling import NotReplayable, absent_reason, perfect_forecaster
from .data.stores import ArrayStore
from .data.taskstore import load_task, save_task
from .evidence import Evidence, evidence_dataset, gather_evidence, node_arrays, prior_note
from .faithfulness import faithfulness, physiology_scores, probe_model, true_impulse_response
from .plan import SEARCH_LABELS, SEEDED_BASELINES, StudySettings
from .recovery import planted_truth
from .search.offline import OfflineProposer
from .search.sandbox import SandboxLimits
from .search.tree import TreeSearch
from .tasks import OOD_SUITES, WindowField, build_recording, build_task, is_constant_view

__all__ = [
    "COLS",
    "StudyRun",
    "run_baselines",
    "score_forecasts",
    "write_step_mae",
    "write_units",
    "baseline_unit",
    "run_search",
    "run_units",
    "build_tasks",
    "task_fingerprint",
    "score_row",
]

COLS = (
    ["val", "test", "ood_mean", "id_ood_gap"]
    + [f"ood_{s}" for s in OOD_SUITES]
    + [
        "sign_accuracy",
        "weight_correlation",
        "edge_auroc",
        "impulse_distance",
        "lr_phase",
        "rc_phase",
        "frequency",
        "frequency_error",
        "tail_phase_error",
        "tail_amplitude_ratio",
        "tail_beat_forecast",
        "lesion_mae",
    ]
)
_WINDOW_SPLITS = ("test",) + tuple(f"ood_{s}" for s in OOD_SUITES)


# ----------------------------------------------------------------------------- baselines
def score_row(metrics: dict, faith: dict) -> dict:
    """One row of the results table: ID / OOD MAE and the faithfulness scores."""
    r = {"val": metrics.get("val"), "test": metrics.get("test")}
    oods = [metrics.get(f"ood_{s}") for s in OOD_SUITES]
    for s, v in zip(OOD_SUITES, oods):
        r[f"ood_{s}"] = v
    fin = [v for v in oods if v is not None and math.isfinite(v)]
    r["ood_mean"] = float(np.mean(fin)) if fin else np.nan
    r["id_ood_gap"] = r["ood_mean"] - r["test"] if r["test"] is not None else np.nan
    r.update({k: faith.get(k) for k in COLS if k in faith})
    return r


def _fit_and_score(
    name: str, task, quick: bool, seed: int = 0, torch_steps: int | None = None, device: str = "cpu"
) -> dict:
    kw = {}
    if name in SEEDED_BASELINES:
        kw.update(seed=seed, device=device)
        steps = torch_steps or (100 if quick else None)
        if steps:
            kw["steps"] = int(steps)
    t0 = time.perf_counter()
    model = fit_baseline(name, task, **kw)
    # a simulated task: scored as the sandbox scores a program (Jacobian and probes included);
    # recorded traces (no circuit to compare with): forecasts only, window chunk by chunk
    metrics, arrays = probe_model(model, task) if task.true_weights is not None else score_forecasts(model, task)
    row = score_row(metrics, faithfulness(arrays, metrics, task))
    row["seconds"] = time.perf_counter() - t0
    row["window_mae"] = {
        sp: arrays[f"mae_window/{sp}"].tolist() for sp in _WINDOW_SPLITS if f"mae_window/{sp}" in arrays
    }
    row["step_mae"] = {k[4:]: arrays[k].tolist() for k in arrays if k.startswith("mae/")}
    return row


def score_forecasts(model, task) -> tuple[dict, dict]:
    """MAE of a fitted model's forecasts on every split, reading the windows chunk by chunk
    (:meth:`neuro.tasks.LazyWindows.batches`): ``(metrics, arrays)`` as
    :func:`neuro.search.evaluate.score_predictions` gives them (``mae/<split>`` per horizon
    step, ``mae_window/<split>`` per window; OOD forecasts clipped, ID ones must be finite).
    No Jacobian or probes: for recorded traces, where no circuit is known. A split read in one
    chunk gives exactly the sandbox's numbers."""
    metrics, arrays = {}, {}
    for sp, w in task.windows().items():
        total, count, per_window = None, 0, []
        for b in w.batches():
            pred = np.asarray(model.predict(b.context, b.stim_context, b.stim_future), dtype=float)
            if pred.shape != b.target.shape:
                raise ValueError(f"predict() returned shape {pred.shape} on {sp}; expected {b.target.shape}")
            if sp.startswith("ood_"):
                pred = np.where(np.isfinite(pred), np.clip(pred, -1e3, 1e3), 1e3)
            elif not np.all(np.isfinite(pred)):
                raise FloatingPointError(f"predict() returned non-finite values on {sp}")
            err = np.abs(pred - b.target)
            part = err.sum((0, 2))
            total = part if total is None else total + part
            count += err.shape[0] * err.shape[2]
            per_window.append(err.mean((1, 2)))
        mae = total / count
        metrics[sp] = float(mae.mean())
        arrays[f"mae/{sp}"] = mae
        arrays[f"mae_window/{sp}"] = np.concatenate(per_window)
    return metrics, arrays


def baseline_unit(
    name: str, task_file: str, quick: bool, seed: int = 0, torch_steps: int | None = None, device: str = "cpu"
) -> dict:
    """One baseline fit and its scores (a unit of :func:`run_baselines`, picklable).

    ``task_file`` is the task's manifest in the study's store (written once by
    :func:`run_baselines`, :func:`neuro.data.taskstore.save_task`; read once per worker process)."""
    return _fit_and_score(name, load_task(task_file), quick, seed, torch_steps, device)


def _unit_key(name: str, steps, key_suffix: str, device: str) -> str:
    if name not in SEEDED_BASELINES:
        return f"{name}{key_suffix}"
    on = "" if device == "cpu" else f"-{device.replace(':', '')}"  # a GPU fit is another result than a CPU one
    return f"{name}-steps{steps}{key_suffix}{on}"


def run_baselines(
    task,
    names=None,
    quick: bool = True,
    *,
    store=None,
    client=None,
    seed: int = 0,
    key_suffix: str = "",
    windows: dict | None = None,
    torch_steps: int | None = None,
    device: str = "cpu",
    steps_out: dict | None = None,
    array_store=None,
) -> pd.DataFrame:
    """Fit and score baselines; one row per baseline (``seconds``: wall time of the fit, s).

    With ``store`` (a :class:`scimech.run.results.UnitStore` or folder) each baseline is a unit of
    :func:`scimech.run.parallel.map_units` (on ``client``'s workers if given): finished ones are
    skipped on a rerun. The units read the task from ``array_store`` (a
    :class:`neuro.data.stores.ArrayStore` or folder; default ``<store>/store``), where it is written
    once when a unit is left to run. ``seed`` seeds the baselines trained from a random start
    (:data:`neuro.plan.SEEDED_BASELINES`, torch models on ``device``), trained for
    ``torch_steps`` Adam steps (default 100 when ``quick``, else the class default; part of
    their unit key); ``key_suffix`` is appended to the unit keys. A ``windows`` dict is filled
    with ``{name: {split: per-window MAE}}`` (test and OOD windows), a ``steps_out`` dict with
    ``{name: {split: MAE per horizon step}}``.
    """
    names = list(names or BASELINES)
    if store is None and client is None:
        rows = {name: _fit_and_score(name, task, quick, seed, torch_steps, device) for name in names}
    else:
        store = store if isinstance(store, UnitStore) else UnitStore(store)
        steps = torch_steps or (100 if quick else "default")
        keys = {n: _unit_key(n, steps, key_suffix, device) for n in names}
        task_file = ""
        if any(not store.done(keys[n]) for n in names):  # workers need the task; the parent's copy is the only one
            if task.signal == "rates" and "impulse_true" not in task.probes:
                # simulated once here, not once per worker (and again for the searches)
                task.probes["impulse_true"] = true_impulse_response(task)
            task_file = str(save_task(task, array_store or store.root / "store"))
        units = {
            keys[n]: dict(name=n, task_file=task_file, quick=quick, seed=seed, torch_steps=torch_steps, device=device)
            for n in names
        }
        done = map_units(baseline_unit, units, store, client=client, desc="baselines")
        rows = {n: done[keys[n]] for n in names}
    if windows is not None:
        for n in names:
            windows[n] = {k: np.asarray(v, float) for k, v in (rows[n].get("window_mae") or {}).items()}
    if steps_out is not None:
        for n in names:
            steps_out[n] = {k: np.asarray(v, float) for k, v in (rows[n].get("step_mae") or {}).items()}
    table = pd.DataFrame(
        {
            n: {k: (np.nan if v is None else v) for k, v in rows[n].items() if k not in ("window_mae", "step_mae")}
            for n in names
        }
    ).T
    order = [c for c in COLS if c in table.columns]  # the stored JSON has its keys sorted
    return table[order + [c for c in table.columns if c not in order]]


# ----------------------------------------------------------------------------- searches
def run_search(
    task,
    out_dir: Path,
    priors: bool,
    *,
    max_nodes: int = 10,
    max_seconds: float = 120.0,
    workers: int = 2,
    seed: int = 0,
    proposer=None,
    policy: str = "greedy",
    generation: int | None = None,
    client=None,
    unit_store=None,
    baseline_scores: dict | None = None,
    array_store=None,
):
    """One tree search (see :class:`neuro.search.tree.TreeSearch`); returns ``(search, nodes)``.

    Without a ``proposer`` the offline one drafts from the baselines' structures, best first
    when ``baseline_scores`` (``{name: ID validation MAE}``) are given. ``workers``: threads
    evaluating a generation when no ``client`` is given. ``array_store``: where the search's
    data and its nodes' arrays go (default ``out_dir/store``)."""
    proposer = proposer or OfflineProposer(priors=priors, baseline_scores=baseline_scores, context=task.context)
    ts = TreeSearch(
        task,
        proposer,
        out_dir,
        policy=policy,
        max_nodes=max_nodes,
        max_seconds=max_seconds,
        workers=workers,
        seed=seed,
        limits=SandboxLimits(wall_seconds=60, cpu_seconds=60),
        n_drafts=min(5, max(2, max_nodes // 2)),
        generation=generation,
        client=client,
        unit_store=unit_store,
        store=array_store,
    )
    nodes = ts.run()
    return ts, nodes


def node_row(node) -> dict:
    """A search node's row of the results table."""
    metrics = {"val": node.val, "test": node.test, **{f"ood_{k}": v for k, v in node.ood.items()}}
    return score_row(metrics, node.faith)


# ----------------------------------------------------------------------------- tasks and resumption
def task_fingerprint(tasks) -> str:
    """A hash of the tasks' data (every array a search or baseline sees) and names: results
    computed for one fingerprint are not results for another."""
    h = hashlib.sha256()
    for t in tasks:
        h.update(str(t.name).encode())
        for k, v in sorted(t.data_arrays("full", lazy=True).items()):
            if isinstance(v, WindowField):  # windows of a recording: hashed chunk by chunk, never all at once
                h.update(f"{k}{v.shape}{v.dtype}".encode())
                for c in v.chunks():
                    h.update(c.tobytes())
                continue
            if is_constant_view(v):  # one value broadcast (the all-ones prior of a large recording)
                h.update(f"{k}{v.shape}{v.dtype}broadcast{v.flat[0]!r}".encode())
                continue
            a = np.ascontiguousarray(v)
            h.update(f"{k}{a.shape}{a.dtype}".encode())
            h.update(a.tobytes())
    return h.hexdigest()[:16]


def set_aside_stale_results(out_dir: Path, tasks) -> None:
    """Resume only results of the same tasks: when ``out_dir`` holds a study of other data (a
    changed simulator, other traces, other sizes), move it to ``out_dir/stale-<fingerprint>/``
    (nothing is deleted) and start afresh (:func:`scimech.run.fingerprint.set_aside_stale`)."""
    set_aside_stale(out_dir, task_fingerprint(tasks), name="task_fingerprint.txt", stacklevel=3)


def build_tasks(s: StudySettings, task=None):
    """``(task, long_task, long_note)``: the simulated task (or ``task``: your traces) and the
    long-context task cut from the same recording (``None`` with a note when it is skipped)."""
    rec = None
    if task is None:
        rec = build_recording(s.quick_data, duration=s.duration, seed=s.seed, ood_trials=s.budget["ood_trials"])
        task = build_task(
            s.quick_data, context=s.context, horizon=s.horizon, seed=s.seed, max_windows=s.max_windows, recording=rec
        )
    T = rec.sizes["time"] if rec is not None else 0  # your traces: the long context is cut from a simulation only
    lc, need = s.long_context, (s.long_context or 0) + max(s.horizon, 64) + 20
    if not lc:
        return task, None, ""
    if T >= need:
        return (
            task,
            build_task(
                s.quick_data, context=lc, horizon=s.horizon, seed=s.seed, max_windows=s.max_windows, recording=rec
            ),
            "",
        )
    if T == 0:
        return (
            task,
            None,
            (
                f"The context-{lc} task was not run: it is cut from a simulated recording, not from "
                f"your traces (give --context {lc} to study them at that context)."
            ),
        )
    return task, None, f"The context-{lc} task was skipped: trials of {T} steps are too short (need at least {need})."


# ----------------------------------------------------------------------------- the run
@dataclass
class StudyRun(StudyEvidence):
    """What one run of the study produced (the evidence every study hands on,
    :class:`scimech.studies.evidence.Evidence`): the per-window errors the findings rest on
    (``evidence``, :class:`neuro.evidence.Evidence`), and what the report shows (tables, searches,
    the planted-truth rows, timings)."""

    settings: StudySettings
    task: object
    long_task: object
    evidence: Evidence
    table: pd.DataFrame  # baselines (first seed) and the best discovered programs
    searches: dict  # {(label, seed): TreeSearch}
    long_table: pd.DataFrame | None = None
    long_searches: dict = field(default_factory=dict)  # {label: TreeSearch} at the long context
    planted: list[PlantedTruthRow] | None = None  # the structural-prior pick against the simulated circuit
    planted_seed: int | None = None
    true_physiology: dict = field(default_factory=dict)
    long_note: str = ""
    seconds: dict = field(default_factory=dict)  # simulation, baselines, searches, long context
    findings: list | None = None  # read from the evidence once (neuro.findings)
    all_neurons: pd.DataFrame | None = None  # a recording above settings.search_neurons: baselines on every unit
    n_units_recorded: int | None = None  # then the recording's units (the task has the subset's)
    ceiling: list[PlantedTruthRow] | None = None  # a perfect forecaster (the simulator forked) on the same rows
    ceiling_note: str = ""  # why there is no perfect forecaster (your recording: no simulator to fork)

    def measurements(self) -> dict[str, xr.Dataset]:
        """``{"evidence": ...}``: the per-seed, per-window errors as saved in ``evidence.nc``
        (:func:`neuro.evidence.evidence_dataset`)."""
        return {"evidence": evidence_dataset(self.evidence, self.settings.record())}

    def planted_rows(self) -> list[PlantedTruthRow] | None:
        """The simulated circuit against the structural-prior pick; ``None`` for your traces."""
        return self.planted

    def phase_seconds(self) -> dict[str, float]:
        """Seconds of the simulation, the baselines, the searches and the long context."""
        return dict(self.seconds)


def study_store(s: StudySettings) -> ArrayStore:
    """The study's store, ``<out>/store``: every array its units read or write, written once."""
    return ArrayStore(s.out / "store")


def _baselines_per_seed(s: StudySettings, task, out: Path, client, steps: dict | None = None) -> tuple[dict, dict]:
    """Every baseline once; those trained from a random start once per search seed.
    Returns ``(windows, tables)`` by seed; ``steps`` gets the first seed's MAE per horizon step."""
    names, seeds = list(s.baselines or BASELINES), s.seed_list
    windows, tables = {}, {}
    for k, sd in enumerate(seeds):
        todo = names if k == 0 else [n for n in names if n in SEEDED_BASELINES]
        win = {}
        tab = run_baselines(
            task,
            todo,
            quick=s.quick_data,
            store=out / "baselines",
            client=client,
            seed=sd,
            key_suffix="" if k == 0 else f"-seed{sd}",
            windows=win,
            torch_steps=s.budget["torch_steps"],
            device=s.device,
            steps_out=steps if k == 0 else None,
            array_store=study_store(s),
        )
        if k > 0:
            win = {**{n: windows[seeds[0]][n] for n in names if n not in todo}, **win}
            tab = pd.concat([tables[seeds[0]].drop(index=todo), tab]).loc[names]
        windows[sd], tables[sd] = win, tab
    return windows, tables


def _searches(
    s: StudySettings,
    task,
    seeds,
    scores: dict,
    nodes: int,
    table: pd.DataFrame,
    *,
    folder_of,
    row_name,
    client=None,
    proposer_factory=None,
    priors_flags=(True, False),
) -> dict:
    """The searches with and without priors (those in ``priors_flags``) for each seed, drafting
    from ``scores[seed]`` (baseline ID validation MAE by name); each search's best program is
    added to ``table`` as the row ``row_name(label, k, seed)``. Returns ``{(label, seed): TreeSearch}``."""
    searches = {}
    for k, sd in enumerate(seeds):
        for label, priors in SEARCH_LABELS:
            if priors not in priors_flags:
                continue
            folder = folder_of(label, k, sd)
            prop = proposer_factory(priors) if proposer_factory else None
            ts, _ = run_search(
                task,
                folder,
                priors,
                max_nodes=nodes,
                workers=s.threads,
                seed=sd,
                proposer=prop,
                max_seconds=0.0 if s.read_only else s.seconds_per_search,
                generation=s.generation,
                client=client,
                unit_store=folder / "units",
                baseline_scores=scores[sd],
                array_store=study_store(s),
            )
            searches[(label, sd)] = ts
            best = ts.best()
            if best is not None:
                table.loc[row_name(label, k, sd)] = pd.Series(node_row(best))
    return searches


def _val_scores(table: pd.DataFrame, names) -> dict:
    return {n: float(table.loc[n, "val"]) for n in names}


def _long_context(s: StudySettings, long_task, out: Path, client, proposer_factory):
    """Baselines and small searches at the long context (first seed), for the tail beat."""
    lt_dir, names, sd = out / "long_context", list(s.baselines or BASELINES), s.seed_list[0]
    table = run_baselines(
        long_task,
        names,
        quick=s.quick_data,
        store=lt_dir / "baselines",
        client=client,
        seed=sd,
        torch_steps=s.budget["torch_steps"],
        device=s.device,
        array_store=study_store(s),
    )
    found = _searches(
        s,
        long_task,
        [sd],
        {sd: _val_scores(table, names)},
        s.n_long_nodes,
        table,
        folder_of=lambda label, k, _: lt_dir / f"search_{label.replace(' ', '_')}",
        row_name=lambda label, k, _: f"discovered ({label})",
        client=client,
        proposer_factory=proposer_factory,
        priors_flags=s.budget["long_priors"],
    )
    return table, {label: ts for (label, _), ts in found.items()}


def _planted_truth(s: StudySettings, task, long_task, ev: Evidence, long_searches: dict):
    """The structural-prior search's pick (best ID validation over seeds) against the simulated circuit."""
    if ev.priors is None or task.true_weights is None:
        return None, None
    k_best = int(np.argmin([n.val for n in ev.priors.nodes]))
    long_arrays = None
    if "priors" in long_searches and long_searches["priors"].best() is not None:
        long_arrays = node_arrays(long_searches["priors"], long_searches["priors"].best())
    if task.signal == "rates" and "impulse_true" not in task.probes:  # set by the baselines only when one ran
        task.probes["impulse_true"] = true_impulse_response(task)  # (a study resumed whole still needs it)
    rows = planted_truth(
        task,
        ev.priors.arrays[k_best],
        long_task=long_task if long_arrays else None,
        long_arrays=long_arrays,
        seed=s.seed,
    )
    return rows, s.seed_list[k_best]


def _ceiling(s: StudySettings, task, long_task, planted) -> tuple[list[PlantedTruthRow] | None, str]:
    """A perfect forecaster scored on the planted-truth rows (:func:`neuro.ceiling.perfect_forecaster`:
    the simulator forked at each window with fresh noise, the tail beat when the planted rows have it),
    or ``None`` and why not in one line."""
    why = absent_reason(task)
    if why is not None or planted is None:
        return None, why or ""
    long_used = long_task if any(r.truth == "tail_beat" for r in planted) else None
    try:
        return perfect_forecaster(task, long_task=long_used, seed=s.seed), ""
    except NotReplayable as e:  # another generator's recording: no exact state to fork, the rows stand alone
        return None, f"No perfect-forecaster column: {e}"


def run_units(s: StudySettings, *, client=None, task=None, proposer_factory=None, tasks=None) -> StudyRun:
    """Run every unit of the study into a :class:`StudyRun` (resumable; see the module doc).

    ``task``: your traces (:func:`neuro.data.from_traces`) instead of the simulator;
    ``proposer_factory(priors) -> proposer`` instead of the offline proposer; ``tasks``: what
    :func:`build_tasks` returned for ``s``, when the caller built them already. The whole study from
    Python (report, findings, planted truth) is :func:`neuro.run_study`; this is its unit runner
    (``neuro.run.run_study_units`` until scimech 0.3.0)."""
    out = s.out
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    task, long_task, long_note = tasks if tasks is not None else build_tasks(s, task)
    t_sim = time.perf_counter() - t0
    set_aside_stale_results(out, [t for t in (task, long_task) if t is not None])
    seeds, names = s.seed_list, list(s.baselines or BASELINES)
    all_neurons, n_recorded = None, None
    if task.n_neurons > s.search_neurons:  # a recording: every unit for the baselines, a subset for the rest
        all_steps = {}
        all_neurons = run_baselines(
            task,
            names,
            quick=s.quick_data,
            store=out / "baselines_all_neurons",
            client=client,
            seed=seeds[0],
            torch_steps=s.budget["torch_steps"],
            device=s.device,
            steps_out=all_steps,
            array_store=study_store(s),
        )
        all_neurons.to_csv(out / "baselines_all_neurons.csv")
        write_step_mae(out / "mae_per_step_all_neurons.csv", all_steps)
        n_recorded = task.n_neurons
        task = task.neuron_subset(s.search_neurons, s.seed)
        write_units(out / "search_units.csv", task)
    true_phys = physiology_scores(task.probes.get("swim_target"), task) if "swim_target" in task.probes else {}

    steps = {}
    base_windows, base_tables = _baselines_per_seed(s, task, out, client, steps)
    table = base_tables[seeds[0]].copy()
    base_val = {n: float(np.mean([base_tables[sd].loc[n, "val"] for sd in seeds])) for n in names}
    t_base = time.perf_counter() - t0 - t_sim

    searches = _searches(
        s,
        task,
        seeds,
        {sd: _val_scores(base_tables[sd], names) for sd in seeds},
        s.n_nodes,
        table,
        folder_of=lambda label, k, sd: out / (f"search_{label.replace(' ', '_')}" + ("" if k == 0 else f"_seed{sd}")),
        row_name=lambda label, k, sd: f"discovered ({label})" + ("" if k == 0 else f" seed {sd}"),
        client=client,
        proposer_factory=proposer_factory,
    )
    t_search = time.perf_counter() - t0 - t_sim - t_base
    for (label, sd), ts in searches.items():
        best = ts.best()
        arrays = node_arrays(ts, best) if sd == seeds[0] and best is not None else {}
        if arrays:
            steps[f"discovered ({label})"] = {k[4:]: v for k, v in arrays.items() if k.startswith("mae/")}
    write_step_mae(out / "mae_per_step.csv", steps)

    ev = gather_evidence(task, seeds, searches, base_windows, base_val)
    ev.no_prior, ev.prior_note = prior_note(task)
    long_table, long_searches, t_long = None, {}, 0.0
    if long_task is not None:
        t1 = time.perf_counter()
        long_table, long_searches = _long_context(s, long_task, out, client, proposer_factory)
        ev.long_table, ev.long_context = long_table, long_task.context
        t_long = time.perf_counter() - t1
    planted, planted_seed = _planted_truth(s, task, long_task, ev, long_searches)
    t1 = time.perf_counter()
    ceiling, ceiling_note = _ceiling(s, task, long_task, planted)
    t_ceiling = time.perf_counter() - t1
    return StudyRun(
        s,
        task,
        long_task,
        ev,
        table,
        searches,
        long_table,
        long_searches,
        planted,
        planted_seed,
        true_phys,
        long_note,
        dict(simulation=t_sim, baselines=t_base, searches=t_search, long=t_long, ceiling=t_ceiling),
        all_neurons=all_neurons,
        n_units_recorded=n_recorded,
        ceiling=ceiling,
        ceiling_note=ceiling_note,
    )


def write_units(path: Path, task) -> Path:
    """The recording's units a subset task (:meth:`~neuro.tasks.ForecastTask.neuron_subset`) studies:
    one row per unit, its 0-based column in the traces (``unit``) and its name where the task has names."""
    idx = np.asarray(task.meta["neuron_index"], int)
    table = pd.DataFrame({"unit": idx})
    names = task.meta.get("name")
    if names is not None and np.ndim(names) == 1 and len(names) == len(idx):
        table["name"] = np.asarray(names).astype(str)
    table.to_csv(path, index=False)
    return path


def write_step_mae(path: Path, steps: dict) -> Path:
    """``{model: {split: MAE per horizon step}}`` as a CSV: one row per (model, split), columns
    ``lead_1 ... lead_H`` (z units; ZAPBench reports this curve)."""
    rows = {(m, sp): np.asarray(v, float) for m, by in steps.items() for sp, v in by.items()}
    if not rows:
        pd.DataFrame(columns=["model", "split"]).to_csv(path, index=False)
        return path
    H = max((len(v) for v in rows.values()), default=0)
    table = pd.DataFrame(
        [list(v) + [np.nan] * (H - len(v)) for v in rows.values()],
        index=pd.MultiIndex.from_tuples(list(rows), names=["model", "split"]),
        columns=[f"lead_{h + 1}" for h in range(H)],
    )
    table.to_csv(path)
    return path


def __getattr__(name: str):
    if name == "run_study_units":  # the unit runner's old name, until scimech 0.3.0
        warn_moved(f"{__name__}.run_study_units", f"{__name__}.run_units")
        return run_units
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
