"""The reference study's findings, each tested on a run's numbers.

:func:`findings` gives one :class:`scimech.studies.contract.Finding` per claim of the reference (similar
skill across regimes; a more consistent bottleneck across seeds for ``mixed`` than for each
other regime) and :func:`verdict` the paragraph the report opens with. The planted truth and the
text of ``recovery.txt`` are :mod:`ocean.recovery`'s (as in every study); their names here of
scimech 0.1 (``ocean.findings.recovery_text``, ``no_planted_truth``) give the same functions, with a
DeprecationWarning, until scimech 0.3.0.
"""

from __future__ import annotations

import dataclasses
import importlib

import pandas as pd
import xarray as xr

from scimech._moved import warn_moved
from scimech.studies.verdicts import Finding, assess

__all__ = [
    "CONSISTENCY",
    "KEY_MEASURES",
    "MAX_SKILL_SPREAD",
    "consistency_ranking",
    "verdict",
    "findings",
    "findings_lines",
]

#: the names that moved to :mod:`ocean.recovery`, each served here with a DeprecationWarning until 0.3.0
MOVED_TO_RECOVERY = ("recovery_text", "no_planted_truth")


KEY_MEASURES = ("channel_agreement_mean", "cka_mean")  # the verdict needs mixed ahead on both
MAX_SKILL_SPREAD = 0.15  # "similar skill": RMSE range over regimes below 15 % of their mean

# consistency measures: (summary variable, label, True when higher = more consistent)
CONSISTENCY = (
    ("channel_agreement_mean", "channel agreement (signed r of the same channel)", True),
    ("cka_mean", "linear CKA", True),
    ("cka_std_mean", "CKA, channels standardised", True),
    ("procrustes_mean", "Procrustes distance", False),
    ("head_weight_cv_mean", "CV of prescribed head weights", False),
)


def consistency_ranking(summary: xr.Dataset) -> pd.DataFrame:
    """Per consistency measure: each regime's value and the most consistent regime."""
    rows = {}
    for var, label, higher in CONSISTENCY:
        if var not in summary:
            continue
        ser = summary[var].to_series().dropna()
        if len(ser) == 0:
            continue
        best = ser.idxmax() if higher else ser.idxmin()
        rows[label] = {**{r: float(v) for r, v in ser.items()}, "most consistent": best}
    return pd.DataFrame(rows).T


def verdict(summary: xr.Dataset) -> str:
    """One paragraph stating what was measured against the paper's qualitative finding
    (similar skill across regimes; clearly higher cross-seed consistency for ``mixed``).

    Reproduced means: RMSE spread over regimes below 15 % of the mean, and ``mixed`` the
    most consistent regime by the channel agreement *and* by linear CKA.
    """
    regs = list(summary["regime"].values)
    rmse = summary["rmse"].mean("seed").to_series()
    lines = []
    if len(regs) < 2:
        return "Only one regime was run: nothing to compare."
    spread = (rmse.max() - rmse.min()) / rmse.mean()
    lines.append(
        f"RMSE ranges over regimes from {rmse.min():.1f} to {rmse.max():.1f} W m-2 "
        f"(relative spread {spread:.1%}; climatology {float(summary['rmse_climatology'].mean()):.1f})."
    )
    rank = consistency_ranking(summary)
    if "mixed" not in regs or rank.empty:
        return " ".join(lines)
    sd = summary["channel_agreement_sd"].to_series() if "channel_agreement_sd" in summary else None
    for label, row in rank.iterrows():
        with_sd = label.startswith("channel agreement") and sd is not None
        vals = ", ".join(
            f"{r} {row[r]:.3f}" + (f" (sd over seed pairs {sd[r]:.3f})" if with_sd and pd.notna(sd[r]) else "")
            for r in regs
            if r in row and pd.notna(row[r])
        )
        lines.append(f"{label[0].upper() + label[1:]}: {vals} (most consistent: {row['most consistent']}).")
    wins = [label for label, row in rank.iterrows() if row["most consistent"] == "mixed"]
    key = ["channel agreement (signed r of the same channel)", "linear CKA"]
    key_wins = all(k in wins for k in key if k in rank.index)
    if "free_hidden_abs_r" in summary:
        fr = float(summary["free_hidden_abs_r"].sel(regime="mixed").mean())
        probe = summary["hidden_probe_r2"].mean("seed").to_series() if "hidden_probe_r2" in summary else None
        lines.append(
            f"The mixed free concept correlates with the hidden eddy flux at |r| = {fr:.2f}"
            + (
                (
                    "; a linear probe of the whole bottleneck recovers q_hidden with held-out R2 "
                    + ", ".join(f"{r} {v:.2f}" for r, v in probe.items())
                    + "."
                )
                if probe is not None
                else "."
            )
        )
    higher_is_better = {label: hb for _, label, hb in CONSISTENCY}
    pair = []
    for other in (r for r in regs if r != "mixed"):
        beats = [
            label
            for label, row in rank.iterrows()
            if other in row
            and pd.notna(row[other])
            and pd.notna(row["mixed"])
            and (row["mixed"] > row[other] if higher_is_better[label] else row["mixed"] < row[other])
        ]
        pair.append(f"{other} on {len(beats)} of {len(rank)}")
    lines.append("Pairwise, mixed is more consistent than " + "; than ".join(pair) + " measures.")
    found = findings(summary)
    unassessed = [f for f in found if not f.assessed]
    if unassessed:
        outcome = "NOT ASSESSED here (" + "; ".join(f.reason for f in unassessed) + ")."
    elif key_wins and spread < MAX_SKILL_SPREAD and all(f.verdict == "REPRODUCED" for f in found):
        outcome = "reproduced here."
    else:
        outcome = "NOT reproduced here: see the tables."
    lines.append(
        f"Mixed supervision is the most consistent regime on {len(wins)} of {len(rank)} measures. "
        "The paper's qualitative finding (similar skill, clearly higher consistency for mixed) is " + outcome
    )
    return " ".join(lines)


def findings(summary: xr.Dataset) -> list[Finding]:
    """The reference study's findings, each tested on this run's numbers, each tagged with the world it
    was tested on (``summary.attrs["world"]``)."""
    world = str(summary.attrs.get("world", ""))
    return [dataclasses.replace(f, world=world) for f in _findings(summary)]


def _findings(summary: xr.Dataset) -> list[Finding]:
    """The reference study's findings, each tested on this run's numbers.

    1. Skill is similar across supervision regimes (RMSE range below 15 % of the mean).
    2. Mixed supervision gives a more consistent bottleneck across seeds than each other
       regime: higher channel agreement *and* higher linear CKA (one finding per regime).
       Consistency across seeds needs at least two seeds: with fewer, or with a measure that
       is not a finite number, the finding reads NOT ASSESSED with the reason
       (:func:`scimech.studies.contract.assess`), never "NOT reproduced".

    Returns
    -------
    list of scimech.studies.contract.Finding
        In that order; all of them reproduced is what :func:`verdict` calls reproduced.
    """
    regs = [str(r) for r in summary["regime"].values]
    out: list[Finding] = []
    if len(regs) < 2:
        return out
    rmse = summary["rmse"].mean("seed").to_series()
    spread = float((rmse.max() - rmse.min()) / rmse.mean())
    out.append(
        assess(
            "skill is similar across supervision regimes",
            bool(spread < MAX_SKILL_SPREAD),
            f"RMSE {', '.join(f'{r} {v:.1f}' for r, v in rmse.items())} W m-2; range "
            f"{spread:.1%} of the mean (similar: below {MAX_SKILL_SPREAD:.0%})",
            numbers={f"RMSE of {r}": v for r, v in rmse.items()},
        )
    )
    if "mixed" not in regs:
        return out
    labels = {var: label for var, label, _ in CONSISTENCY}
    n_seeds = summary.sizes.get("seed", 1)
    for other in (r for r in regs if r != "mixed"):
        vals = {
            v: (float(summary[v].sel(regime="mixed")), float(summary[v].sel(regime=other)))
            for v in KEY_MEASURES
            if v in summary
        }
        numbers = {f"{labels[v]} of {r}": x for v, pair in vals.items() for r, x in zip(("mixed", other), pair)}
        out.append(
            assess(
                f"mixed supervision gives a more consistent bottleneck across seeds than {other}",
                bool(vals) and all(a > b for a, b in vals.values()),
                "; ".join(f"{labels[v]} mixed {a:.3f} vs {other} {b:.3f}" for v, (a, b) in vals.items())
                + " (mean over seed pairs; needs mixed ahead on both)",
                numbers=numbers,
                minimum={"seeds": (n_seeds, 2)},
            )
        )
    return out


def findings_lines(summary: xr.Dataset) -> list[str]:
    """One line per finding: ``REPRODUCED: ...``, ``NOT reproduced: ...`` or ``NOT ASSESSED: ...``
    (:data:`scimech.studies.verdicts.FINDING_WORDS`)."""
    return [f.line() for f in findings(summary)]


def __getattr__(name: str):
    if name in MOVED_TO_RECOVERY:  # `from ocean.findings import recovery_text`: ocean.recovery's, with a warning
        warn_moved(f"{__name__}.{name}", f"ocean.recovery.{name}")
        return getattr(importlib.import_module(".recovery", __package__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
