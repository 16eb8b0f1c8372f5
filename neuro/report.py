"""The study's report (``report.md`` + html, figures), opening with the discovered model's competence
(:mod:`neuro.competence`), and the numbers saved beside it (``competence.nc``, ``competence.csv``,
``results.csv``, ``long_context.csv``, ``evidence.nc``, ``findings.json``, ``recovery.csv``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from scimech.run.results import atomic_write_text
from scimech.studies.competence import save_competence
from scimech.studies.report import Report

from .baselines import fit_baseline, model_name
from .competence import neuro_competence, world_of
from .evidence import evidence_dataset, node_arrays
from .faithfulness import probe_model
from .plots import (
    STEP_MAE_NO_BAND,
    plot_activity,
    plot_connectivity,
    plot_step_mae,
    plot_tail_angle,
    plot_tree,
    tail_readout,
    tree_caption,
)
from .recovery import report_table, summary_line, truth_frame
from .run import COLS, StudyRun
from .tasks import OOD_SUITES

__all__ = [
    "write_report",
    "save_numbers",
    "recovery_note",
    "units_note",
    "reading_of",
    "readable",
    "node_table",
    "number",
]

#: the report's words for the columns of ``results.csv`` and ``long_context.csv``
HEADERS = {
    "val": "validation MAE",
    "test": "test MAE",
    "ood_mean": "OOD MAE (mean of suites)",
    "id_ood_gap": "OOD minus test MAE",
    **{f"ood_{s}": s.replace("_", " ") for s in OOD_SUITES},
    "sign_accuracy": "sign accuracy",
    "weight_correlation": "weight correlation",
    "edge_auroc": "edge AUROC",
    "impulse_distance": "impulse distance (1 = no response)",
    "lr_phase": "left-right phase (cycles)",
    "rc_phase": "rostro-caudal phase (cycles)",
    "frequency": "beat frequency (Hz)",
    "frequency_error": "relative frequency error",
    "tail_phase_error": "tail |phase error| (cycles)",
    "tail_amplitude_ratio": "tail amplitude ratio",
    "tail_beat_forecast": "windows forecast (fraction)",
}
#: the tables of ``results.csv`` in the report, each narrow enough to be shown whole (its ``lesion_mae`` is
#: the lesion suite's MAE again, left to the file)
RESULT_TABLES = (
    ("Forecast error (MAE, z)", ("val", "test", "ood_mean", "id_ood_gap")),
    ("Out-of-distribution MAE (z) per suite", tuple(f"ood_{s}" for s in OOD_SUITES)),
    (
        "Faithfulness to the simulated circuit (the one-step Jacobian against the true weights; the impulse "
        "response's relative distance to the simulator's)",
        ("sign_accuracy", "weight_correlation", "edge_auroc", "impulse_distance"),
    ),
    (
        "The free run on the swimming windows (phases and frequency of the rostral motor neurons; the tail beat)",
        tuple(COLS[COLS.index("lr_phase") : COLS.index("tail_beat_forecast") + 1]),
    ),
)
_LONG_COLS = ("test", "ood_mean", "edge_auroc", "frequency", *RESULT_TABLES[-1][1][-3:])  # the tail beat's three
DASH = "–"  # a cell with no number: a draft's parent, a pruned node's score, a measure that does not apply


def number(v, digits: int = 3) -> str:
    """A table cell: ``digits`` significant digits (whole numbers from 1000 on), 0 for a value under
    1e-4 in size (a numerical zero such as 1e-17, not a measurement), :data:`DASH` for no number."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return DASH if v is None else str(v)
    if not np.isfinite(x):
        return DASH
    if abs(x) < 1e-4:
        return "0"
    return f"{x:.0f}" if abs(x) >= 10**digits else f"{x:.{digits}g}"


def readable(table: pd.DataFrame, columns) -> pd.DataFrame:
    """``table``'s ``columns`` (those it has, not all empty) as text cells (:func:`number`), with the
    report's headers (:data:`HEADERS`) and the models' plain names as row labels; empty when none is left."""
    keep = [c for c in columns if c in table.columns and pd.to_numeric(table[c], errors="coerce").notna().any()]
    out = table[keep].apply(lambda col: col.map(number))
    out.index = [model_name(i) for i in table.index]
    out.index.name = "model"
    return out.rename(columns=HEADERS)


def recovery_note(run: StudyRun) -> str:
    """``recovery.txt`` of a simulated study with no planted-truth table: why not (your traces
    have no planted truth and no ``recovery.txt``)."""
    return "neuro planted truth: 0 of 0 recovered (no structural-prior program finished)\n"


CEILING = "ceiling"  # the phase of the perfect forecaster in StudyRun.seconds


def _ceiling_text(run: StudyRun) -> str:
    """What the perfect-forecaster column is, or why it is absent (one sentence)."""
    if run.ceiling is None:
        return f" {run.ceiling_note}" if run.ceiling_note else ""
    return (
        " The perfect-forecaster column scores the best possible model the same way: the simulator forked at "
        "each window's context end from the recorded fish's exact state, run on with fresh noise (edges and "
        "signs: the circuit's own weights, exact by construction). A row it recovers and the discovered model "
        "misses is the model's failure, not its measure's."
    )


def save_numbers(run: StudyRun, findings) -> None:
    """The tables and the evidence behind the report, under the output folder."""
    out = run.settings.out
    run.table.to_csv(out / "results.csv")
    if run.long_table is not None:
        run.long_table.to_csv(out / "long_context.csv")
    evidence_dataset(run.evidence, run.settings.record()).to_netcdf(out / "evidence.nc")
    atomic_write_text(out / "findings.json", json.dumps([f.line() for f in findings], indent=1))
    if run.planted is not None:
        truth_frame(run.planted, run.ceiling).to_csv(out / "recovery.csv")


def _swim_predictions(task, searches: dict) -> tuple[np.ndarray, dict]:
    """The first swimming probe window's true activity and each model's forecast of it
    (the best program of each search in ``searches`` ``{label: TreeSearch}``, and ridge ARX)."""
    target = task.probes["swim_target"][0][: task.horizon]
    preds = {}
    for label, ts in searches.items():
        best = ts.best() if ts is not None else None
        arrays = node_arrays(ts, best) if best is not None else {}
        if "swim_pred" in arrays:
            preds[f"discovered ({label})"] = arrays["swim_pred"][0][: task.horizon]
    _, arrays = probe_model(fit_baseline("ridge_arx", task), task)
    preds["ridge_arx"] = arrays["swim_pred"][0][: task.horizon]
    return target, preds


def _swim_figures(rep: Report, task, searches: dict, *, activity: bool, name: str, caption: str) -> None:
    """The tail angle (and, with ``activity``, the activity of two MN and two V2a units) on a
    swimming probe window: true vs each model's forecast."""
    target, preds = _swim_predictions(task, searches)
    if activity:
        types = np.asarray(task.meta["type"])
        units = [int(i) for t in ("MN", "V2a") for i in np.flatnonzero(types == t)[:2]]
        rep.figure(
            plot_activity(target, preds, task.meta["name"], task.dt, units=tuple(units)),
            "activity",
            caption="Activity predicted vs true on a swimming window (z: each unit z-scored on the training trials)",
        )
    readout = tail_readout(task)
    rep.figure(
        plot_tail_angle(readout(target[None])[0], {k: readout(v[None])[0] for k, v in preds.items()}, task.dt),
        name,
        caption=caption,
    )


def reading_of(task):
    """The :class:`scimech.studies.reading.Reading` of recorded traces (``task.meta["reading"]``), or None."""
    from scimech.studies.reading import Reading

    text = task.meta.get("reading") if task.signal == "traces" else None
    return Reading.from_dict(json.loads(text)) if text else None


def _sampling(task) -> str:
    """Your traces: the sampling and the horizon in seconds, as the product gives them."""
    if task.signal != "traces":
        return ""
    return (
        f" The traces are sampled every {task.dt:.4g} s ({1 / task.dt:.3g} Hz): the context spans "
        f"{task.context * task.dt:.4g} s and the horizon forecasts {task.horizon * task.dt:.4g} s ahead."
    )


def _overview(run: StudyRun) -> str:
    s, task, t = run.settings, run.task, run.seconds
    return (
        f"Budget `{s.size}`: {len(s.seed_list)} search seed(s) {s.seed_list}, {s.n_nodes} nodes per search"
        f"{f', {s.n_long_nodes} per long-context search' if run.long_task is not None else ''}. Task "
        f"`{task.name}`: {task.n_neurons} observed units, context {task.context} and horizon {task.horizon} steps "
        f"of {task.dt * 1000:.0f} ms; MAE in z units (per-neuron train z-score). {len(task.train_series)} "
        f"training trials; ID val/test windows {len(task.val)}/{len(task.test)}; OOD suites "
        f"{', '.join(f'{k} ({len(v)})' for k, v in task.ood.items())}. Simulation {t['simulation']:.0f} s, "
        f"baselines {t['baselines']:.0f} s, searches {t['searches']:.0f} s, long context {t['long']:.0f} s"
        f"{f', perfect forecaster {t[CEILING]:.0f} s' if run.ceiling is not None and CEILING in t else ''}. "
        f"{run.long_note}{_sampling(task)}"
    )


def units_note(run: StudyRun) -> str | None:
    """What the study ran on when the recording has more units than it searches: how many of how
    many, how they were chosen, where the list and the every-unit baselines are; None otherwise."""
    if run.n_units_recorded is None or run.task.n_neurons >= run.n_units_recorded:
        return None
    n, total, s = run.task.n_neurons, run.n_units_recorded, run.settings
    return (
        f"**A subset of the recording's units.** The recording has {total} units; the program search, the "
        f"baselines it is compared with and every table and figure below use {n} of them ({n / total:.1%}), "
        f"drawn uniformly at random without replacement (seed {s.seed}, `--search-neurons {s.search_neurons}`; "
        f"their columns in `search_units.csv`). The baselines were also fitted and scored on all {total} units "
        "(the table after this one, `baselines_all_neurons.csv`): compare the two to see whether the subset "
        "is representative."
    )


def _physiology(run: StudyRun) -> str:
    p, segments = run.true_physiology, sorted({int(s) for s in run.task.meta["segment"] if s >= 0})
    return (
        f"Simulator physiology (true swimming probes): left-right phase {p['lr_phase']:.2f} cycles "
        f"(0.5 = antiphase), rostro-caudal phase {p['rc_phase']:.3f} cycles over {np.diff(segments)[0]} segments, "
        f"tail-beat frequency (mean over the probes) {p['frequency']:.1f} Hz."
    )


def _search_trees(rep: Report, run: StudyRun, *, figures: bool) -> None:
    """The first seed's search trees (``figures``) or the tables of their nodes."""
    seed = run.settings.seed_list[0]
    for label in ("priors", "no priors"):
        ts = run.searches.get((label, seed))
        if ts is None:
            continue
        if figures:
            rep.figure(
                plot_tree(ts.nodes, title=f"search tree ({label}, seed {seed})"),
                f"tree_{label.replace(' ', '_')}",
                caption=tree_caption(label),
            )
            continue
        rep.table(
            node_table(ts.nodes),
            caption=f"Nodes of the search with {label} (seed {seed}): validation MAE (z) of each program, and "
            f"that of its quick stage (a fit on a quarter of the training trials, scored on a subset of validation "
            f"windows: a node whose quick score exceeds 1.5 times the best so far is pruned); {DASH}: a draft has "
            "no parent, a pruned or failed node no full score",
        )


def node_table(nodes) -> pd.DataFrame:
    """One row per search node, as the report shows it: its parent ({DASH} for a draft), operation,
    status, validation MAE and quick-stage validation MAE ({DASH} where the node has none), error."""
    return pd.DataFrame(
        [
            {
                "node": n.id,
                "parent": DASH if n.parent is None or not np.isfinite(float(n.parent)) else str(int(n.parent)),
                "operation": n.op,
                "status": n.status,
                "validation MAE": number(n.val, 4),
                "quick-stage validation MAE": number(n.quick_val, 4),
                "error": (n.error or "")[:60],
            }
            for n in nodes
        ]
    ).set_index("node")


def _step_figure(rep: Report, run: StudyRun) -> None:
    """The MAE at each step of the horizon on the test windows (``mae_per_step.csv``), if it was written."""
    path = run.settings.out / "mae_per_step.csv"
    if not path.is_file():
        return
    table = pd.read_csv(path, index_col=[0, 1])
    if table.empty:
        return
    rep.figure(
        plot_step_mae(table, run.task.dt),
        "mae_per_step",
        caption="MAE (z) at each step of the horizon on the ID test windows, every baseline and the best "
        f"discovered program of each search (mae_per_step.csv; ZAPBench's curve); {STEP_MAE_NO_BAND}",
    )


def _connectivity_figure(rep: Report, run: StudyRun) -> None:
    """The simulated circuit's weights beside the Jacobian of the program scored against them."""
    ev, task = run.evidence, run.task
    if run.planted is None or ev.priors is None or task.true_weights is None or run.planted_seed is None:
        return
    k = list(run.settings.seed_list).index(run.planted_seed)
    J = ev.priors.arrays[k].get("jacobian")
    if J is None or not np.all(np.isfinite(J)):
        return
    rep.figure(
        plot_connectivity(task.true_weights, J, task.meta.get("name")),
        "connectivity",
        caption=f"True connectivity among the observed units (left) and the one-step Jacobian of the structural-prior "
        f"pick, seed {run.planted_seed} (right): what the edges and signs rows of the planted truth score",
    )


def _competence(rep: Report, run: StudyRun) -> None:
    """The discovered model against persistence and the linear forecasters, first in the report and saved."""
    table = neuro_competence(run.evidence, run.task, world=run.evidence.world or world_of(run.task))
    if table is None:
        rep.text("Competence not assessed: no discovered program finished, or no yardstick baseline ran.")
        return
    save_competence(table, run.settings.out)
    rep.competence(table)


def _planted_text(rep: Report, run: StudyRun) -> None:
    """The planted-truth section's words: the discovered model's line, with the perfect forecaster's
    (or why there is none); on your recording only why there is no perfect forecaster, in one line."""
    if run.planted is None:
        if run.ceiling_note and run.task.signal == "traces":
            rep.text(run.ceiling_note)
        return
    rep.heading("Planted truth vs what the study found")
    rep.text(
        f"The structural-prior search's pick (seed {run.planted_seed}, best ID validation over seeds) "
        f"against the simulated circuit; 95 % bootstrap intervals; RECOVERED when the whole interval is on "
        f"the expected side of the threshold or within the tolerance of the planted value.{_ceiling_text(run)}\n\n"
        f"{summary_line(run.planted, ceiling=run.ceiling)}"
    )


def _planted_table(rep: Report, run: StudyRun) -> None:
    """The planted-truth table, with the perfect forecaster's column when it ran."""
    if run.planted is None:
        return
    caption = "Planted truth per property (found: the estimate with its 95 % interval"
    if run.ceiling is not None:
        caption += "; perfect forecaster: the simulator forked at each window, scored by the same rule"
    rep.table(report_table(run.planted, run.ceiling), caption=caption + ")")


def write_report(run: StudyRun, findings) -> Path:
    """``report.md`` (+ html, figures) under the output folder, opening with the discovered model's
    competence (saved as ``competence.nc`` / ``.csv``); figures before tables. Returns its path."""
    task, long_task = run.task, run.long_task
    title = (
        "Model discovery on your recording"
        if task.signal == "traces"
        else "Model discovery against a simulated larval zebrafish"
    )
    rep = Report(run.settings.out, title=title, world=run.evidence.world or world_of(task))
    _competence(rep, run)
    reading = reading_of(task)
    if reading is not None:  # a product of yours: what was read from it comes first
        rep.text(reading.markdown())
    rep.text(_overview(run))
    subset = units_note(run)
    if subset:
        rep.text(subset)
    rep.heading("Which reference findings reproduce")
    rep.text("\n".join(f"- {f.line()}" for f in findings))
    _planted_text(rep, run)
    if run.true_physiology:
        rep.text(_physiology(run))
    rep.heading("Figures")
    _figures(rep, run)
    rep.heading("Tables")
    _planted_table(rep, run)
    scope = f"; the {task.n_neurons} units searched" if subset else ""
    for caption, columns in RESULT_TABLES:
        table = readable(run.table, columns)
        if not table.empty:
            rep.table(
                table,
                caption=f"{caption}: every baseline and the best discovered programs (selection used ID "
                f"validation only; every column in results.csv){scope}",
            )
    if subset:
        for caption, columns in RESULT_TABLES[:2]:
            table = readable(run.all_neurons, columns)
            if not table.empty:
                rep.table(
                    table,
                    caption=f"The baselines on all {run.n_units_recorded} units of the recording: "
                    f"{caption[0].lower()}{caption[1:]}",
                )
    if run.long_table is not None:
        rep.table(
            readable(run.long_table, _LONG_COLS),
            caption=f"Context {long_task.context}: test and OOD MAE (z), and the tail beat of the free run "
            "(every column, validation MAE included, in long_context.csv)",
        )
    _search_trees(rep, run, figures=False)
    return rep.write()


def _figures(rep: Report, run: StudyRun) -> None:
    task, long_task = run.task, run.long_task
    seed = run.settings.seed_list[0]
    if "swim_target" in task.probes:
        _swim_figures(
            rep,
            task,
            {label: run.searches.get((label, seed)) for label in ("priors", "no priors")},
            activity=True,
            name="tail_angle",
            caption="Tail angle (rad) read out linearly from true vs predicted MN activity",
        )
    if long_task is not None and "swim_target" in long_task.probes:
        _swim_figures(
            rep,
            long_task,
            run.long_searches,
            activity=False,
            name="tail_angle_long",
            caption=f"Context {long_task.context}: tail angle (rad) read out from true vs predicted "
            "activity after a context ending 50 ms into a bout",
        )
    _step_figure(rep, run)
    _connectivity_figure(rep, run)
    _search_trees(rep, run, figures=True)
