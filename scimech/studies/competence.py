"""Is the dissected model competent? The model against the classical yardsticks of its field, on the same data.

Interpretability of a model that has not learnt its task says little about the science, so
every study's report opens with one table (:func:`competence`): each dissected model and each
yardstick (astro: template fit and colour kNN; ocean: climatology, persistence and damped
persistence of the target; neuro: persistence and a linear model) scored by the field's metrics
on the same test samples, each with a bootstrap interval, and one verdict per dissected model:

- ``"competent"``: on every headline metric the model is not measurably worse than the best
  yardstick: the paired bootstrap interval of (model - best yardstick), oriented so that a
  positive value is worse, does not lie wholly above 0 (its lower bound is at most 0);
- ``"not competent: read the mechanisms with care"``: on some headline metric that interval lies
  wholly above 0 (the model is measurably worse than a classical method on the same samples);
- ``"not assessed"``: a number the rule needs is missing or not finite.

The intervals resample the test samples with replacement (percentile bootstrap,
:func:`scimech.analysis.stats.bootstrap_ci`), the same resample for every model (the comparison is
paired); samples that are not independent (overlapping windows of one trial, consecutive months)
are resampled by cluster (``clusters``: the trial, the block of months of each sample).

A study whose model is not competent still runs: its report says so first
(:func:`competence_markdown`), and the table is saved with its outputs (:func:`save_competence`:
``competence.nc``, ``competence.csv``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from scimech.analysis.stats import bootstrap_ci
from scimech.errors import DataValidationError

__all__ = [
    "COMPETENT",
    "NOT_COMPETENT",
    "NOT_ASSESSED",
    "RULE",
    "Metric",
    "competence",
    "competence_frame",
    "competence_markdown",
    "competence_line",
    "save_competence",
    "synthetic_world",
    "your_product",
    "COMPETENCE_FILE",
    "competence_summary",
]

COMPETENT = "competent"
NOT_COMPETENT = "not competent: read the mechanisms with care"
NOT_ASSESSED = "not assessed"
YARDSTICK = "yardstick"
COMPETENCE_FILE = "competence.nc"
RULE = (
    "competent when, on every headline metric, the paired bootstrap interval of (model - best yardstick) "
    "does not lie wholly on the worse side of 0 (the model is not measurably worse than the best classical "
    "method on the same samples)"
)


def synthetic_world(size: str) -> str:
    """The tag of a result on a synthetic world: ``"synthetic world (<size>)"``."""
    return f"synthetic world ({size})"


def your_product(name: str) -> str:
    """The tag of a result on the user's own data: ``"your product (<name>)"``."""
    return f"your product ({name})"


@dataclass(frozen=True)
class Metric:
    """One score of a model: ``statistic(values) -> float`` over the per-sample values of one model
    (a residual, an error), with its ``units``; ``lower_is_better`` for errors (``False`` for a skill
    or a correlation); ``headline``: the verdict rests on it."""

    name: str
    statistic: Callable[[np.ndarray], float]
    units: str = "1"
    lower_is_better: bool = True
    headline: bool = True
    description: str = ""


def _groups(clusters: np.ndarray | None, n: int) -> list[np.ndarray] | None:
    if clusters is None:
        return None
    clusters = np.asarray(clusters)
    if clusters.shape != (n,):
        raise DataValidationError(f"clusters label {clusters.shape} samples; the models have {n}.")
    return [np.flatnonzero(clusters == c) for c in np.unique(clusters)]


def _interval(
    arrays: Sequence[np.ndarray],
    stat: Callable[..., float],
    groups: list[np.ndarray] | None,
    *,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> tuple[float, float, float]:
    """``stat(*arrays)`` and its percentile bootstrap interval, resampling samples (or whole clusters)
    with the same indices for every array; NaN bounds with fewer than two samples or clusters."""
    est = float(stat(*arrays))
    units = len(arrays[0]) if groups is None else len(groups)
    if units < 2 or not np.isfinite(est):
        return est, np.nan, np.nan
    kw: dict[str, Any] = dict(n_resamples=n_resamples, confidence=confidence, method="percentile", seed=seed)
    if groups is None:
        if len(arrays) == 1:
            return bootstrap_ci(arrays[0], lambda a: stat(a), **kw)
        return bootstrap_ci(list(arrays), lambda *a: stat(*a), paired=True, **kw)

    def by_cluster(idx: np.ndarray) -> float:
        take = np.concatenate([groups[int(i)] for i in idx])
        return float(stat(*(a[take] for a in arrays)))

    return bootstrap_ci(np.arange(units, dtype=float), by_cluster, **kw)


def competence(
    samples: Mapping[str, np.ndarray],
    *,
    dissected: Sequence[str],
    metrics: Sequence[Metric],
    world: str,
    clusters: np.ndarray | None = None,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    note: str = "",
) -> xr.Dataset:
    """The competence table: every model's metrics with intervals, and a verdict per dissected model.

    Parameters
    ----------
    samples
        ``{model: per-sample values}``, every model on the same samples in the same order (a
        photo-z residual per galaxy, a mean squared error per forecast month, a mean absolute
        error per forecast window). Samples where any model is not finite are left out (counted
        in the ``n_dropped`` attribute).
    dissected
        The models the study dissects; the other models are the yardsticks.
    metrics
        The field's scores (:class:`Metric`); the verdict rests on the ``headline`` ones.
    world
        What the samples are: ``synthetic_world("12 x 16 grid, ...")`` or ``your_product("name")``.
    clusters
        A label per sample; samples of one label are resampled together (not independent).
    confidence, n_resamples, seed
        Of the percentile bootstrap.
    note
        The protocol in words (e.g. ZAPBench's), kept in the ``protocol`` attribute.

    Returns
    -------
    xr.Dataset
        dims ``model`` x ``metric``: ``value``, ``ci_low``, ``ci_high`` and, for the dissected
        models, ``worse_than_best`` (model - best yardstick, positive = worse) with
        ``worse_than_best_low`` / ``_high``; coords ``role`` and ``verdict`` (per model),
        ``units``, ``lower_is_better``, ``headline`` and ``best_yardstick`` (per metric); the rule,
        the world and the bootstrap settings as attributes.

    Raises
    ------
    DataValidationError
        No dissected model or no yardstick among ``samples``, or models of different lengths.
    """
    names = list(samples)
    missing = [d for d in dissected if d not in samples]
    yardsticks = [m for m in names if m not in dissected]
    if missing or not dissected or not yardsticks:
        raise DataValidationError(
            f"competence needs the dissected models and at least one yardstick among the samples; "
            f"got models {names}, dissected {list(dissected)} (missing: {missing})."
        )
    arrays = {m: np.asarray(samples[m], float).ravel() for m in names}
    lengths = {m: len(a) for m, a in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise DataValidationError(f"every model must be scored on the same samples; lengths {lengths}.")
    keep = np.all([np.isfinite(a) for a in arrays.values()], axis=0)
    arrays = {m: a[keep] for m, a in arrays.items()}
    groups = _groups(None if clusters is None else np.asarray(clusters)[keep], int(keep.sum()))
    kw: dict[str, Any] = dict(groups=groups, confidence=confidence, n_resamples=n_resamples, seed=seed)
    M, K = len(names), len(metrics)
    value, low, high = (np.full((M, K), np.nan) for _ in range(3))
    worse, worse_lo, worse_hi = (np.full((M, K), np.nan) for _ in range(3))
    best = []
    for k, met in enumerate(metrics):
        for i, m in enumerate(names):
            value[i, k], low[i, k], high[i, k] = _interval([arrays[m]], met.statistic, **kw)
        sign = 1.0 if met.lower_is_better else -1.0
        scores = {y: sign * value[names.index(y), k] for y in yardsticks if np.isfinite(value[names.index(y), k])}
        b = min(scores, key=scores.__getitem__) if scores else yardsticks[0]
        best.append(b)
        for d in dissected:
            i = names.index(d)
            worse[i, k], worse_lo[i, k], worse_hi[i, k] = _interval(
                [arrays[d], arrays[b]], lambda a, c, f=met.statistic, s=sign: s * (f(a) - f(c)), **kw
            )
    verdict = [_verdict(worse[i], worse_lo[i], metrics) if m in dissected else YARDSTICK for i, m in enumerate(names)]
    dims = ("model", "metric")
    return xr.Dataset(
        {
            "value": (dims, value, {"long_name": "the metric on the test samples"}),
            "ci_low": (dims, low, {"long_name": f"lower end of the {confidence:.0%} bootstrap interval"}),
            "ci_high": (dims, high, {"long_name": f"upper end of the {confidence:.0%} bootstrap interval"}),
            "worse_than_best": (
                dims,
                worse,
                {"long_name": "dissected model minus the best yardstick, oriented so that > 0 is worse (paired)"},
            ),
            "worse_than_best_low": (dims, worse_lo, {"long_name": "lower end of its interval"}),
            "worse_than_best_high": (dims, worse_hi, {"long_name": "upper end of its interval"}),
        },
        coords={
            "model": names,
            "metric": [m.name for m in metrics],
            "role": ("model", ["dissected model" if m in dissected else YARDSTICK for m in names]),
            "verdict": ("model", verdict),
            "units": ("metric", [m.units for m in metrics]),
            "lower_is_better": ("metric", [m.lower_is_better for m in metrics]),
            "headline": ("metric", [m.headline for m in metrics]),
            "best_yardstick": ("metric", best),
            "description": ("metric", [m.description or m.name for m in metrics]),
        },
        attrs={
            "description": "competence: the dissected model against the classical yardsticks on the same samples",
            "rule": RULE,
            "world": world,
            "protocol": note,
            "confidence": confidence,
            "n_resamples": n_resamples,
            "bootstrap_seed": seed,
            "n_samples": int(keep.sum()),
            "n_dropped": int((~keep).sum()),
            "n_clusters": int(keep.sum()) if groups is None else len(groups),
        },
    )


def _verdict(worse: np.ndarray, worse_low: np.ndarray, metrics: Sequence[Metric]) -> str:
    """The rule of the module doc, on one dissected model's headline metrics."""
    head = [k for k, m in enumerate(metrics) if m.headline]
    if not head or not all(np.isfinite(worse[k]) and np.isfinite(worse_low[k]) for k in head):
        return NOT_ASSESSED
    return NOT_COMPETENT if any(worse_low[k] > 0 for k in head) else COMPETENT


def _cell(v: float, lo: float, hi: float) -> str:
    if not np.isfinite(v):
        return "nan"
    fmt = "{:.3g}"
    bounds = f" [{fmt.format(lo)}, {fmt.format(hi)}]" if np.isfinite(lo) and np.isfinite(hi) else " [no interval]"
    return fmt.format(v) + bounds


def competence_frame(table: xr.Dataset) -> pd.DataFrame:
    """One row per model: role, each metric as ``value [low, high]`` (its units in the header) and the
    verdict; dissected models first."""
    rows = {}
    order = sorted(range(table.sizes["model"]), key=lambda i: str(table["role"].values[i]) != "dissected model")
    for i in order:
        m = table.isel(model=i)
        row = {"role": str(m["role"].values)}
        for k, met in enumerate(table["metric"].values):
            units = str(table["units"].values[k])
            head = f"{met} ({units})" if units and units != "1" else str(met)
            row[head] = _cell(*(float(m[v].values[k]) for v in ("value", "ci_low", "ci_high")))
        row["verdict"] = str(m["verdict"].values)
        rows[str(m["model"].values)] = row
    frame = pd.DataFrame(rows).T
    frame.index.name = "model"
    return frame


def competence_line(table: xr.Dataset) -> str:
    """One line per dissected model: ``<model>: competent`` / ``not competent: ...`` with the headline
    metric's value beside the best yardstick's, and the world."""
    parts = []
    for i, model in enumerate(table["model"].values):
        if str(table["role"].values[i]) != "dissected model":
            continue
        bits = []
        for k, met in enumerate(table["metric"].values):
            if not bool(table["headline"].values[k]):
                continue
            b = str(table["best_yardstick"].values[k])
            j = list(table["model"].values).index(b)
            v, bv = float(table["value"].values[i, k]), float(table["value"].values[j, k])
            lo, hi = float(table["worse_than_best_low"].values[i, k]), float(table["worse_than_best_high"].values[i, k])
            unit = str(table["units"].values[k]) if "units" in table.coords else ""
            unit = f" {unit}" if unit and unit != "1" else ""  # "1": a dimensionless metric
            bits.append(f"{met} {v:.3g}{unit} vs {b} {bv:.3g}{unit}, difference [{lo:.3g}, {hi:.3g}]{unit}")
        parts.append(f"{model}: {table['verdict'].values[i]} ({'; '.join(bits)})")
    return (
        f"Competence on {table.attrs.get('world', 'the data')}: "
        + "; ".join(parts)
        + " (difference: the model minus the best yardstick, 95% interval; > 0: the model is worse)"
    )


def _why_not_assessed(table: xr.Dataset) -> str:
    """Why a verdict is "not assessed", in words, with the fix: too few samples or clusters for an
    interval, or the models and metrics whose numbers are not finite."""
    n, k = int(table.attrs["n_samples"]), int(table.attrs["n_clusters"])
    if n == 0:
        return (
            f"no test sample has a finite score in every model ({int(table.attrs.get('n_dropped', 0))} left out): "
            "a model or yardstick gave NaN or infinite forecasts everywhere."
        )
    if k < 2:
        held = f"{n} test sample(s)" if k == n else f"{n} test sample(s) in {k} cluster(s) resampled together"
        return (
            f"the test data hold {held}, and a bootstrap interval needs at least two independent ones. "
            "Fix: more test samples (a longer record, or a larger test share of the split)."
        )
    bad = [
        f"{m} ({met})"
        for i, m in enumerate(table["model"].values)
        for j, met in enumerate(table["metric"].values)
        if not np.isfinite(float(table["value"].values[i, j]))
    ]
    if bad:
        return f"no finite value for {', '.join(bad)}: a model or yardstick gave NaN or infinite forecasts."
    return "a number the rule needs is missing or not finite."


def competence_markdown(table: xr.Dataset) -> str:
    """The paragraph a report opens with: the verdict of each dissected model first, the rule and the data."""
    verdicts = [str(v) for v, r in zip(table["verdict"].values, table["role"].values) if r == "dissected model"]
    worst = NOT_COMPETENT if NOT_COMPETENT in verdicts else NOT_ASSESSED if NOT_ASSESSED in verdicts else COMPETENT
    lead = {
        COMPETENT: "**The dissected model is competent**: it is no worse than the classical yardsticks of its "
        "field on the same samples, so the mechanisms below are those of a model that learnt its task.",
        NOT_COMPETENT: "**Not competent: read the mechanisms with care.** The dissected model is measurably worse "
        "than a classical yardstick on the same samples; what the study reads below may describe a model that "
        "has not learnt its task rather than the science.",
        NOT_ASSESSED: f"**Competence not assessed**: {_why_not_assessed(table)}",
    }[worst]
    protocol = f" Protocol: {table.attrs['protocol']}." if table.attrs.get("protocol") else ""
    n, k = int(table.attrs["n_samples"]), int(table.attrs["n_clusters"])
    over = f"{n} test samples" if k == n else f"{k} clusters of {n} test samples"
    return (
        f"{lead}\n\n{competence_line(table)}.\n\nRule: {table.attrs['rule']}; "
        f"{float(table.attrs['confidence']):.0%} percentile bootstrap over {over}, "
        f"{table.attrs['n_resamples']} resamples.{protocol}"
    )


def save_competence(table: xr.Dataset, out: str | Path) -> list[Path]:
    """``out/competence.nc`` (the labelled table) and ``out/competence.csv`` (:func:`competence_frame`)."""
    from scimech.run.results import atomic_write_text, save  # lazy: netCDF and the provenance

    out = Path(out)
    nc = save(table, out / COMPETENCE_FILE)
    csv = atomic_write_text(out / "competence.csv", competence_frame(table).to_csv())
    return [nc, csv]


def competence_summary(folder: str | Path) -> str:
    """One cell for an index of studies: each dissected model's verdict from ``folder/competence.csv``
    (``"competent"``; ``"mixed: competent; prediction_only: not competent: ..."``), or ``"not reported"``."""
    path = Path(folder) / "competence.csv"
    if not path.is_file():
        return "not reported"
    table = pd.read_csv(path, index_col=0)
    rows = table[table["role"] == "dissected model"]["verdict"]
    if rows.nunique() == 1:
        return str(rows.iloc[0])
    return "; ".join(f"{m}: {v}" for m, v in rows.items())
