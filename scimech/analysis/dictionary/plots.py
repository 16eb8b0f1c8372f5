"""Figures of a dictionary: its features against domain variables, its faithfulness under a shift,
and the quadratic bound of its realignment."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

__all__ = ["plot_alignment", "plot_shift", "plot_bound"]


def _figure(**kw):
    """A matplotlib Figure outside pyplot (imported when a figure is drawn, not with the package):
    drawing one neither switches the session's backend (a notebook keeps showing its figures)
    nor leaves a figure open."""
    from matplotlib.figure import Figure

    return Figure(**kw)


def _save(fig, path: str | Path) -> Path:
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def plot_alignment(alignment: xr.Dataset, path: str | Path, *, top: int = 12) -> Path:
    """Heat map of the features' correlation with each variable (the ``top`` features with the
    largest ``|r|``), each cell's interval and the shuffled control printed in it."""
    strength = abs(alignment.r).max("variable").fillna(0)
    keep = alignment.feature.values[np.argsort(-strength.values, kind="stable")[:top]]
    al = alignment.sel(feature=keep)
    fig = _figure(figsize=(1.6 + 1.4 * al.sizes["variable"], 0.9 + 0.42 * len(keep)))
    ax = fig.subplots()
    im = ax.imshow(al.r.values, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    for i in range(len(keep)):
        for j in range(al.sizes["variable"]):
            cell = al.isel(feature=i, variable=j)
            ax.text(
                j,
                i,
                f"{float(cell.r):+.2f}\n[{float(cell.r_ci_low):+.2f}, {float(cell.r_ci_high):+.2f}]",
                ha="center",
                va="center",
                fontsize=7,
            )
    ax.set_xticks(range(al.sizes["variable"]), [str(v) for v in al.variable.values])
    ax.set_yticks(range(len(keep)), [f"feature {int(f)}" for f in keep])
    control = float(abs(al.control_r).max())
    ax.set_title(
        f"Features against variables (Pearson r, 95% interval)\nshuffled control: |r| <= {control:.2f}", fontsize=9
    )
    fig.colorbar(im, ax=ax, label="r")
    return _save(fig, path)


def plot_shift(shift: xr.Dataset, path: str | Path) -> Path:
    """The principal angles between the dictionary's span and the shifted active subspace; the
    variance explained in distribution, shifted, and after realignment, with the splice
    fidelity against zero ablation and its 95% interval beside it where the result holds it
    (:func:`~scimech.analysis.dictionary.add_fidelity`; the ratio of medians where it is there); and, where it holds ``effect_rms`` over
    ``step`` (:func:`~scimech.analysis.dictionary.rollout_effect`), a third panel: the steer's effect on
    the forecast per step, with its interval."""
    effect = "effect_rms" in shift
    fig = _figure(figsize=(13 if effect else 9, 3.4))
    axes = fig.subplots(1, 3 if effect else 2)
    a, b = axes[0], axes[1]
    a.bar(np.arange(shift.sizes["component"]), shift.angle.values, color="tab:purple")
    a.set_xlabel("principal angle (largest first)")
    a.set_ylabel("degrees")
    a.set_ylim(0, 90)
    a.set_title(f"gap {float(shift.gap):.2f} (sampling control {float(shift.control_gap):.2f})", fontsize=9)
    labels = [lab for lab in ("in", "shifted", "realigned") if lab != "realigned" or "fve_realigned" in shift]
    names = ["in distribution", "shifted", "realigned"][: len(labels)]
    vals = [float(shift[f"fve_{lab}"]) for lab in labels]
    x = np.arange(len(labels))
    # the ratio of medians where the result holds it: a few runaway samples do not set the bar
    key = (
        "fidelity_vs_zero_median"
        if all(f"fidelity_vs_zero_median_{lab}" in shift for lab in labels)
        else "fidelity_vs_zero"
    )
    fidelity = all(f"{key}_{lab}" in shift for lab in labels)
    width = 0.4 if fidelity else 0.8
    b.bar(
        x - width / 2 if fidelity else x,
        vals,
        width,
        color=["tab:blue", "tab:red", "tab:green"][: len(vals)],
        label="variance explained",
    )
    low = min(0.0, min(vals))
    if fidelity:
        fid = np.array([float(shift[f"{key}_{lab}"]) for lab in labels])
        lo = np.array([float(shift[f"{key}_ci_low_{lab}"]) for lab in labels])
        hi = np.array([float(shift[f"{key}_ci_high_{lab}"]) for lab in labels])
        err = np.nan_to_num(np.stack([fid - lo, hi - fid]).clip(min=0))
        b.bar(
            x + width / 2,
            fid,
            width,
            yerr=err,
            capsize=3,
            color="0.6",
            label="splice fidelity vs zero ablation" + (" (ratio of medians)" if key.endswith("median") else ""),
        )
        b.legend(fontsize=7, loc="lower left")
        low = min(low, float(fid.min()))
    b.set_xticks(x, names)
    b.set_ylim(low, 1.05 if fidelity else 1)
    b.set_ylabel("fraction of variance explained" if not fidelity else "fraction")
    b.set_title("the dictionary's fit" + (" and fidelity (95% interval)" if fidelity else ""), fontsize=9)
    if effect:
        c, steps = axes[2], shift.step.values
        c.plot(steps, shift.effect_rms.values, color="tab:red")
        if "effect_rms_ci_low" in shift:
            c.fill_between(
                steps, shift.effect_rms_ci_low.values, shift.effect_rms_ci_high.values, color="tab:red", alpha=0.3
            )
        c.set_xlabel("forecast step")
        c.set_ylabel("rms change of the forecast")
        c.set_title(str(shift.effect_rms.attrs.get("title", "the steer's effect on the forecast")), fontsize=9)
    return _save(fig, path)


def plot_bound(bound: xr.Dataset, path: str | Path) -> Path:
    """Log-log: the excess loss of the realigned and the original dictionary against the
    second-moment shift (:func:`~scimech.analysis.dictionary.realignment_bound`), with the line
    ``C_realigned * dsigma**2`` and each fitted slope in the legend; non-positive excesses
    (at the sampling floor) are drawn on the axis' floor as open markers."""
    fig = _figure(figsize=(5.2, 4))
    ax = fig.subplots()
    ds = bound.dsigma.values
    positive = [bound[f"excess_{n}"].values for n in ("realigned", "original")]
    floor = min([float(v[v > 0].min()) for v in positive if (v > 0).any()] or [1e-6]) / 3
    for name, color in (("realigned", "tab:green"), ("original", "tab:red")):
        ex = bound[f"excess_{name}"].values
        ok = ex > 0
        ax.loglog(
            ds[ok],
            ex[ok],
            "o-",
            color=color,
            label=f"{name}: slope {bound.attrs[f'slope_{name}']:.2f}, C {bound.attrs[f'C_{name}']:.2f}",
        )
        if (~ok).any():
            ax.loglog(ds[~ok], np.full((~ok).sum(), floor), "o", mfc="none", color=color)
    c = bound.attrs["C_realigned"]
    if c > 0:
        ax.loglog(ds, c * ds**2, "--", color="0.4", label="C_realigned ||dSigma||^2")
    from matplotlib.ticker import NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("second-moment shift ||dSigma||_F / ||Sigma||_F")
    ax.set_ylabel("excess fraction of variance unexplained")
    ax.legend(fontsize=7)
    ax.set_title(f"realignment's excess loss (added {bound.attrs['added']:g})", fontsize=9)
    return _save(fig, path)
