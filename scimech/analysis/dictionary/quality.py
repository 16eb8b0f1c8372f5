"""How good a dictionary is, and what its features mean in the science.

- :func:`dictionary_quality`: fraction of variance explained (with a bootstrap interval
  over rows), mean L0, dead features and each feature's firing frequency.
- :func:`feature_alignment`: each feature's activation against each domain variable given
  on the same positions (an xarray Dataset: budget terms, redshift, neuron type...): the
  Pearson correlation with a bootstrap interval, and a control: the same correlation with
  the variable's values shuffled across positions (what chance gives on this many
  positions).
- :func:`top_examples`: the positions where a feature is most active (to draw as maps,
  stamps or traces).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import xarray as xr

from scimech.analysis.stats import bootstrap_ci
from scimech.errors import DataValidationError

from .activations import rows
from .saes import SparseDictionary

__all__ = ["dictionary_quality", "feature_alignment", "top_examples"]


@torch.no_grad()
def dictionary_quality(
    dictionary: SparseDictionary,
    acts: Any,
    *,
    target: Any = None,
    feature_dim: str | None = None,
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> xr.Dataset:
    """Reconstruction, sparsity and dead features of a dictionary on activations (a
    transcoder: its prediction of ``target``)."""
    x = rows(acts, feature_dim)
    y = x if target is None else rows(target, what="target activations")
    dictionary.eval()
    device = next(dictionary.parameters()).device
    z = dictionary.encode(x.to(device))
    recon = dictionary.decode(z).cpu().double()
    z = z.cpu()
    err = (y.double() - recon).pow(2).sum(1).numpy()
    tot = (y.double() - y.double().mean(0)).pow(2).sum(1).numpy()

    def fve(e, t, axis=-1):
        return 1.0 - np.sum(e, axis=axis) / np.sum(t, axis=axis)

    if n_bootstrap and len(err) > 2:
        est, lo, hi = bootstrap_ci(
            (err, tot), fve, paired=True, n_resamples=n_bootstrap, seed=seed, method="percentile"
        )
    else:
        est, lo, hi = fve(err, tot), np.nan, np.nan
    freq = (z > 0).double().mean(0).numpy()
    return xr.Dataset(
        {
            "fve": ((), float(est), {"description": "fraction of variance explained by the reconstruction"}),
            "fve_ci_low": ((), float(lo), {"description": "95% percentile-bootstrap bound over rows"}),
            "fve_ci_high": ((), float(hi), {"description": "95% percentile-bootstrap bound over rows"}),
            "l0": (
                (),
                float((z > 0).sum(1).double().mean()),
                {"description": "mean number of active features per row"},
            ),
            "dead_fraction": ((), float((freq == 0).mean()), {"description": "share of features never active here"}),
            "frequency": (("feature",), freq, {"description": "share of rows where the feature is active"}),
        },
        coords={"feature": np.arange(dictionary.n_features)},
        attrs={"kind": dictionary.kind, "n_rows": int(x.shape[0]), "n_features": dictionary.n_features},
    )


def _pearson(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    a = a - a.mean(axis=axis, keepdims=True)
    b = b - b.mean(axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(axis=axis) / np.sqrt((a * a).sum(axis=axis) * (b * b).sum(axis=axis))


def feature_alignment(
    features: xr.DataArray,
    variables: xr.Dataset,
    *,
    n_bootstrap: int = 500,
    seed: int = 0,
    features_to_score: Any = None,
) -> xr.Dataset:
    """Correlation of each feature's activation with each variable over the shared positions.

    Parameters
    ----------
    features
        Feature activations on the positions' dims plus ``feature``
        (:func:`scimech.analysis.dictionary.encode` of a recording with named dims).
    variables
        The domain variables on (a subset of) the same dims: broadcast to the features'
        positions; NaN positions (land, masked cells) are left out per variable.
    features_to_score
        Feature indices to score (default: every feature active somewhere).

    Returns
    -------
    xr.Dataset
        Over ``(feature, variable)``: ``r`` (Pearson), ``r_ci_low``/``r_ci_high``
        (percentile bootstrap over positions), ``control_r`` (the variable shuffled across
        positions), ``n`` (positions used).
    """
    if "feature" not in features.dims:
        raise DataValidationError(
            "features has no 'feature' dim; pass scimech.analysis.dictionary.encode(...)'s result."
        )
    pos = [d for d in features.dims if d != "feature"]
    missing = {str(v): [d for d in variables[v].dims if d not in pos] for v in variables.data_vars}
    missing = {v: d for v, d in missing.items() if d}
    if missing:
        raise DataValidationError(
            f"variables have dims the features lack: {missing}; the features are on {pos}. "
            "Give the variables on the recording's positions."
        )
    active = features.max([d for d in pos]) > 0
    chosen = np.flatnonzero(active.values) if features_to_score is None else np.asarray(features_to_score)
    f = features.isel(feature=chosen).transpose(*pos, "feature").values.reshape(-1, len(chosen)).astype(float)
    rng = np.random.default_rng(seed)
    names = [str(v) for v in variables.data_vars]
    out = {k: np.full((len(chosen), len(names)), np.nan) for k in ("r", "r_ci_low", "r_ci_high", "control_r")}
    counts = np.zeros(len(names), int)
    for j, name in enumerate(names):
        v = variables[name].broadcast_like(features.isel(feature=0, drop=True)).transpose(*pos).values.reshape(-1)
        ok = np.isfinite(v)
        counts[j] = int(ok.sum())
        if counts[j] < 3:
            continue
        fv, vv = f[ok], v[ok]
        out["r"][:, j] = _pearson(fv.T, vv[None, :])
        out["control_r"][:, j] = _pearson(fv.T, rng.permutation(vv)[None, :])
        if n_bootstrap:
            idx = rng.integers(0, len(vv), size=(n_bootstrap, len(vv)))
            boots = np.stack([_pearson(fv[i].T, vv[i][None, :]) for i in idx])
            out["r_ci_low"][:, j], out["r_ci_high"][:, j] = np.nanpercentile(boots, [2.5, 97.5], axis=0)
    desc = {
        "r": "Pearson correlation of the feature's activation with the variable",
        "r_ci_low": "2.5% percentile-bootstrap bound over positions",
        "r_ci_high": "97.5% percentile-bootstrap bound over positions",
        "control_r": "the same with the variable shuffled across positions (chance)",
    }
    return xr.Dataset(
        {k: (("feature", "variable"), v, {"description": desc[k]}) for k, v in out.items()}
        | {"n": (("variable",), counts, {"description": "positions used (finite variable)"})},
        coords={"feature": chosen, "variable": names},
        attrs={"description": "features against domain variables", "n_bootstrap": n_bootstrap},
    )


def top_examples(features: xr.DataArray, feature: int, n: int = 8, *, over: str | None = None) -> xr.DataArray:
    """The ``n`` positions (along ``over``, default the first dim) where ``feature`` is most
    active (its maximum over the other positions), largest first: index these in the inputs
    to draw them."""
    over = over or str(next(d for d in features.dims if d != "feature"))
    a = features.sel(feature=feature)
    peak = a.max([d for d in a.dims if d != over]) if a.ndim > 1 else a
    order = np.argsort(-peak.values, kind="stable")[:n]
    return peak.isel({over: order})
