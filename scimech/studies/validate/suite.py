"""Run every planted case, score the decisions against the planted truth, save and report.

:func:`run` measures each case of :data:`CASES` with the core's methods and returns one
``xr.Dataset`` over ``(case, technique, component)``; :func:`missed` lists every row whose
decision disagrees with the planted truth (and every failed completeness check);
:func:`write_report` writes ``report.md`` / ``report.html``; :func:`main` is the
``scimech validate`` command.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import xarray as xr

from scimech.errors import ConfigError
from scimech.run.results import provenance, save
from scimech.studies.report import Report

from . import (
    ablation_choice,
    hidden_concept,
    inert,
    known_attributions,
    shifted_subspace,
    silent,
    sparse_features,
)
from .measure import METHODS, STATISTICS, Settings

__all__ = ["CASES", "run", "score", "missed", "write_report", "main"]

CASES: dict[str, ModuleType] = {
    m.NAME: m
    for m in (inert, silent, ablation_choice, hidden_concept, known_attributions, sparse_features, shifted_subspace)
}
"""The planted cases by name, in the order they run and are reported."""

_PER_CELL = ("estimate", "ci_low", "ci_high", "flagged", "truth", "expected", "threshold")


def _stack(parts: Sequence[xr.Dataset]) -> xr.Dataset:
    """Concatenate per-case datasets along ``case`` over the union of components and methods."""
    components: list[str] = []
    for p in parts:
        components += [c for c in p.component.values.tolist() if c not in components]
    methods = [m for m in METHODS if any(m in p.technique.values for p in parts)]
    aligned = []
    for p in parts:
        p = p.copy()
        mech = p["mechanism"].values
        p = p.drop_vars("mechanism")
        p["mechanism"] = ("component", mech)  # a variable, so that it gains the case dim
        p = p.reindex({"component": components, "technique": methods}).expand_dims(case=[p.attrs["case"]])
        p.attrs = {}
        aligned.append(p)
    ds = xr.concat(
        aligned, dim="case", join="outer", coords="minimal", compat="override", data_vars="all", combine_attrs="drop"
    )
    for p in parts:  # case-specific settings (e.g. how the concept bottleneck was trained)
        ds.attrs.update(
            {f"{p.attrs['case']}_{k}": v for k, v in p.attrs.items() if k not in ("case", "title", "planted", "lesson")}
        )
    return ds.assign_coords({k: ("case", [p.attrs[k] for p in parts]) for k in ("title", "planted", "lesson")})


def score(ds: xr.Dataset) -> xr.Dataset:
    """Add ``correct`` per row and precision / recall per ``(case, technique)``.

    ``precision`` and ``recall`` compare the decisions with ``truth`` (what each method
    should report); ``mechanism_precision`` / ``mechanism_recall`` compare them with the
    planted mechanism (what the scientist asks), so a method that works exactly as
    specified can still answer the wrong question (a probe in ``inert``, zero ablation in
    ``ablation_choice``).
    """
    ds = ds.copy()
    evaluated = ds.truth.notnull()
    flag = ds.flagged == 1
    truth = ds.truth == 1
    mech = (ds.mechanism == 1) & evaluated
    ds["correct"] = xr.where(evaluated, (flag == truth).astype(float), np.nan)
    tp, n_flag, n_true = (flag & truth).sum("component"), (flag & evaluated).sum("component"), truth.sum("component")
    with np.errstate(divide="ignore", invalid="ignore"):
        ds["precision"] = xr.where(n_flag > 0, tp / n_flag, np.nan)
        ds["recall"] = xr.where(n_true > 0, tp / n_true, np.nan)
        mtp, m_true = (flag & mech).sum("component"), mech.sum("component")
        ds["mechanism_precision"] = xr.where(n_flag > 0, mtp / n_flag, np.nan)
        ds["mechanism_recall"] = xr.where(m_true > 0, mtp / m_true, np.nan)
    any_row = evaluated.any("component")
    ds["wrong"] = xr.where(any_row, (evaluated & (flag != truth)).sum("component"), np.nan)
    for name in ("precision", "recall", "mechanism_precision", "mechanism_recall", "wrong"):
        ds[name] = ds[name].where(any_row)
    complete = True
    if "completeness_residual" in ds:
        complete = ((ds.completeness_residual <= ds.completeness_tolerance) | ds.completeness_residual.isnull()).all(
            "technique"
        )
    ds["passed"] = ((ds.wrong.fillna(0).sum("technique") == 0) & complete).astype(int)
    return _describe(ds)


def _describe(ds: xr.Dataset) -> xr.Dataset:
    text = {
        "estimate": ("the measured statistic of the method (see the method's `statistic`)", None),
        "ci_low": ("lower bound of the 95% BCa bootstrap interval of the estimate", None),
        "ci_high": ("upper bound of the 95% BCa bootstrap interval of the estimate", None),
        "flagged": ("1: the method flags the component (ci_low > threshold), 0: not, NaN: not measured", "1"),
        "truth": ("1: the planted model says this method, working as specified, must flag it; 0: must not", "1"),
        "expected": ("analytic population value of the statistic, where one exists", None),
        "threshold": ("decision threshold of the statistic", None),
        "mechanism": ("1: the component is part of the planted mechanism the case asks about", "1"),
        "order": ("position of the component in its case's model (NaN: not in the case)", "1"),
        "correct": ("1: the decision agrees with the planted truth, 0: it does not", "1"),
        "precision": ("flagged components that the planted truth flags / flagged components", "1"),
        "recall": ("flagged components that the planted truth flags / components the truth flags", "1"),
        "mechanism_precision": ("flagged components in the planted mechanism / flagged components", "1"),
        "mechanism_recall": ("flagged components in the planted mechanism / components in it", "1"),
        "wrong": ("rows whose decision disagrees with the planted truth", "1"),
        "passed": ("1: every decision of the case agrees with its planted truth (and completeness holds)", "1"),
    }
    for name, (desc, units) in text.items():
        if name in ds:
            ds[name].attrs["description"] = desc
            if units:
                ds[name].attrs["units"] = units
    return ds


def run(
    quick: bool = True,
    out: str | Path | None = None,
    *,
    seed: int = 0,
    cases: Sequence[str] | None = None,
    log: Callable[[str], None] | None = None,
) -> xr.Dataset:
    """Measure every planted case and score the toolkit's decisions against the planted truth.

    Parameters
    ----------
    quick
        The small sizes (512 samples per case, 500 bootstrap resamples; under half a
        minute on one core) instead of the full ones (2048 samples, 2000 resamples).
    out
        A folder: writes ``validation.nc`` (with provenance) and ``report.md`` /
        ``report.html`` there.
    seed
        Seed of the data, the training, the resampling and the bootstrap.
    cases
        Names from :data:`CASES` (default: all).
    log
        Called with one line per finished case (e.g. ``print``).

    Raises
    ------
    ConfigError
        An unknown case name.

    Returns
    -------
    xr.Dataset
        dims ``case``, ``technique``, ``component``: per row ``estimate``, ``ci_low``,
        ``ci_high``, ``threshold``, ``flagged``, ``truth``, ``expected``, ``correct``;
        ``mechanism`` per (case, component); ``precision``, ``recall``,
        ``mechanism_precision``, ``mechanism_recall``, ``wrong`` per (case, technique);
        ``passed`` and ``seconds`` per case; the method's ``statistic`` as a coord; attrs
        with the settings and provenance.
    """
    names = list(cases or CASES)
    unknown = [c for c in names if c not in CASES]
    if unknown:
        raise ConfigError(f"Unknown planted case(s) {unknown}; choose from {list(CASES)}.")
    settings = Settings.of(quick, seed)
    parts, seconds = [], []
    for name in names:
        t0 = time.perf_counter()
        parts.append(CASES[name].measure(settings))
        seconds.append(time.perf_counter() - t0)
        if log is not None:
            part = score(_stack(parts[-1:]))
            n_rows = int(part.correct.notnull().sum())
            n_ok = int((part.correct == 1).sum())
            log(f"{name}: {n_ok} of {n_rows} rows agree with the planted truth ({seconds[-1]:.1f} s)")
    ds = score(_stack(parts))
    ds["seconds"] = ("case", np.round(seconds, 2), {"description": "wall time of the case", "units": "s"})
    ds = ds.assign_coords(statistic=("technique", [STATISTICS[m] for m in ds.technique.values]))
    ds.attrs.update(provenance(settings.as_dict(), seed))
    ds.attrs.update(
        {
            "description": "scimech planted-mechanism validation: the core's methods against models whose "
            "mechanism is known by construction",
            "decision": "flagged = lower bound of the 95% bootstrap interval > threshold",
            "quick": int(quick),
        }
    )
    if out is not None:
        out = Path(out)
        save(ds, out / "validation.nc", config=settings.as_dict(), seed=seed)
        write_report(ds, out)
    return ds


def missed(ds: xr.Dataset) -> list[str]:
    """One line per planted row the toolkit got wrong (empty: everything recovered).

    A row is wrong when its decision (``flagged``) disagrees with the planted ``truth``:
    a planted effect not flagged (missed) or an absent one flagged (a false alarm); an
    attribution method whose completeness residual exceeds its tolerance also counts.
    """
    if "correct" not in ds:
        ds = score(ds)
    lines = []
    wrong = ds.correct.transpose("case", "technique", "component").values == 0
    for i, j, k in zip(*np.nonzero(wrong), strict=True):
        row = ds.isel(case=i, technique=j, component=k)
        what = "missed: planted effect not flagged" if row.truth == 1 else "false alarm: flagged, planted none"
        lines.append(
            f"{row.case.item()}/{row.component.item()} [{row.technique.item()}]: {what} (estimate "
            f"{float(row.estimate):.3g}, 95% CI [{float(row.ci_low):.3g}, {float(row.ci_high):.3g}], "
            f"threshold {float(row.threshold):.3g})"
        )
    if "completeness_residual" in ds:
        res = ds.completeness_residual.transpose("case", "technique")
        tol = ds.completeness_tolerance.transpose("case", "technique").values
        for i, j in zip(*np.nonzero(np.isfinite(res.values) & (res.values > tol)), strict=True):
            lines.append(
                f"{ds.case.values[i]} [{ds.technique.values[j]}]: completeness fails (relative residual "
                f"{res.values[i, j]:.3g} > {tol[i, j]:.3g})"
            )
    return lines


def _cell(row: xr.Dataset) -> str:
    if not np.isfinite(row.truth):
        return ""
    mark = "**flag**" if row.flagged == 1 else "-"
    ok = "" if row.correct == 1 else " WRONG"
    return f"{mark} {float(row.estimate):.3g} [{float(row.ci_low):.3g}, {float(row.ci_high):.3g}]{ok}"


def _truth_words(ds_case: xr.Dataset, comp: str) -> str:
    flags = [m for m in ds_case.technique.values if ds_case.truth.sel(technique=m, component=comp) == 1]
    mech = "in the mechanism" if ds_case.mechanism.sel(component=comp) == 1 else "not in the mechanism"
    return f"{mech}; should be flagged by: {', '.join(flags) or 'none'}"


def write_report(ds: xr.Dataset, out: str | Path) -> Path:
    """Write ``report.md`` / ``report.html`` for a result of :func:`run`; returns the Markdown path."""
    from scimech import __version__

    out = Path(out)
    rep = Report(out, title="scimech validate: planted mechanisms")
    lines = missed(ds)
    n_rows = int(ds.correct.notnull().sum())
    quick = "--quick " if int(ds.attrs.get("quick", 1)) else ""
    rep.text(
        f"Produced by `scimech validate {quick}--seed {ds.attrs.get('seed', 0)}` (scimech {__version__}). "
        "Each case is a small model whose mechanism is known by construction; the core's own methods "
        "(probes, ablation, patching, concept bottlenecks, captum attribution) measure it, and a component "
        "is **flagged** when the lower bound of the 95% bootstrap interval of the method's statistic "
        "exceeds the threshold. `truth` is what each method must report if it works as specified; the "
        "*mechanism* is what the scientist asks about."
    )
    if lines:
        rep.text(
            f"**{len(lines)} planted check(s) wrong** ({n_rows} rows in all):\n\n"
            + "\n".join(f"- {line}" for line in lines)
        )
    else:
        rep.text(f"**All {n_rows} planted rows recovered** (every decision agrees with the planted truth).")
    summary = ds[["precision", "recall", "mechanism_precision", "mechanism_recall", "wrong"]].to_dataframe()
    summary = summary.dropna(subset=["wrong"])[
        ["precision", "recall", "mechanism_precision", "mechanism_recall", "wrong"]
    ]
    summary.index = [f"{c} / {m}" for c, m in summary.index]
    summary.index.name = "case / technique"
    rep.table(
        summary,
        caption="Precision and recall against the planted truth (what each method must report) "
        "and against the planted mechanism (what the scientist asks)",
    )
    for case in ds.case.values:
        dc = ds.sel(case=case)
        comps = [str(c) for c in dc.order.dropna("component").sortby(dc.order.dropna("component")).component.values]
        meths = [m for m in dc.technique.values if dc.truth.sel(technique=m).notnull().any()]
        rep.heading(f"{case}: {dc.title.item()}")
        rep.text(
            f"Planted: {dc.planted.item()}\n\nCase {'passed' if dc.passed == 1 else 'FAILED'} "
            f"({float(dc.seconds):.1f} s). Cells: decision, estimate [95% CI]."
        )
        rep.text(f"What it shows: {dc.lesson.item()}")
        table = {m: [_cell(dc.sel(technique=m, component=c)) for c in comps] for m in meths}
        table["planted"] = [_truth_words(dc.sel(technique=meths), c) for c in comps]
        df = pd.DataFrame(table, index=pd.Index(comps, name="component"))
        rep.table(df)
        thr = {m: float(dc.threshold.sel(technique=m).dropna("component")[0]) for m in meths}
        rep.text("Thresholds: " + "; ".join(f"{m} {v:.3g}" for m, v in thr.items()) + ".")
        if "completeness_residual" in dc and dc.completeness_residual.notnull().any():
            comp = dc[["completeness_residual", "completeness_tolerance"]].to_dataframe().dropna()
            rep.table(
                comp[["completeness_residual", "completeness_tolerance"]],
                caption="Completeness: relative residual of the attributions' sum",
            )
    stats = pd.DataFrame({"statistic": ds.statistic.values}, index=pd.Index(ds.technique.values, name="technique"))
    rep.table(stats, caption="What each method's estimate is")
    return rep.write()


def main(
    quick: bool = True, out: str | Path = "reports/validate", seed: int = 0, cases: Sequence[str] | None = None
) -> int:
    """The ``scimech validate`` command: run, write, print what was missed; 1 if anything was."""
    out = Path(out)
    t0 = time.perf_counter()
    ds = run(
        quick=quick, out=out, seed=seed, cases=cases, log=lambda line: print(f"[scimech validate] {line}", flush=True)
    )
    lines = missed(ds)
    n_rows, n_ok = int(ds.correct.notnull().sum()), int((ds.correct == 1).sum())
    print(f"[scimech validate] {n_ok} of {n_rows} planted rows recovered in {time.perf_counter() - t0:.0f} s")
    for line in lines:
        print(f"MISSED {line}", file=sys.stderr)
    print(f"Results: {(out / 'validation.nc').resolve()}\nReport: {(out / 'report.md').resolve()}")
    return 1 if lines else 0
