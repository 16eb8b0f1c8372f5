"""Figures of a dictionary: its features against domain variables, and its faithfulness under a shift."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

__all__ = ["plot_alignment", "plot_shift"]


def _pyplot():
    """matplotlib's pyplot on the file backend (imported when a figure is drawn, not with the package)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str | Path) -> Path:
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
    return path


def plot_alignment(alignment: xr.Dataset, path: str | Path, *, top: int = 12) -> Path:
    """Heat map of the features' correlation with each variable (the ``top`` features with the
    largest |r|), each cell's interval and the shuffled control printed in it."""
    plt = _pyplot()
    strength = abs(alignment.r).max("variable").fillna(0)
    keep = alignment.feature.values[np.argsort(-strength.values, kind="stable")[:top]]
    al = alignment.sel(feature=keep)
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * al.sizes["variable"], 0.9 + 0.42 * len(keep)))
    im = ax.imshow(al.r.values, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    for i in range(len(keep)):
        for j in range(al.sizes["variable"]):
            cell = al.isel(feature=i, variable=j)
            ax.text(j, i, f"{float(cell.r):+.2f}\n[{float(cell.r_ci_low):+.2f}, {float(cell.r_ci_high):+.2f}]",
                    ha="center", va="center", fontsize=7)
    ax.set_xticks(range(al.sizes["variable"]), [str(v) for v in al.variable.values])
    ax.set_yticks(range(len(keep)), [f"feature {int(f)}" for f in keep])
    control = float(abs(al.control_r).max())
    ax.set_title(f"Features against variables (Pearson r, 95% interval)\nshuffled control: |r| <= {control:.2f}",
                 fontsize=9)
    fig.colorbar(im, ax=ax, label="r")
    return _save(fig, path)


def plot_shift(shift: xr.Dataset, path: str | Path) -> Path:
    """The principal angles between the dictionary's span and the shifted active subspace; the
    variance explained in distribution, shifted, and after realignment, with the splice
    fidelity against zero ablation and its 95% interval beside it where the result holds it
    (:func:`~scimech.dictionary.add_fidelity`); and, where it holds ``effect_rms`` over
    ``step`` (:func:`~scimech.dictionary.rollout_effect`), a third panel: the steer's effect on
    the forecast per step, with its interval."""
    plt = _pyplot()
    effect = "effect_rms" in shift
    fig, axes = plt.subplots(1, 3 if effect else 2, figsize=(13 if effect else 9, 3.4))
    a, b = axes[0], axes[1]
    a.bar(np.arange(shift.sizes["component"]), shift.angle.values, color="tab:purple")
    a.set_xlabel("principal angle (largest first)")
    a.set_ylabel("degrees")
    a.set_ylim(0, 90)
    a.set_title(f"gap {float(shift.gap):.2f} (sampling control {float(shift.control_gap):.2f})", fontsize=9)
    labels = [lab for lab in ("in", "shifted", "realigned") if lab != "realigned" or "fve_realigned" in shift]
    names = ["in distribution", "shifted", "realigned"][:len(labels)]
    vals = [float(shift[f"fve_{lab}"]) for lab in labels]
    x = np.arange(len(labels))
    fidelity = all(f"fidelity_vs_zero_{lab}" in shift for lab in labels)
    width = 0.4 if fidelity else 0.8
    b.bar(x - width / 2 if fidelity else x, vals, width, color=["tab:blue", "tab:red", "tab:green"][:len(vals)],
          label="variance explained")
    low = min(0.0, min(vals))
    if fidelity:
        fid = np.array([float(shift[f"fidelity_vs_zero_{lab}"]) for lab in labels])
        lo = np.array([float(shift[f"fidelity_vs_zero_ci_low_{lab}"]) for lab in labels])
        hi = np.array([float(shift[f"fidelity_vs_zero_ci_high_{lab}"]) for lab in labels])
        err = np.nan_to_num(np.stack([fid - lo, hi - fid]).clip(min=0))
        b.bar(x + width / 2, fid, width, yerr=err, capsize=3, color="0.6", label="splice fidelity vs zero ablation")
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
            c.fill_between(steps, shift.effect_rms_ci_low.values, shift.effect_rms_ci_high.values, color="tab:red",
                           alpha=0.3)
        c.set_xlabel("forecast step")
        c.set_ylabel("rms change of the forecast")
        c.set_title(str(shift.effect_rms.attrs.get("title", "the steer's effect on the forecast")), fontsize=9)
    return _save(fig, path)
