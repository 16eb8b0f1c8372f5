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
    """Two panels: the principal angles between the dictionary's span and the shifted active
    subspace; the variance explained in distribution, shifted, and after realignment."""
    plt = _pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    a.bar(np.arange(shift.sizes["component"]), shift.angle.values, color="tab:purple")
    a.set_xlabel("principal angle (largest first)")
    a.set_ylabel("degrees")
    a.set_ylim(0, 90)
    a.set_title(f"gap {float(shift.gap):.2f} (sampling control {float(shift.control_gap):.2f})", fontsize=9)
    names = ["in distribution", "shifted"] + (["realigned"] if "fve_realigned" in shift else [])
    vals = [float(shift.fve_in), float(shift.fve_shifted)] + ([float(shift.fve_realigned)]
                                                              if "fve_realigned" in shift else [])
    b.bar(names, vals, color=["tab:blue", "tab:red", "tab:green"][:len(vals)])
    b.set_ylim(min(0.0, min(vals)), 1)
    b.set_ylabel("fraction of variance explained")
    b.set_title("the dictionary's fit", fontsize=9)
    return _save(fig, path)
