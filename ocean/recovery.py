"""Planted truth vs what the study found, and ``recovery.txt``.

The synthetic ocean is built with answers the study should find:

- the **hidden eddy heat flux** ``q_hidden``: part of the target, never prescribed, so
  only the free concept ``free_0`` can carry it;
- the **budget terms** ``q_surf ... q_diff``: each prescribed channel should be its term;
- the **head weights** of the exact budget (target = sum of the terms, so term k has
  weight ``scale_k / scale`` in normalised units; :func:`ocean.experiment.budget_weights`).

:func:`recovery` scores each truth per regime against a stated threshold, with an
interval, and says whether the regime was *expected* to recover it (supervised channels
in regimes with a concept loss; the free concept in regimes that train concepts and
task jointly). Rows for regimes not expected to recover a truth (prediction-only: no
channel is tied to a term) are contrasts: they are reported but not counted. The cells are read as
the rows every study shares (:func:`planted_rows`, :class:`scimech.studies.verdicts.PlantedTruthRow`):
the table (:func:`recovery_table`), the one line of every study (:func:`summary_line`, through
:func:`scimech.studies.verdicts.recovery_line`) and ``recovery.txt`` (:func:`recovery_text`) all read them.

A channel recovers a term when the 95 % interval of the Pearson r (signed for a named
channel; |r| for the free concept, whose sign is arbitrary) lies wholly above ``min_r``
(:func:`scimech.studies.verdicts.interval_clears`, the rule of every study) **and** that term is the true term closest to the channel (so a free
concept that copies a named term correlated with the hidden flux does not count). The
interval is a block bootstrap over test months: blocks of ``block`` consecutive months
of one member are resampled (neighbouring months are not independent), the same blocks
for every seed, and the statistic is the mean over seeds. The head weights are recovered
when their relative L1 error ``sum_k |w_k - w_budget_k| / sum_k |w_budget_k|`` is at most
``max_head_error`` in every seed (the interval is the range over seeds). In normalised
units each weight is its term's share of the target's spread, so the error weighs each term
by its size: a small term's weight going astray costs little.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import xarray as xr

from scimech.analysis.concepts import REGIMES
from scimech.analysis.stats import bootstrap_ci
from scimech.studies.verdicts import PlantedTruthRow, interval_clears, recovery_line, text_table

from .synthetic import CONCEPTS, PRESCRIBED

__all__ = ["recovery", "recovery_table", "planted_rows", "summary_line", "recovery_text", "no_planted_truth", "TRUTHS"]

FREE = "free_0"
HEAD = "head weights = exact budget"
TRUTHS = (f"q_hidden in {FREE}", *(f"{k} channel" for k in PRESCRIBED), HEAD)
_DESCRIPTION = {
    TRUTHS[0]: "the hidden eddy heat flux (in the target, never prescribed) is carried by the free concept",
    **{f"{k} channel": f"the channel named {k} is the budget term {k}" for k in PRESCRIBED},
    HEAD: "the 1x1 head weighs each term as the exact budget does (target = sum of the terms)",
}


def _expected(regime: str, truth: str) -> bool:
    """Is this regime built to recover this truth? (By its training, not by its result.)"""
    reg = REGIMES.get(regime)
    if reg is None:
        return False
    if truth == TRUTHS[0]:  # concepts and task trained together: the task's unexplained part has one home
        return reg.n_free != 0 and 0.0 < reg.lam_max < 1.0
    return reg.lam_max > 0.0  # named channels and their head weights need a concept loss


def _blocks(unit: xr.Dataset, block: int) -> np.ndarray:
    """Block id of each test sample: runs of ``block`` consecutive months of one member."""
    time = np.asarray(unit["time"].values)
    member = np.asarray(unit["member"].values) if "member" in unit.coords else np.zeros(len(time), int)
    ids = np.empty(len(time), int)
    nxt = 0
    for m in np.unique(member):
        idx = np.flatnonzero(member == m)
        idx = idx[np.argsort(time[idx], kind="stable")]
        ids[idx] = nxt + np.arange(len(idx)) // block
        nxt = ids[idx].max() + 1
    return ids


def _moments(unit: xr.Dataset, blocks: np.ndarray, channels: list[str]) -> dict[str, np.ndarray]:
    """Per block: sums of x, y, x^2, y^2 and x*y (channels x true terms) at ocean points.

    Values are centred on their overall mean first, so the sums lose no precision.
    """
    ok = unit["mask"].values.astype(bool)
    x = unit["c_pred"].sel(concept=channels).transpose("sample", "concept", "lat", "lon").values[..., ok]
    y = (
        unit["c_true"]
        .sel(true_concept=list(CONCEPTS))
        .transpose("sample", "true_concept", "lat", "lon")
        .values[..., ok]
    )
    fin = np.isfinite(x).all(1) & np.isfinite(y).all(1)  # (sample, point)
    x = np.where(fin[:, None], x, 0.0)
    y = np.where(fin[:, None], y, 0.0)
    n_all = fin.sum()
    x = np.where(fin[:, None], x - x.sum((0, 2)).reshape(1, -1, 1) / max(n_all, 1), 0.0)
    y = np.where(fin[:, None], y - y.sum((0, 2)).reshape(1, -1, 1) / max(n_all, 1), 0.0)
    per = {
        "n": fin.sum(1).astype(float),
        "sx": x.sum(2),
        "sy": y.sum(2),
        "sxx": (x * x).sum(2),
        "syy": (y * y).sum(2),
        "sxy": np.einsum("scp,stp->sct", x, y),
    }
    nb = blocks.max() + 1
    return {k: np.stack([v[blocks == b].sum(0) for b in range(nb)]) for k, v in per.items()}


def _spread(mom: Mapping[str, np.ndarray], take: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sums of squared deviations of the channels (seed, channel) and the terms (seed, term)."""
    n = mom["n"][:, take].sum(1)[:, None]
    return (
        mom["sxx"][:, take].sum(1) - mom["sx"][:, take].sum(1) ** 2 / n,
        mom["syy"][:, take].sum(1) - mom["sy"][:, take].sum(1) ** 2 / n,
    )


def _r(mom: Mapping[str, np.ndarray], take: np.ndarray) -> np.ndarray:
    """Pearson r (seed, channel, term) from per-block moments (seed, block, ...) of the blocks ``take``."""
    s = {k: mom[k][:, take].sum(1) for k in ("n", "sx", "sy", "sxy")}
    cov = s["sxy"] - s["sx"][..., :, None] * s["sy"][..., None, :] / s["n"][..., None, None]
    vx, vy = _spread(mom, take)
    den = np.sqrt(vx[..., :, None] * vy[..., None, :])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, cov / den, np.nan)


def _channel_rows(
    units: list[xr.Dataset], block: int, min_r: float, confidence: float, n_resamples: int, seed: int
) -> dict[str, dict]:
    first = units[0]
    for u in units[1:]:
        if not all(np.array_equal(u[c].values, first[c].values) for c in ("time", "member") if c in first.coords):
            raise ValueError(
                "The seeds of one regime were tested on different samples; planted-truth recovery "
                "needs every seed of a regime on the same test split (same data and config)."
            )
    channels = [c for c in [*PRESCRIBED, FREE] if c in first["concept"].values]
    blocks = _blocks(first, block)
    per_seed = [_moments(u, blocks, channels) for u in units]
    mom = {k: np.stack([p[k] for p in per_seed]) for k in per_seed[0]}  # (seed, block, ...)
    nb = blocks.max() + 1
    every = np.arange(nb)
    r_all = _r(mom, every)  # (seed, channel, term)
    with np.errstate(invalid="ignore"):
        closeness = np.abs(r_all).mean(0)  # (channel, term)
    rows = {}
    for c, name in enumerate(channels):
        term = "q_hidden" if name == FREE else name
        t = CONCEPTS.index(term)
        signed = name != FREE

        def stat(idx, c=c, t=t, signed=signed):
            r = _r(mom, np.asarray(idx, int))[:, c, t]
            return float(np.mean(r if signed else np.abs(r)))

        est = stat(every)
        lo = hi = np.nan
        if np.isfinite(est) and nb >= 2:
            _, lo, hi = bootstrap_ci(
                every.astype(float),
                stat,
                n_resamples=n_resamples,
                confidence=confidence,
                method="percentile",
                seed=seed,
            )
        row_close = closeness[c]
        nearest = CONCEPTS[int(np.nanargmax(row_close))] if np.isfinite(row_close).any() else None
        others = [
            (CONCEPTS[k], row_close[k])
            for k in np.argsort(-np.nan_to_num(row_close, nan=-1))
            if CONCEPTS[k] != term and np.isfinite(row_close[k])
        ]
        if not np.isfinite(est):
            vx, vy = _spread(mom, every)
            flat = [what for what, v in ((f"the {name} channel", vx[:, c]), (term, vy[:, t])) if np.any(v <= 0)]
            found = f"no correlation: {' and '.join(flat) or 'r'} constant over these test months"
        else:
            found = f"closest true term {nearest} (|r| {np.nanmax(row_close):.2f})"
            if nearest == term and others:
                found += f"; next {others[0][0]} (|r| {others[0][1]:.2f})"
            elif nearest != term:
                found += f"; {term} |r| {row_close[t]:.2f}"
        ok = bool(interval_clears(lo, hi, min_r) and nearest == term)
        rows[TRUTHS[0] if name == FREE else f"{name} channel"] = dict(
            estimate=est, low=lo, high=hi, recovered=ok, found=found
        )
    return rows


def _head_row(units: list[xr.Dataset], max_err: float) -> dict | None:
    if not all("head_weight_true" in u for u in units):
        return None
    errs, ratios = [], []
    for u in units:
        w = u["head_weight"].sel(concept=list(PRESCRIBED)).values.astype(float)
        wt = u["head_weight_true"].sel(concept=list(PRESCRIBED)).values.astype(float)
        if not np.all(np.isfinite(wt)) or np.any(wt == 0):
            return None
        ratios.append(w / wt)
        errs.append(float(np.abs(w - wt).sum() / np.abs(wt).sum()))
    mean_ratio = np.mean(ratios, 0)
    found = "w / w_budget: " + ", ".join(f"{k} {v:.2f}" for k, v in zip(PRESCRIBED, mean_ratio))
    return dict(
        estimate=float(np.mean(errs)),
        low=float(np.min(errs)),
        high=float(np.max(errs)),
        recovered=bool(np.max(errs) <= max_err),
        found=found + " (mean over seeds)",
    )


def recovery(
    units: Mapping[tuple[str, int], xr.Dataset],
    *,
    min_r: float = 0.5,
    max_head_error: float = 0.25,
    block: int = 3,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> xr.Dataset:
    """Score each planted truth per regime (see the module doc for the rules).

    Parameters
    ----------
    units
        ``(regime, seed) -> unit`` as returned by :func:`ocean.run.run_units`.
    min_r
        A channel recovers its term when the lower end of the interval of r is at least
        this (0.5: the term explains at least a quarter of the channel's variance) and the
        term is the one closest to the channel.
    max_head_error
        Head weights are recovered when the relative L1 error of the weight vector,
        ``sum |w - w_budget| / sum |w_budget|``, is at most this in every seed.
    block
        Months per bootstrap block (consecutive months of one member).
    confidence, n_resamples, seed
        Of the percentile bootstrap (:func:`scimech.analysis.stats.bootstrap_ci`).

    Returns
    -------
    xr.Dataset
        dims ``truth`` x ``regime``: ``recovery_estimate``, ``recovery_low``,
        ``recovery_high``, ``recovered``, ``recovery_expected`` and ``recovery_applies``
        (the regime has the component), ``recovery_found`` (what the study found, in
        words); per truth the ``truth_description``, ``recovery_measure``,
        ``recovery_interval`` and ``recovery_threshold``.
    """
    if block < 1:
        raise ValueError(f"block must be at least 1 month; got {block}.")
    regimes = list(dict.fromkeys(r for r, _ in units))
    T, R = len(TRUTHS), len(regimes)
    est, lo, hi = np.full((T, R), np.nan), np.full((T, R), np.nan), np.full((T, R), np.nan)
    rec, applies = np.zeros((T, R), bool), np.zeros((T, R), bool)
    expected = np.array([[_expected(r, t) for r in regimes] for t in TRUTHS])
    found = np.full((T, R), "", dtype=object)
    for j, reg in enumerate(regimes):
        us = [units[k] for k in sorted((k for k in units if k[0] == reg), key=lambda k: k[1])]
        rows = _channel_rows(us, block, min_r, confidence, n_resamples, seed)
        head = _head_row(us, max_head_error)
        if head is not None:
            rows[HEAD] = head
        for i, truth in enumerate(TRUTHS):
            if truth not in rows:
                found[i, j] = "n/a: " + ("no free concept" if truth == TRUTHS[0] else "not in this study's units")
                continue
            row = rows[truth]
            est[i, j], lo[i, j], hi[i, j] = row["estimate"], row["low"], row["high"]
            rec[i, j], applies[i, j], found[i, j] = row["recovered"], True, row["found"]
    # a verdict only from finite numbers: a cell without an estimate and its interval is not assessed
    assessed = applies & np.isfinite(est) & np.isfinite(lo) & np.isfinite(hi)
    rec &= assessed
    pct = f"{confidence:.0%}"
    measure = [
        f"|r({FREE}, q_hidden)|, mean over seeds",
        *(f"r({k} channel, {k}), mean over seeds" for k in PRESCRIBED),
        "sum |w - w_budget| / sum |w_budget| over the terms, mean over seeds",
    ]
    interval = [f"{pct} block bootstrap over test months ({block}-month blocks)"] * (T - 1) + ["range over seeds"]
    threshold = np.array([min_r] * (T - 1) + [max_head_error])
    criterion = [
        f"interval above {min_r} and q_hidden the closest true term",
        *(f"interval above {min_r} and {k} the closest true term" for k in PRESCRIBED),
        f"at most {max_head_error} in every seed",
    ]
    dims = ("truth", "regime")
    settings = {
        "min_r": min_r,
        "max_head_error": max_head_error,
        "block_months": block,
        "confidence": confidence,
        "n_resamples": n_resamples,
        "bootstrap_seed": seed,
    }
    return xr.Dataset(
        {
            "recovery_estimate": (
                dims,
                est,
                {"units": "1", "long_name": "measure of the planted truth (see recovery_measure)"},
            ),
            "recovery_low": (
                dims,
                lo,
                {"units": "1", "long_name": "lower end of the interval (see recovery_interval)"},
            ),
            "recovery_high": (dims, hi, {"units": "1", "long_name": "upper end of the interval"}),
            "recovered": (
                dims,
                rec,
                {"long_name": "planted truth recovered by the stated criterion (recovery_criterion)", **settings},
            ),
            "recovery_expected": (
                dims,
                expected,
                {"long_name": "the regime is built to recover this truth (else: a contrast, not counted)"},
            ),
            "recovery_applies": (dims, applies, {"long_name": "the regime has the component this truth is about"}),
            "recovery_assessed": (
                dims,
                assessed,
                {
                    "long_name": "the estimate and its interval are finite numbers "
                    "(else the cell is neither recovered nor missed)"
                },
            ),
            "recovery_found": (dims, found.astype(str), {"long_name": "what the study found, in words"}),
        },
        coords={
            "truth": list(TRUTHS),
            "regime": regimes,
            "truth_description": ("truth", [_DESCRIPTION[t] for t in TRUTHS]),
            "recovery_measure": ("truth", measure),
            "recovery_interval": ("truth", interval),
            "recovery_threshold": ("truth", threshold),
            "recovery_criterion": ("truth", criterion),
        },
        attrs={"description": "planted truth of the synthetic ocean vs what the study found", **settings},
    )


def _assessed(cell: xr.Dataset) -> bool:
    return bool(cell["recovery_assessed"]) if "recovery_assessed" in cell else True


def _rows(rec: xr.Dataset, expected: bool):
    for t in rec["truth"].values:
        for r in rec["regime"].values:
            cell = rec.sel(truth=t, regime=r)
            if bool(cell["recovery_expected"]) == expected and bool(cell["recovery_applies"]):
                yield t, r, cell


def recovery_table(rec: xr.Dataset) -> pd.DataFrame:
    """One row per (planted truth, regime) the regime can speak to: truth, measure, value with its
    interval, what was found, whether the regime was built to recover it, and the verdict; the rows of
    :func:`planted_rows` (the rows every study shares), with how each interval was made."""
    rows = []
    for r in planted_rows(rec):
        value = (
            "nan"
            if not np.isfinite(r.estimate)
            else (
                f"{r.estimate:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]"
                if np.isfinite(r.ci_low)
                else f"{r.estimate:.2f} [no interval]"
            )
        )
        rows.append(
            {
                "truth": r.truth,
                "regime": r.label,
                "measure": r.measure,
                "value [interval]": value,
                "interval": str(rec.sel(truth=r.truth, regime=r.label)["recovery_interval"].values),
                "found": r.found,
                "expected": "yes" if r.counted else "no (contrast)",
                "criterion": r.criterion,
                "recovered": r.verdict,
            }
        )
    return pd.DataFrame(rows)


def planted_rows(rec: xr.Dataset) -> list[PlantedTruthRow]:
    """The (truth, regime) cells a regime can speak to as the rows every study shares
    (:class:`scimech.studies.verdicts.PlantedTruthRow`); cells of regimes not built to recover a truth
    are contrasts (``counted=False``)."""
    rows = []
    for expected in (True, False):
        for t, r, cell in _rows(rec, expected):
            est, lo, hi = (float(cell[k]) for k in ("recovery_estimate", "recovery_low", "recovery_high"))
            rows.append(
                PlantedTruthRow(
                    str(t),
                    str(cell["recovery_measure"].values),
                    est,
                    lo,
                    hi,
                    float(cell["recovery_threshold"]),
                    bool(cell["recovered"]) if _assessed(cell) else None,
                    counted=expected,
                    found=str(cell["recovery_found"].values),
                    criterion=str(cell["recovery_criterion"].values),
                    label=str(r),
                )
            )
    return rows


def summary_line(rec: xr.Dataset, prefix: str = "ocean", world: str = "") -> str:
    """``ocean planted truth: K of N recovered (...) [world]`` (:func:`scimech.studies.verdicts.recovery_line`,
    the summary of every study): N counts the (truth, regime) pairs the regime is built to recover; the
    parenthesis gives each regime's count, the hidden-flux row and the contrasts."""
    rows = planted_rows(rec)
    counted = [r for r in rows if r.counted and r.assessed]
    per = []
    for reg in rec["regime"].values:
        mine = [bool(r.recovered) for r in counted if r.label == str(reg)]
        if mine:
            per.append(f"{reg} {sum(mine)}/{len(mine)}")
    parts = [", ".join(per)] if per else []
    for r in rows:
        if r.counted and r.truth == TRUTHS[0]:
            parts.append(
                f"hidden flux in the {r.label} free concept |r| {r.estimate:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]: "
                + r.verdict
            )
    contrast = [bool(r.recovered) for r in rows if not r.counted]
    if contrast:
        parts.append(f"contrasts, not built to recover: {sum(contrast)} of {len(contrast)} read recovered")
    return recovery_line(prefix, rows, "; ".join(parts), world=world)


def recovery_text(summary: xr.Dataset) -> str | None:
    """The text of ``recovery.txt``: :func:`summary_line`, the table, a note per truth on how it is
    scored; ``None`` for a summary with no planted truth."""
    if "recovered" not in summary:
        return None
    tab = recovery_table(summary)
    world = str(summary.attrs.get("world", ""))
    notes = [
        f"{t}: {d}. Measure: {m}; interval: {i}; recovered when {c}."
        for t, d, m, i, c in zip(
            summary["truth"].values,
            summary["truth_description"].values,
            summary["recovery_measure"].values,
            summary["recovery_interval"].values,
            summary["recovery_criterion"].values,
        )
    ]
    shown = tab.drop(columns=["measure", "interval", "criterion"])
    text = [
        summary_line(summary, world=world),
        "",
        text_table([str(c) for c in shown.columns], list(shown.itertuples(index=False)), rule=True),
        "",
        *notes,
        "Rows with expected 'no (contrast)' are regimes not built to recover the truth: reported, not counted.",
    ]
    return "\n".join(text)


def no_planted_truth(data: str) -> str:
    """The text of ``recovery.txt`` for a study of your own product: it has no planted truth, so nothing is
    scored as recovered or missed (the planted-truth rows belong to the synthetic ocean)."""
    return (
        f"ocean planted truth: none (your product {data} has no planted truth; the recovery rows score the "
        "synthetic ocean's built-in answers only)\n\nThe findings (findings.txt) are measured on your product; "
        "none of them is compared with a planted answer."
    )
