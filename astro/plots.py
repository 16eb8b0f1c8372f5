"""Figures of the astro study (matplotlib; each function returns a Figure)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg", force=False)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

__all__ = ["z_scatter", "metrics_by_population", "layer_curves", "head_heatmap", "radial_maps", "dz_vs_av"]


def z_scatter(pred: xr.Dataset, modes=("photometry", "multimodal", "template")):
    """z_true vs z_pred per mode."""
    fig, axes = plt.subplots(1, len(modes), figsize=(3.6 * len(modes), 3.4), sharey=True)
    zt = pred["z_true"].values
    for ax, m in zip(np.atleast_1d(axes), modes):
        ax.scatter(zt, pred[m].values, s=3, alpha=0.4)
        ax.plot([0, 1], [0, 1], "k--", lw=0.8)
        ax.set(xlabel="z true", title=m, xlim=(0, 1), ylim=(0, 1))
    np.atleast_1d(axes)[0].set_ylabel("z predicted")
    fig.tight_layout()
    return fig


def metrics_by_population(adv: xr.Dataset, metric: str = "sigma_nmad", modes=("photometry", "multimodal", "template")):
    """Bars of a metric per population and mode with bootstrap intervals."""
    pops = list(adv.population.values)
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    w = 0.8 / len(modes)
    for i, m in enumerate(modes):
        v = adv["value"].sel(mode=m, metric=metric).values
        lo = adv["ci_low"].sel(mode=m, metric=metric).values
        hi = adv["ci_high"].sel(mode=m, metric=metric).values
        x = np.arange(len(pops)) + (i - (len(modes) - 1) / 2) * w
        ax.bar(x, v, w, label=m, yerr=[np.clip(v - lo, 0, None), np.clip(hi - v, 0, None)], capsize=2)
    ax.set_xticks(np.arange(len(pops)), pops)
    ax.set_ylabel(metric)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def layer_curves(layers: xr.Dataset):
    """Probe R2 of z and A_V per encoder block, both modes."""
    fig, axes = plt.subplots(1, 2, figsize=(7.5, 3.2))
    for ax, t in zip(axes, layers.target.values):
        for m in layers.mode.values:
            ax.plot(layers.layer, layers["score"].sel(mode=m, target=t), "o-", label=m)
        ax.set(xlabel="encoder block", ylabel="probe R2", title=str(t))
        ax.set_xticks(layers.layer.values)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def head_heatmap(hp: xr.Dataset, iv: xr.Dataset | None = None):
    """Head x (probe targets [+ intervention effects]) heatmap."""
    cols = {f"R2 {t}": hp["score"].sel(target=t).values for t in hp.target.values}
    if iv is not None:
        for m in iv.intervention.values:
            cols[f"adv. left {m} (dusty)"] = iv["advantage_left"].sel(intervention=m, population="dusty").values
    mat = np.column_stack(list(cols.values()))
    fig, ax = plt.subplots(figsize=(1.0 + 0.7 * mat.shape[1], 0.5 + 0.5 * mat.shape[0]))
    im = ax.imshow(mat, cmap="viridis", aspect="auto")
    ax.set_xticks(range(mat.shape[1]), list(cols), rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(mat.shape[0]), [f"head {h}" for h in hp["head"].values])
    for (i, j), v in np.ndenumerate(mat):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6, color="w")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    return fig


def radial_maps(rad: xr.Dataset):
    """Each head's mean image-token output (PC1) on the token grid."""
    n = rad.sizes["head"]
    fig, axes = plt.subplots(1, n, figsize=(2.4 * n, 2.5))
    for h, ax in zip(range(n), np.atleast_1d(axes)):
        ax.imshow(rad["map"].sel(head=h), cmap="coolwarm")
        ax.set_title(f"head {h}: |rho|={float(rad['radial_score'][h]):.2f}", fontsize=8)
        ax.axis("off")
    fig.tight_layout()
    return fig


def dz_vs_av(pred: xr.Dataset, iv: xr.Dataset | None = None, head: int | None = None):
    """dz against intrinsic A_V: photometry-only, multimodal (and multimodal with one head ablated)."""
    zt, av = pred["z_true"].values, pred["a_v"].values
    series = {"photometry": pred["photometry"].values, "multimodal": pred["multimodal"].values}
    if iv is not None and head is not None:
        series[f"multimodal, head {head} ablated"] = iv["z_ablated"].sel(intervention="resample", head=head).values
    fig, ax = plt.subplots(figsize=(5, 3.4))
    bins = np.linspace(0, max(av.max(), 0.1), 8)
    for name, zp in series.items():
        d = (zp - zt) / (1 + zt)
        idx = np.digitize(av, bins)
        xs = [av[idx == k].mean() for k in np.unique(idx)]
        ys = [np.median(d[idx == k]) for k in np.unique(idx)]
        ax.plot(xs, ys, "o-", label=name)
    ax.axhline(0, color="k", lw=0.6)
    ax.set(xlabel="intrinsic A_V [mag]", ylabel="median dz")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
