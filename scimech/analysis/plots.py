"""The figures drawn first: a layer x head map of effects, a probe curve by layer, a feature
against a physical variable.

Each takes a labelled result and an optional matplotlib ``ax`` and returns the axes it drew on,
as xarray's ``.plot`` does, so a figure is finished with matplotlib as usual (titles, panels,
``fig.savefig``).

- :func:`layer_head_map`: the effect of each head of a sweep or of attribution patching, laid
  out by the ``layer`` and ``head`` coordinates the results carry
  (:func:`scimech.capture.sites.site_coords`); cells whose bootstrap interval of the mean
  over samples includes 0 are hatched.
- :func:`probe_curve`: the held-out skill of :func:`~scimech.analysis.probe.probe_sites` per
  layer, with its bootstrap interval as a band and the control task's skill.
- :func:`feature_vs_variable`: one feature's activation against a physical variable, each
  sample a point, with the mean in bins of the variable.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from scimech.analysis.stats import bootstrap_ci
from scimech.capture.sites import site_coords
from scimech.errors import DataValidationError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["layer_head_map", "probe_curve", "feature_vs_variable"]


def _axes(ax: Axes | None) -> Axes:
    import matplotlib.pyplot as plt

    return plt.gca() if ax is None else ax


def _label(da: xr.DataArray | xr.Variable, name: str) -> str:
    units = da.attrs.get("units")
    return f"{name} [{units}]" if units not in (None, "", "1") else name


def _heads_grid(da: xr.DataArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The layers, the heads and, per (layer, head), the index of its site (-1: none)."""
    if "layer" in da.coords and "head" in da.coords:
        layer, head = np.asarray(da["layer"].values), np.asarray(da["head"].values)
    else:
        c = site_coords([str(s) for s in da["site"].values])
        if "layer" not in c or "head" not in c:
            raise DataValidationError(
                "layer_head_map needs sites that name a layer and one head, e.g. "
                "'encoder.layers.0.self_attn.heads[1]'; none of these does. Sweep over head sites "
                "(scimech.list_sites(model) lists them)."
            )
        layer, head = c["layer"][1], c["head"][1]
    keep = (layer >= 0) & (head >= 0)
    if not keep.any():
        raise DataValidationError(
            "layer_head_map: no site names both a layer and one head (e.g. 'layers.0.self_attn.heads[1]'); "
            "sweep over head sites to draw the map."
        )
    layers, heads = np.unique(layer[keep]), np.unique(head[keep])
    index = np.full((len(layers), len(heads)), -1)
    for i in np.flatnonzero(keep):
        r, c_ = np.searchsorted(layers, layer[i]), np.searchsorted(heads, head[i])
        if index[r, c_] >= 0:
            sites = da["site"].values
            raise DataValidationError(
                f"layer_head_map: sites {sites[index[r, c_]]!r} and {sites[i]!r} are both layer {layer[i]}, "
                f"head {head[i]}; draw one of them, e.g. result.sel(site=[...])."
            )
        index[r, c_] = i
    return layers, heads, index


def _cell_values(da: xr.DataArray, interval: bool, confidence: float) -> tuple[np.ndarray, np.ndarray | None]:
    """Per site: the mean over samples and whether its bootstrap interval includes 0 (``None``
    without samples or without ``interval``)."""
    other = [d for d in da.dims if d not in ("site", "sample")]
    if other:
        raise DataValidationError(
            f"layer_head_map draws one value per site; this result also has dims {other}. Select one, "
            f"e.g. result.sel({other[0]}=0) or result.mean({other[0]!r})."
        )
    if "sample" not in da.dims:
        return da.transpose("site").values.astype(float), None
    v = da.transpose("site", "sample").values.astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN site (clean == corrupted everywhere): blank
        mean = np.nanmean(v, axis=1)
    if not interval:
        return mean, None
    zero = np.zeros(len(v), dtype=bool)
    for s, row in enumerate(v):
        row = row[np.isfinite(row)]
        if row.size >= 2 and np.ptp(row) > 0:
            _, lo, hi = bootstrap_ci(row, confidence=confidence, method="percentile", seed=0)
            zero[s] = lo <= 0 <= hi
        elif row.size >= 2:  # every sample the same: the interval is that value
            zero[s] = row[0] == 0
    return mean, zero


def layer_head_map(
    result: xr.Dataset | xr.DataArray,
    var: str = "normalized_effect",
    ax: Axes | None = None,
    *,
    interval: bool = True,
    confidence: float = 0.95,
    cmap: str = "RdBu_r",
    **imshow_kw: Any,
) -> Axes:
    """Heat map of a per-site effect by layer (rows) and head (columns).

    Parameters
    ----------
    result
        A result of :func:`~scimech.causal.intervene.patching_sweep`,
        :func:`~scimech.causal.intervene.ablation_sweep` or
        :func:`~scimech.causal.atp.attribution_patching` over head sites (their ``layer`` and
        ``head`` coordinates place each cell; sites that name no head are left out), or one of
        its variables.
    var
        The variable drawn (``"effect"`` for an ablation sweep). With a ``sample`` dim, each
        cell is the mean over samples (NaN samples left out).
    ax
        Axes to draw on (default: the current axes).
    interval
        Hatch the cells whose percentile-bootstrap interval of the mean (1000 resamples,
        :func:`scimech.analysis.stats.bootstrap_ci`) includes 0: effects the samples do not
        tell from none.
    confidence
        Level of that interval.
    cmap
        Colour map, centred on 0.
    **imshow_kw
        Further arguments of :meth:`matplotlib.axes.Axes.imshow`.

    Returns
    -------
    matplotlib.axes.Axes
        The axes; ``ax.images[0].get_array()`` is the (layer, head) grid drawn, NaN where no
        site was given.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> sites = [f"layers.{l}.self_attn.heads[{h}]" for l in range(2) for h in range(3)]
    >>> ds = xr.Dataset({"effect": ("site", np.arange(6.0))}, coords={"site": sites})
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> ax = layer_head_map(ds, "effect", ax=ax)
    >>> ax.images[0].get_array().tolist()
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    """
    da = result[var] if isinstance(result, xr.Dataset) else result
    if "site" not in da.dims:
        raise DataValidationError(f"layer_head_map draws a result with a 'site' dim; {da.name!r} has dims {da.dims}.")
    layers, heads, index = _heads_grid(da)
    mean, zero = _cell_values(da, interval, confidence)
    grid = np.where(index >= 0, mean[np.maximum(index, 0)], np.nan)
    ax = _axes(ax)
    vmax = (float(np.nanmax(np.abs(grid))) if np.isfinite(grid).any() else 0.0) or 1.0  # centred on 0
    kw: dict[str, Any] = {
        "origin": "lower",
        "aspect": "auto",
        "cmap": cmap,
        "vmin": -vmax,
        "vmax": vmax,
        "interpolation": "nearest",
    }
    im = ax.imshow(grid, **(kw | imshow_kw))
    ax.set(xticks=range(len(heads)), xticklabels=[str(h) for h in heads], xlabel="head")
    ax.set(yticks=range(len(layers)), yticklabels=[str(l_) for l_ in layers], ylabel="layer")
    name = str(da.name or var)
    ax.figure.colorbar(im, ax=ax, label=_label(da, name) + (" (mean over samples)" if zero is not None else ""))
    if zero is not None:
        from matplotlib.patches import Rectangle

        for r, c in zip(*np.nonzero((index >= 0) & zero[np.maximum(index, 0)]), strict=True):
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, hatch="//", lw=0, gid="interval_includes_0"))
        ax.set_title(f"{name}: hatched where the {confidence:.0%} interval includes 0", fontsize="medium")
    return ax


def _probe_x(ds: xr.Dataset, dim: str) -> tuple[np.ndarray, str, list[str] | None]:
    """The x of each probed site: the dim's numbers, else the layers its site names give, else
    positions labelled with the names."""
    values = ds[dim].values
    if np.issubdtype(values.dtype, np.number):
        return values.astype(float), dim, None
    names = [str(v) for v in values]
    layer = site_coords(names).get("layer")
    if layer is not None and (layer[1] >= 0).all() and len(set(layer[1])) == len(names):
        return layer[1].astype(float), "layer", None
    return np.arange(len(names), dtype=float), dim, names


def probe_curve(result: xr.Dataset, ax: Axes | None = None, *, control: bool = True) -> Axes:
    """Probe skill by layer with its interval band.

    Parameters
    ----------
    result
        The Dataset of :func:`~scimech.analysis.probe.probe_sites`: the line is ``score_oof``
        (the pooled out-of-fold score), the band ``score_ci_low`` .. ``score_ci_high`` (its
        bootstrap interval, where computed). The x axis is the probed dim when it is numeric
        (``dim="layer"``), else the layer each site names, else the sites in order.
    ax
        Axes to draw on (default: the current axes).
    control
        Also draw the control task's mean skill (``control_mean``, dashed) where there is one.

    Returns
    -------
    matplotlib.axes.Axes
        The axes; ``ax.lines[0]`` is the skill curve.

    Examples
    --------
    >>> import numpy as np
    >>> from scimech.analysis.probe import probe_sites
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=60)
    >>> feats = {f"layers.{i}": np.c_[y * i, rng.normal(size=60)] + rng.normal(size=(60, 2)) for i in range(3)}
    >>> ds = probe_sites(feats, y, cv=3, n_bootstrap=200, control=False)
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> ax = probe_curve(ds, ax=ax)
    >>> ax.get_xlabel(), ax.lines[0].get_xdata().tolist()
    ('layer', [0.0, 1.0, 2.0])
    """
    if not isinstance(result, xr.Dataset) or "score_oof" not in result:
        raise DataValidationError(
            "probe_curve draws the Dataset that probe_sites returns (a score_oof variable); "
            f"got {type(result).__name__}."
        )
    dim = str(result["score_oof"].dims[0])
    x, xlabel, ticks = _probe_x(result, dim)
    ax = _axes(ax)
    metric = str(result.attrs.get("metric", "score"))
    (line,) = ax.plot(x, result["score_oof"].values, marker="o", label=f"probe ({metric}, out of fold)")
    if "score_ci_low" in result and "score_ci_high" in result:
        ax.fill_between(
            x,
            result["score_ci_low"].values,
            result["score_ci_high"].values,
            color=line.get_color(),
            alpha=0.25,
            lw=0,
            label=f"{float(result.attrs.get('confidence', 0.95)):.0%} bootstrap interval",
        )
    if control and "control_mean" in result:
        ax.plot(x, result["control_mean"].values, ls="--", color="0.4", label="control task")
    ax.set(xlabel=xlabel, ylabel=metric)
    if ticks is not None:
        ax.set_xticks(x, ticks, rotation=45, ha="right")
    ax.legend(loc="best", fontsize="small")
    return ax


def feature_vs_variable(
    activations: xr.DataArray | np.ndarray,
    variable: xr.DataArray | np.ndarray,
    ax: Axes | None = None,
    *,
    bins: int = 10,
) -> Axes:
    """One feature's activation against a physical variable: each sample a point, and the mean
    activation in ``bins`` equal-width bins of the variable.

    Parameters
    ----------
    activations
        One value per sample (select a feature first, e.g. ``acts.sel(feature=3)``).
    variable
        The physical variable per sample (its ``units`` attr labels the axis). Where both
        carry ``sample`` coordinates they are paired by them; else by position.
    ax
        Axes to draw on (default: the current axes).
    bins
        Number of equal-width bins of the variable for the mean line (empty bins left out).

    Returns
    -------
    matplotlib.axes.Axes
        The axes; ``ax.collections[0]`` holds the points, ``ax.lines[0]`` the binned mean.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> t = xr.DataArray(np.linspace(0, 30, 50), dims="sample", name="temperature", attrs={"units": "degC"})
    >>> a = xr.DataArray(2 * t.values, dims="sample", name="feature 3")
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> ax = feature_vs_variable(a, t, ax=ax, bins=5)
    >>> ax.get_xlabel(), ax.get_ylabel()
    ('temperature [degC]', 'feature 3')
    """
    a = activations if isinstance(activations, xr.DataArray) else xr.DataArray(np.asarray(activations))
    v = variable if isinstance(variable, xr.DataArray) else xr.DataArray(np.asarray(variable))
    for da, what in ((a, "activations"), (v, "variable")):
        if da.squeeze().ndim != 1:
            raise DataValidationError(
                f"feature_vs_variable takes one value per sample; {what} has dims {dict(da.sizes)}. "
                "Select one feature, e.g. acts.sel(feature=3)."
            )
    a, v = a.squeeze(), v.squeeze()
    if "sample" in a.coords and "sample" in v.coords:
        have, want = a["sample"].values, v["sample"].values
        if len(have) != len(want) or set(have.tolist()) != set(want.tolist()):
            raise DataValidationError(
                "feature_vs_variable: activations and variable carry different samples; give the same "
                "samples (e.g. variable.sel(sample=acts.sample))."
            )
        a = a.sel(sample=want)  # paired by sample, in the variable's order
    elif a.size != v.size:
        raise DataValidationError(f"feature_vs_variable: {a.size} activations but {v.size} variable values.")
    x, y = np.asarray(v.values, float), np.asarray(a.values, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size == 0:
        raise DataValidationError("feature_vs_variable: no sample has a finite activation and variable.")
    ax = _axes(ax)
    ax.scatter(x, y, s=8, alpha=0.5, label="samples")
    edges = np.histogram_bin_edges(x, bins=bins)
    which = np.clip(np.digitize(x, edges[1:-1]), 0, len(edges) - 2)  # the last edge closes the last bin
    filled = np.unique(which)
    centres = (edges[:-1] + edges[1:])[filled] / 2
    means = np.array([y[which == b].mean() for b in filled])
    ax.plot(centres, means, color="k", marker="o", label=f"mean in {bins} bins")
    ax.set(xlabel=_label(v, str(v.name or "variable")), ylabel=_label(a, str(a.name or "activation")))
    ax.legend(loc="best", fontsize="small")
    return ax
