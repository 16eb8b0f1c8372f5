"""Figures of the OceanCBM study (matplotlib + cmocean); every function returns a Figure.

Maps show land in grey from the dataset's ``mask``.
"""

from __future__ import annotations

import sys

import cmocean
import matplotlib

if "ipykernel" not in sys.modules:  # figures go to files; a notebook keeps its inline backend
    matplotlib.use("Agg", force=False)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

from .evidence import SEASONS  # noqa: E402

__all__ = [
    "map_panel",
    "maps_figure",
    "cka_heatmaps",
    "head_weights_figure",
    "ensemble_spread_figure",
    "seasonal_skill_maps",
    "attribution_figure",
    "skill_figure",
]


def map_panel(
    ax,
    field: xr.DataArray,
    mask: xr.DataArray,
    *,
    cmap=cmocean.cm.thermal,
    title: str = "",
    symmetric: bool = False,
    units: str | None = None,
    limit: float | None = None,
    vrange: tuple[float, float] | None = None,
    colorbar: bool = True,
):
    """One lat-lon map with land in grey and (``colorbar``) a colour bar; ``limit``: the colour scale is
    ``[-limit, limit]`` (a scale shared with other panels), ``vrange``: ``(vmin, vmax)`` (a shared scale
    from 0), else symmetric about 0 (``symmetric``) or the field's own range."""
    vals = np.where(mask.values.astype(bool), field.values, np.nan)
    lon, lat = field["lon"].values, field["lat"].values
    vmax = limit if limit is not None else (np.nanmax(np.abs(vals)) if symmetric else None)
    lo = -vmax if (limit is not None or symmetric) and vmax is not None else None
    if vrange is not None:
        lo, vmax = vrange
    im = ax.pcolormesh(lon, lat, vals, cmap=cmap, shading="auto", vmin=lo, vmax=vmax)
    land = np.where(mask.values.astype(bool), np.nan, 1.0)
    ax.pcolormesh(lon, lat, land, cmap=matplotlib.colors.ListedColormap(["0.7"]), shading="auto")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("lon (°E)", fontsize=8)
    ax.set_ylabel("lat (°N)", fontsize=8)
    ax.tick_params(labelsize=7)
    if colorbar:
        cb = plt.colorbar(im, ax=ax, shrink=0.8)
        cb.set_label(units if units is not None else field.attrs.get("units", ""), fontsize=8)
    return im


def _shared_limit(*fields: xr.DataArray, mask: xr.DataArray) -> float:
    """The largest |value| over the fields at ocean points: one symmetric colour scale for all of them."""
    ok = mask.values.astype(bool)
    vals = [np.abs(np.asarray(f.values, float)[..., ok]) for f in fields]
    top = max((float(np.nanmax(v)) for v in vals if np.isfinite(v).any()), default=1.0)
    return top if top > 0 else 1.0


def free_in_hidden_units(unit: xr.Dataset, concept: str = "free_0") -> xr.DataArray:
    """The free concept on the hidden flux's scale: ``a * free + b`` fitted by least squares to
    ``q_hidden`` over the unit's test samples and ocean points (a free concept's sign and scale are
    arbitrary; this puts it in W m-2 beside the flux it should carry)."""
    ok = unit["mask"].values.astype(bool)
    x = unit["c_pred"].sel(concept=concept).values[:, ok].ravel()
    y = unit["c_true"].sel(true_concept="q_hidden").values[:, ok].ravel()
    fin = np.isfinite(x) & np.isfinite(y)
    a, b = np.polyfit(x[fin], y[fin], 1) if fin.sum() > 1 and np.ptp(x[fin]) > 0 else (1.0, 0.0)
    return (unit["c_pred"].sel(concept=concept) * a + b).assign_attrs(units="W m-2")


def maps_figure(unit: xr.Dataset, sample: int = 0) -> plt.Figure:
    """One test sample of one unit: true vs forecast MLHC tendency side by side on one colour scale and
    the RMSE map (first row), then one row per concept: the true term and the predicted concept side by
    side on one shared colour scale (W m-2; the free concept fitted to q_hidden's scale,
    :func:`free_in_hidden_units`), each panel with its colour bar."""
    mask = unit["mask"]
    concepts = [str(c) for c in unit["concept"].values]
    nrow = 1 + len(concepts)
    fig, axes = plt.subplots(nrow, 3, figsize=(12, 3 * nrow), constrained_layout=True, squeeze=False)
    s = unit.isel(sample=sample)
    when = s["time"].dt.strftime("%Y-%m").values  # any calendar (cftime dates of a noleap CMIP6 file too)
    lim = _shared_limit(s["y_true"], s["y_pred"], mask=mask)
    bal = cmocean.cm.balance
    map_panel(axes[0, 0], s["y_true"], mask, cmap=bal, title=f"true dMLHC/dt {when}", units="W m-2", limit=lim)
    map_panel(axes[0, 1], s["y_pred"], mask, cmap=bal, title=f"forecast dMLHC/dt {when}", units="W m-2", limit=lim)
    rmse = np.sqrt(((unit["y_pred"] - unit["y_true"]) ** 2).mean("sample"))
    map_panel(axes[0, 2], rmse, mask, cmap=cmocean.cm.amp, title="RMSE over test months", units="W m-2")
    for row, c in enumerate(concepts, start=1):
        true_name = c if c in unit["true_concept"].values else "q_hidden"
        true = s["c_true"].sel(true_concept=true_name)
        free = c not in unit["true_concept"].values
        pred = free_in_hidden_units(unit, c).isel(sample=sample) if free else s["c_pred"].sel(concept=c)
        lim = _shared_limit(true, pred, mask=mask)
        map_panel(axes[row, 0], true, mask, cmap=bal, title=f"true {true_name}", units="W m-2", limit=lim)
        label = f"predicted {c}" + (" (fitted to q_hidden's scale)" if free else "")
        map_panel(axes[row, 1], pred, mask, cmap=bal, title=label, units="W m-2", limit=lim)
        axes[row, 2].axis("off")
    fig.suptitle(f"{unit.attrs.get('regime', '')} seed {unit.attrs.get('seed', '')}: true | predicted, shared scale")
    return fig


def cka_heatmaps(summary: xr.Dataset, var: str = "cka") -> plt.Figure:
    """Seed x seed consistency of the bottleneck, one panel per regime: ``var="cka"``
    (linear CKA) or ``"channel_agreement"`` (signed r of the same named channel, mean over
    channels)."""
    label = {"cka": "linear CKA", "channel_agreement": "channel agreement"}.get(var, var)
    regs = list(summary["regime"].values)
    fig, axes = plt.subplots(1, len(regs), figsize=(3.3 * len(regs), 3), constrained_layout=True, squeeze=False)
    for ax, r in zip(axes[0], regs):
        m = summary[var].sel(regime=r).values
        im = ax.imshow(m, vmin=0, vmax=1, cmap=cmocean.cm.dense)
        seeds = summary["seed"].values
        ax.set_xticks(range(len(seeds)), seeds)
        ax.set_yticks(range(len(seeds)), seeds)
        for i in range(len(seeds)):
            for j in range(len(seeds)):
                if np.isfinite(m[i, j]):
                    ax.text(
                        j,
                        i,
                        f"{m[i, j]:.2f}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="w" if m[i, j] > 0.6 else "k",
                    )
        mean = summary.get(f"{var}_mean")
        ax.set_title(f"{r}" + (f"\nmean {float(mean.sel(regime=r)):.2f}" if mean is not None else ""), fontsize=9)
        ax.set_xlabel("seed")
        ax.set_ylabel("seed")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label=label)
    return fig


def head_weights_figure(summary: xr.Dataset) -> plt.Figure:
    """Head weight of each concept per regime (dots: seeds; bars: mean); red dashes: the
    exact budget's weights (``head_weight_true``) where the summary has them."""
    regs = list(summary["regime"].values)
    concepts = list(summary["concept"].values)
    fig, ax = plt.subplots(figsize=(1.2 * len(concepts) * len(regs) / 2 + 3, 3.5), constrained_layout=True)
    width = 0.8 / len(regs)
    for i, r in enumerate(regs):
        w = summary["head_weight"].sel(regime=r)
        x = np.arange(len(concepts)) + (i - (len(regs) - 1) / 2) * width
        ax.bar(x, w.mean("seed").values, width=width, alpha=0.6, label=r)
        for s in summary["seed"].values:
            ax.plot(x, w.sel(seed=s).values, "k.", ms=3)
    if "head_weight_true" in summary:
        for k, v in enumerate(summary["head_weight_true"].values):
            if np.isfinite(v):
                ax.hlines(
                    v, k - 0.45, k + 0.45, color="tab:red", lw=1.2, ls="--", label="exact budget" if k == 0 else None
                )
    ax.axhline(0.0, color="0.6", lw=0.6)
    ax.set_xticks(range(len(concepts)), concepts, rotation=30)
    ax.set_ylabel("head weight (normalised)")
    ax.legend(fontsize=8)
    return fig


def ensemble_spread_figure(ds: xr.Dataset, var: str = "mlhc") -> plt.Figure:
    """Ocean-mean time series: ensemble mean +/- one standard deviation over members."""
    mask = ds["mask"].astype(bool)
    # cell areas: the scale factors of a curvilinear grid (its lat / lon dims are grid indices), else cos(lat)
    w = (ds["e1t"] * ds["e2t"] if "e1t" in ds.coords and "e2t" in ds.coords else np.cos(np.deg2rad(ds["lat"]))) * mask
    series = (ds[var].fillna(0) * w).sum(("lat", "lon")) / w.sum()
    mean, std = series.mean("member"), series.std("member")
    fig, ax = plt.subplots(figsize=(8, 3), constrained_layout=True)
    t = ds["time"].values
    ax.fill_between(t, (mean - std).values, (mean + std).values, alpha=0.3, label="± 1 std over members")
    ax.plot(t, mean.values, lw=1.2, label="ensemble mean")
    ax.set_ylabel(f"{var.upper()} ({ds[var].attrs.get('units', '')})")
    ax.set_xlabel("time")
    ax.set_title(f"area-mean {ds[var].attrs.get('long_name', var)}", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def seasonal_skill_maps(unit: xr.Dataset) -> plt.Figure:
    """Anomaly correlation (forecast vs true anomaly from the climatology ``y_clim``) per point and season,
    over the test months of all members; the four seasons side by side on one scale, -1 to 1 with 0 (no
    skill) neutral, and one colour bar."""
    mon = np.asarray([np.datetime64(t, "M").astype(int) % 12 + 1 for t in unit["time"].values])
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.2), constrained_layout=True)
    pa = unit["y_pred"] - unit["y_clim"]
    ta = unit["y_true"] - unit["y_clim"]
    im = None
    for ax, (name, months) in zip(axes, SEASONS.items()):
        sel = np.isin(mon, months)
        if sel.sum() < 3:
            ax.set_title(f"{name}: too few test months")
            ax.axis("off")
            continue
        p, t = pa.isel(sample=np.nonzero(sel)[0]), ta.isel(sample=np.nonzero(sel)[0])
        r = xr.corr(p, t, dim="sample")
        im = map_panel(
            ax,
            r.clip(-1, 1),
            unit["mask"],
            cmap=cmocean.cm.curl,
            limit=1.0,
            title=f"ACC {name} (n={int(sel.sum())} months)",
            colorbar=False,
        )
    if im is not None:
        fig.colorbar(im, ax=axes.tolist(), shrink=0.85, label="anomaly correlation r (0: no skill)")
    if unit.attrs.get("regime"):
        fig.suptitle(f"{unit.attrs['regime']} seed {unit.attrs.get('seed', '')}", fontsize=10)
    return fig


def skill_figure(summary: xr.Dataset, yardsticks: dict[str, float] | None = None) -> plt.Figure:
    """RMSE and anomaly correlation per regime (dots: seeds) and ACC per season. ``yardsticks``: the
    RMSE of each classical forecast (the competence table's: climatology, persistence, damped
    persistence) drawn as lines on the RMSE panel; without it the summary's climatology."""
    regs = list(summary["regime"].values)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.2), constrained_layout=True)
    for ax, var in zip(axes[:2], ("rmse", "acc")):
        for i, r in enumerate(regs):
            v = summary[var].sel(regime=r).values
            ax.plot(np.full(v.shape, i), v, "o", alpha=0.7)
        if var == "rmse":
            lines = yardsticks or {"climatology": float(summary["rmse_climatology"].mean())}
            for k, (name, value) in enumerate(lines.items()):  # each line named where it is drawn
                ax.axhline(value, color="0.4", ls=("--", ":", "-.")[k % 3], lw=0.9)
                ax.annotate(
                    f"{name} {value:.3g}",
                    (1.0, value),
                    xycoords=("axes fraction", "data"),
                    xytext=(-3, 2),
                    textcoords="offset points",
                    ha="right",
                    va="bottom",
                    fontsize=7,
                    color="0.3",
                )
            top = max([*lines.values(), float(np.nanmax(summary[var].values))])
            ax.set_ylim(top=top * 1.08)
        ax.set_xticks(range(len(regs)), regs, rotation=15)
        ax.set_xlabel("supervision regime (dots: seeds)")
    axes[0].set_ylabel(f"RMSE ({summary['rmse'].attrs.get('units', 'W m-2')})")
    axes[1].set_ylabel("anomaly correlation (ACC)")
    acc = summary["acc_season"].mean("seed")
    for r in regs:
        axes[2].plot(list(summary["season"].values), acc.sel(regime=r).values, "o-", label=r)
    axes[2].set_ylabel("ACC (mean over seeds)")
    axes[2].set_xlabel("season")
    axes[2].legend(fontsize=8)
    return fig


def attribution_figure(attr: xr.DataArray, mask: xr.DataArray, variables: list[str], window: int) -> plt.Figure:
    """Mean |GradientShap| attribution per input variable (summed over the window's months), every variable on
    one colour scale from 0 to the largest attribution and one colour bar, so the maps compare variables;
    titles: the variable and its long name (:data:`ocean.variables.VAR_ATTRS`)."""
    from .variables import VAR_ATTRS

    a = np.abs(attr.values).mean(0)  # (window * V, y, x)
    a = a.reshape(len(variables), window, *a.shape[-2:]).sum(1)  # channels are variable-major
    ok = mask.values.astype(bool)
    top = float(np.nanmax(a[:, ok])) if ok.any() and np.isfinite(a[:, ok]).any() else 1.0
    top = top if top > 0 else 1.0
    ncol = min(4, len(variables))
    nrow = int(np.ceil(len(variables) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(4 * ncol, 3 * nrow), constrained_layout=True, squeeze=False)
    im = None
    for k, (ax, v) in enumerate(zip(axes.ravel(), variables)):
        da = xr.DataArray(a[k], dims=("lat", "lon"), coords={"lat": mask["lat"], "lon": mask["lon"]})
        name = VAR_ATTRS.get(v, {}).get("long_name", "")
        im = map_panel(
            ax,
            da,
            mask,
            cmap=cmocean.cm.amp,
            title=f"{v}" + (f" ({name})" if name else ""),
            vrange=(0.0, top),
            colorbar=False,
        )
    for ax in axes.ravel()[len(variables) :]:
        ax.axis("off")
    if im is not None:
        fig.colorbar(
            im,
            ax=axes.ravel().tolist(),
            shrink=0.85,
            label=f"|attribution|, summed over {window} input months\n(normalised forecast per normalised input)",
        )
    return fig
