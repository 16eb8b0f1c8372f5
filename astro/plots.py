"""Figures of the astro study (matplotlib; each function returns a Figure)."""

from __future__ import annotations

import sys

import matplotlib

if "ipykernel" not in sys.modules:  # figures go to files; a notebook keeps its inline backend
    matplotlib.use("Agg", force=False)
import matplotlib.colors as mcolors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as mticker  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

from . import constants  # noqa: E402

__all__ = ["z_scatter", "metrics_by_population", "layer_curves", "head_heatmap", "radial_maps", "dz_vs_av"]


#: the names a photo-z astronomer reads, per prediction of ``predictions.nc``
MODE_NAMES = {
    "photometry": "photometry-only",
    "multimodal": "multimodal",
    "template": "template fit",
    "colour_knn": "colour kNN",
}
#: the probe targets in the names of the field
TARGET_NAMES = {"a_v": "A_V", "z": "z", "z_template": "z (template fit)"}


def _sigma_nmad(dz: np.ndarray) -> float:
    """``1.4826 median|dz - median dz|`` (:func:`astro.photoz.sigma_nmad`) of the finite ``dz``."""
    dz = dz[np.isfinite(dz)]
    return float(constants.NMAD_SCALE * np.median(np.abs(dz - np.median(dz)))) if dz.size else float("nan")


def z_scatter(pred: xr.Dataset, modes=("photometry", "multimodal", "template", "colour_knn")):
    """Photometric redshift against the true (spectroscopic) redshift, one panel per prediction (the dissected
    model's two modes and the yardsticks that ``pred`` holds), each titled with its sigma_NMAD of
    ``dz = (z_phot - z_spec) / (1 + z_spec)``; dashes: z_phot = z_spec; dotted: the |dz| = 0.15 outlier bounds."""
    modes = [m for m in modes if m in pred]
    fig, axes = plt.subplots(1, len(modes), figsize=(3.2 * len(modes), 3.4), sharey=True, squeeze=False)
    zt = pred["z_true"].values
    top = float(np.nanmax([np.nanmax(zt), *(np.nanmax(pred[m].values) for m in modes)]))
    top = max(1.0, np.ceil(top * 10) / 10)
    line = np.array([0.0, top])
    for ax, m in zip(axes[0], modes):
        zp = pred[m].values
        ax.scatter(zt, zp, s=3, alpha=0.4)
        ax.plot(line, line, "k--", lw=0.8)
        for sign in (1, -1):
            ax.plot(line, line + sign * constants.PHOTOZ_OUTLIER_DZ * (1 + line), "k:", lw=0.6)
        name = MODE_NAMES.get(m, m)
        ax.set(xlabel="z_spec (true)", xlim=(0, top), ylim=(0, top))
        ax.set_title(f"{name}\nsigma_NMAD {_sigma_nmad((zp - zt) / (1 + zt)):.3f}", fontsize=10)
    axes[0, 0].set_ylabel("z_phot (predicted)")
    fig.tight_layout()
    return fig


def metrics_by_population(
    adv: xr.Dataset, metric: str = "sigma_nmad", modes=("photometry", "multimodal", "template", "colour_knn")
):
    """Bars of a photo-z metric per population and prediction (the dissected model's two modes and the
    yardsticks ``adv`` holds), error bars the 95% bootstrap intervals of ``adv``."""
    modes = [m for m in modes if m in adv["mode"].values]
    pops = list(adv.population.values)
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    w = 0.8 / len(modes)
    for i, m in enumerate(modes):
        v = adv["value"].sel(mode=m, metric=metric).values
        lo = adv["ci_low"].sel(mode=m, metric=metric).values
        hi = adv["ci_high"].sel(mode=m, metric=metric).values
        x = np.arange(len(pops)) + (i - (len(modes) - 1) / 2) * w
        yerr = [np.clip(v - lo, 0, None), np.clip(hi - v, 0, None)]
        ax.bar(x, v, w, label=MODE_NAMES.get(m, m), yerr=yerr, capsize=2)
    ax.set_xticks(np.arange(len(pops)), pops)
    ax.set_xlabel("test galaxies")
    names = {
        "sigma_nmad": "sigma_NMAD of dz",
        "outlier_fraction": f"outlier fraction (|dz| > {constants.PHOTOZ_OUTLIER_DZ})",
    }
    ax.set_ylabel(names.get(metric, metric) + "\n(bars: 95% bootstrap interval)")
    ax.legend(fontsize=8, ncol=len(modes), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def layer_curves(layers: xr.Dataset):
    """Cross-validated probe R2 of z and A_V per encoder block, both modes, with the 95% bootstrap
    intervals where ``layers`` has them (``score_low`` / ``score_high``)."""
    fig, axes = plt.subplots(1, len(layers.target), figsize=(3.8 * len(layers.target), 3.2), squeeze=False)
    for ax, t in zip(axes[0], layers.target.values):
        for m in layers.mode.values:
            line = ax.plot(layers.layer, layers["score"].sel(mode=m, target=t), "o-", label=MODE_NAMES.get(m, m))
            if "score_low" in layers and "score_high" in layers:
                lo, hi = layers["score_low"].sel(mode=m, target=t), layers["score_high"].sel(mode=m, target=t)
                ax.fill_between(layers.layer, lo, hi, color=line[0].get_color(), alpha=0.2, lw=0)
        ax.set(xlabel="encoder block", ylabel="probe R2 (cross-validated)", title=TARGET_NAMES.get(str(t), str(t)))
        ax.set_xticks(layers.layer.values)
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def head_heatmap(hp: xr.Dataset, iv: xr.Dataset | None = None, population: str = "dusty", effect: str = "share"):
    """Heads of each encoder block in two panels, each on its own colour scale and colour bar; one row
    of panels per block when the head study covered several (a ``block`` dimension), the scales shared
    by every row so blocks compare.

    Left: probe R2 per head and target (``hp["score"]``; sequential map from min(0, lowest
    R2) to the highest). Right (with ``iv``): the intervention effect per head and
    intervention, the share of the ``population``'s multimodal advantage lost,
    ``1 - iv["advantage_left"]`` (0: no effect, 1: the advantage removed, > 1: worse than
    photometry-only, < 0: better than untouched), on a diverging map centred on 0 and
    symmetric about it, linear within +-1 and logarithmic beyond (an ablation that leaves
    -5 of the advantage does not wash out the rest). Missing values (NaN, e.g. no advantage
    to lose) are grey.

    ``effect="lost"``: the right panel shows instead the advantage lost in mean|dz|
    (``iv["advantage_lost"]``: the advantage minus the advantage with the head intervened in both
    modes) on ``population``, on a linear scale symmetric about 0, a ``*`` after the value where its
    95% bootstrap interval (``advantage_lost_low`` / ``_high``) excludes 0. A share of the advantage
    divides by the advantage itself; where that is compatible with 0 the share is noise, the
    difference is not.
    """
    if effect not in ("share", "lost"):
        raise ValueError(f"head_heatmap: effect must be 'share' or 'lost', got {effect!r}.")
    several = "block" in hp.dims
    blocks = [int(b) for b in hp["block"].values] if several else [hp.attrs.get("block")]
    heads = hp["head"].values

    def rows(ds, var, dims):
        arr = ds[var].transpose(*(("block",) if several else ()), *dims).values
        return arr if several else arr[None]

    r2 = rows(hp, "score", ("head", "target"))
    panels = [
        dict(
            data=r2,
            labels=[str(t) for t in hp.target.values],
            xlabel="probe target",
            title="Probe R2 (multimodal run)",
            cmap="viridis",
            lims=_lims(r2),
            norm=None,
            cbar="probe R2 (cross-validated)\n1: perfect, <= 0: no signal",
        )
    ]
    if iv is not None and effect == "lost":
        sel = iv.sel(population=population)
        lost = rows(sel, "advantage_lost", ("head", "intervention"))
        low = rows(sel, "advantage_lost_low", ("head", "intervention"))
        high = rows(sel, "advantage_lost_high", ("head", "intervention"))
        top = float(np.nanmax(np.abs(lost))) if np.isfinite(lost).any() else 0.0
        top = top if top > 0 else 1.0
        panels.append(
            dict(
                data=lost,
                marks=(low > 0) | (high < 0),
                labels=[str(m) for m in iv.intervention.values],
                xlabel="intervention",
                title=f"Advantage lost ({population} galaxies)",
                cmap="RdBu_r",
                lims=(-top, top),
                norm=None,
                fmt="{:.4f}",
                cbar="advantage lost (mean|dz|)\n0: no effect; *: 95% interval excludes 0",
            )
        )
    elif iv is not None:
        effect = 1.0 - rows(iv.sel(population=population), "advantage_left", ("head", "intervention"))
        half = np.nanmax(np.abs(effect)) if np.isfinite(effect).any() else 0.0
        half = half if half > 0 else 1.0
        panels.append(
            dict(
                data=effect,
                labels=[str(m) for m in iv.intervention.values],
                xlabel="intervention",
                title=f"Intervention effect ({population} galaxies)",
                cmap="RdBu_r",
                lims=(-half, half),
                norm=mcolors.SymLogNorm(linthresh=1.0, linscale=1.0, vmin=-half, vmax=half),
                cbar=f"share of the {population} advantage lost\n0: no effect, 1: all of it",
            )
        )
    widths = [max(p["data"].shape[2], 2) for p in panels]
    fig, axes = plt.subplots(
        len(blocks),
        len(panels),
        figsize=(2.2 + 0.75 * sum(widths) + 1.6 * len(panels), len(blocks) * max(3.2, 1.4 + 0.45 * len(heads))),
        sharey=True,
        width_ratios=widths,
        layout="constrained",
        squeeze=False,
    )
    for row, block in enumerate(blocks):
        for ax, p in zip(axes[row], panels):
            _head_panel(fig, ax, p, p["data"][row], last=row == len(blocks) - 1, first=row == 0, row=row)
        axes[row, 0].set_yticks(range(len(heads)), [str(h) for h in heads])
        axes[row, 0].set_ylabel("head" + (f" (encoder block {block})" if block is not None else ""))
    return fig


def _head_panel(fig, ax, p: dict, data: np.ndarray, *, last: bool = True, first: bool = True, row: int = 0) -> None:
    """One panel of :func:`head_heatmap`: the values written in their cells (``p["fmt"]``, a ``*`` where
    ``p["marks"]`` of the block ``row`` is set), its colour bar."""
    cmap = plt.get_cmap(p["cmap"]).with_extremes(bad="0.85")
    lims = dict(vmin=p["lims"][0], vmax=p["lims"][1]) if p["norm"] is None else dict(norm=p["norm"])
    im = ax.imshow(data, cmap=cmap, aspect="auto", **lims)
    ax.set_xticks(range(len(p["labels"])), p["labels"], rotation=45, ha="right", fontsize=8)
    ax.set(xlabel=p["xlabel"], title=p["title"])
    fmt, marks = p.get("fmt", "{:.2f}"), p.get("marks")
    for (i, j), v in np.ndenumerate(data):
        rgb = np.asarray(im.cmap(im.norm(v))[:3]) if np.isfinite(v) else np.ones(3)
        dark = float(rgb @ [0.299, 0.587, 0.114]) < 0.5
        mark = "*" if marks is not None and bool(marks[row][i, j]) else ""
        ax.text(
            j,
            i,
            _no_negative_zero(fmt.format(v)) + mark if np.isfinite(v) else "n/a",
            ha="center",
            va="center",
            fontsize=7,
            color="w" if dark else "k",
        )
    cbar = fig.colorbar(im, ax=ax, label=p["cbar"], shrink=0.9)
    if p["norm"] is not None:  # plain numbers, not powers of ten, on the symmetric-log bar
        half = p["lims"][1]
        inner = min(half, 1.0)
        ticks = [
            t for t in mticker.MaxNLocator(4, symmetric=True).tick_values(-inner, inner) if abs(t) <= inner * (1 + 1e-9)
        ]
        cbar.set_ticks(sorted(set(ticks) | ({-half, half} if half > 1.25 else set())))
        cbar.ax.yaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:.2g}"))
        cbar.ax.yaxis.set_minor_locator(mticker.NullLocator())


def _no_negative_zero(text: str) -> str:
    """``"-0.00"`` (a value that rounds to 0 from below) written ``"0.00"``."""
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def _lims(values: np.ndarray) -> tuple[float, float]:
    """Colour limits of a sequential panel from its own data: min(0, lowest) to the highest."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return 0.0, 1.0
    lo, hi = min(float(finite.min()), 0.0), float(finite.max())
    return lo, hi if hi > lo else lo + 1.0


def radial_maps(rad: xr.Dataset):
    """Each head's mean image-token output (projection on PC1) on the image-token grid, one panel per head of
    the block (titled with the block and head; one row per block when the head study covered several), on
    one colour scale symmetric about 0 shared by every head, with its colour bar; axes: the image token's
    column and row."""
    several = "block" in rad.dims
    blocks = [int(b) for b in rad["block"].values] if several else [rad.attrs.get("block")]
    n = rad.sizes["head"]
    maps = rad["map"].transpose(*(("block",) if several else ()), "head", "y", "x").values
    score = rad["radial_score"].transpose(*(("block",) if several else ()), "head").values
    maps, score = (maps, score) if several else (maps[None], score[None])
    lim = float(np.nanmax(np.abs(maps))) if np.isfinite(maps).any() else 1.0
    lim = lim if lim > 0 else 1.0
    fig, axes = plt.subplots(
        len(blocks), n, figsize=(2.6 * n + 1.2, 2.9 * len(blocks)), layout="constrained", squeeze=False
    )
    for row, block in enumerate(blocks):
        for h, ax in enumerate(axes[row]):
            im = ax.imshow(maps[row, h], cmap="coolwarm", vmin=-lim, vmax=lim, origin="upper")
            where = f"block {block}, head {h}" if block is not None else f"head {h}"
            ax.set_title(f"{where}\n|rho| with radius = {float(score[row, h]):.2f}", fontsize=8)
            ax.set_xlabel("image token column", fontsize=7)
            ax.set_ylabel("image token row" if h == 0 else "", fontsize=7)
            ax.tick_params(labelsize=6)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.85, label="mean output on PC1\n(same scale for every head)")
    return fig


def dz_vs_av(pred: xr.Dataset, iv: xr.Dataset | None = None, head: int | None = None, n_bins: int = 7):
    """Median dz = (z_phot - z_spec) / (1 + z_spec) in ``n_bins`` equal-width bins of intrinsic A_V (from 0 to
    the largest; the largest galaxy falls in the last bin, not a bin of its own), drawn at each bin's mean A_V:
    photometry-only, multimodal (and multimodal with one head resample-ablated); the galaxies per bin on the
    top axis."""
    zt, av = pred["z_true"].values, pred["a_v"].values
    series = {"photometry-only": pred["photometry"].values, "multimodal": pred["multimodal"].values}
    if iv is not None and head is not None:
        series[f"multimodal, head {head} ablated"] = iv["z_ablated"].sel(intervention="resample", head=head).values
    fig, ax = plt.subplots(figsize=(5.4, 3.6))
    edges = np.linspace(0, max(float(av.max()), 0.1), n_bins + 1)
    idx = np.digitize(av, edges[1:-1])  # 0 .. n_bins - 1
    used = np.unique(idx)
    xs = [float(av[idx == k].mean()) for k in used]
    for name, zp in series.items():
        d = (zp - zt) / (1 + zt)
        ax.plot(xs, [float(np.median(d[idx == k])) for k in used], "o-", label=name)
    ax.axhline(0, color="k", lw=0.6)
    ax.set(xlabel="intrinsic A_V (mag)", ylabel="median dz")
    top = ax.secondary_xaxis("top")
    top.set_xticks(xs, [str(int((idx == k).sum())) for k in used], fontsize=7)
    top.set_xlabel("galaxies per bin", fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
