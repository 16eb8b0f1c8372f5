"""Steps 2 and 3 (probes): ridge probes of z and A_V on each encoder block (``scimech.record`` +
``scimech.probe``), the block where the image's gain appears, per-head probes of colours and
template photo-z, and the radial organisation of each head's image-token output."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr
from scipy.stats import spearmanr

from scimech.errors import DataValidationError
from scimech.probe import probe_sites
from scimech.record import record

from ..models.aion import IMAGE_KEY, AIONRedshift
from .inputs import StudyInputs

__all__ = ["record_blocks", "layer_probes", "localised_block", "head_probes", "head_radial_structure"]


def _pool(acts: np.ndarray, n_scalar: int, mode: str) -> np.ndarray:
    """Mean over the tokens visible in the mode: scalars only (photometry) or all (multimodal)."""
    return acts[:, :n_scalar].mean(1) if mode == "photometry" else acts.mean(1)


def record_blocks(adapter: AIONRedshift, batch, sites: Sequence[str], batch_size: int = 256) -> xr.Dataset:
    return record(adapter.model, batch, list(sites), forward=adapter.forward, batch_size=batch_size,
                  stop_early=True)


def layer_probes(adapter: AIONRedshift, inp: StudyInputs, *, cv: int = 5, alpha: float = 1.0,
                 n_bootstrap: int = 200) -> xr.Dataset:
    """R2 of ridge probes of z and A_V on each encoder block output, per mode.

    Returns
    -------
    xr.Dataset
        ``score``, ``score_low``, ``score_high`` (mode, target, layer); ``gain`` (target, layer)
        = multimodal - photometry.
    """
    sites = adapter.block_sites()
    targets = {"z": inp.z, "a_v": inp.a_v}
    modes = {"photometry": inp.phot, "multimodal": inp.multi}
    score = np.zeros((2, 2, len(sites)))
    lo, hi = score.copy(), score.copy()
    for i, (mode, batch) in enumerate(modes.items()):
        rec = record_blocks(adapter, batch, sites)
        feats = {s: _pool(rec[s].values, inp.n_scalar_tokens, mode) for s in sites}
        for j, y in enumerate(targets.values()):
            res = probe_sites(feats, y, cv=cv, alpha=alpha, control=False, n_bootstrap=n_bootstrap, dim="layer",
                              coords=list(range(len(sites))))
            score[i, j] = res["score_mean"].values
            lo[i, j] = res["score_ci_low"].values if "score_ci_low" in res else np.nan
            hi[i, j] = res["score_ci_high"].values if "score_ci_high" in res else np.nan
    dims = ("mode", "target", "layer")
    coords = dict(mode=list(modes), target=list(targets), layer=np.arange(len(sites)))
    ds = xr.Dataset({"score": (dims, score, {"units": "R2"}), "score_low": (dims, lo), "score_high": (dims, hi)},
                    coords=coords)
    ds["gain"] = ds["score"].sel(mode="multimodal") - ds["score"].sel(mode="photometry")
    ds.attrs.update(description="layerwise linear probes (ridge, CV R2) of encoder block outputs", cv=cv, alpha=alpha)
    return ds


def localised_block(layers: xr.Dataset, target: str = "z") -> int:
    """The block where the multimodal probe gain increases most (gain of block -1 taken as 0)."""
    g = layers["gain"].sel(target=target).values
    inc = np.diff(np.concatenate([[0.0], g]))
    return int(np.argmax(inc))


# ---------------------------------------------------------------- 3. heads
def _head_acts(adapter, batch, block):
    sites = adapter.head_sites(block)
    rec = record_blocks(adapter, batch, sites)
    return sites, {s: rec[s].values for s in sites}


def head_probes(adapter: AIONRedshift, inp: StudyInputs, block: int, *, cv: int = 5, alpha: float = 1.0,
                n_bootstrap: int = 200) -> xr.Dataset:
    """R2 of per-head probes (multimodal run, scalar-token mean) of colours, template photo-z, z and A_V.

    Returns
    -------
    xr.Dataset
        ``score`` (head, target): cross-validated R2; for the colours also ``score_low`` /
        ``score_high``, its percentile bootstrap interval (``n_bootstrap`` resamples of the
        out-of-fold predictions), and ``selectivity``: R2 minus the R2 of the same probe on
        control labels (the colours permuted among galaxies, Hewitt & Liang 2019); NaN for
        the other targets.
    """
    sites, acts = _head_acts(adapter, inp.multi, block)
    feats = {s: a[:, : inp.n_scalar_tokens].mean(1) for s, a in acts.items()}
    targets = {"g-r": inp.colours[:, 0], "r-i": inp.colours[:, 1], "i-z": inp.colours[:, 2],
               "z_template": inp.z_template, "z": inp.z, "a_v": inp.a_v}
    out = np.full((4, len(sites), len(targets)), np.nan)
    for j, (name, y) in enumerate(targets.items()):
        colour = name in ("g-r", "r-i", "i-z")           # interval and control task for the colours only
        res = probe_sites(feats, y, cv=cv, alpha=alpha, control=colour, n_bootstrap=n_bootstrap if colour else 0,
                          ci_method="percentile")
        out[0, :, j] = res["score_mean"].values
        if colour:
            out[1, :, j] = res["score_ci_low"].values if "score_ci_low" in res else np.nan
            out[2, :, j] = res["score_ci_high"].values if "score_ci_high" in res else np.nan
            out[3, :, j] = res["selectivity_mean"].values
    dims = ("head", "target")
    ds = xr.Dataset({"score": (dims, out[0], {"units": "R2", "description": "cross-validated R2 of a ridge probe"}),
                     "score_low": (dims, out[1], {"units": "R2", "description": "95% percentile bootstrap bound"}),
                     "score_high": (dims, out[2], {"units": "R2", "description": "95% percentile bootstrap bound"}),
                     "selectivity": (dims, out[3], {"units": "R2", "description": "R2 minus control-task R2"})},
                    coords=dict(head=np.arange(len(sites)), target=list(targets), site=("head", sites)))
    ds.attrs.update(description=f"per-head probes in encoder block {block}", block=block, n_bootstrap=n_bootstrap)
    return ds


def head_radial_structure(adapter: AIONRedshift, inp: StudyInputs, block: int, grid: int | None = None) -> xr.Dataset:
    """Each head's image-token output on the token grid and its radial organisation.

    For head h the image-token outputs (samples x tokens, dh) are projected on their first
    principal component; the mean projection per token is a (grid, grid) map. The radial
    score is |Spearman rho| between that map and the token's distance from the centre.
    """
    if IMAGE_KEY not in inp.multi:
        raise DataValidationError("head_radial_structure needs image tokens in the inputs.")
    sites, acts = _head_acts(adapter, inp.multi, block)
    n_img = inp.multi[IMAGE_KEY].shape[1]
    g = grid or int(round(np.sqrt(n_img)))
    yy, xx = np.mgrid[0:g, 0:g]
    r = np.hypot(yy - (g - 1) / 2, xx - (g - 1) / 2).ravel()
    maps = np.zeros((len(sites), g, g))
    score = np.zeros(len(sites))
    for i, s in enumerate(sites):
        a = acts[s][:, inp.n_scalar_tokens:inp.n_scalar_tokens + n_img]     # (B, n_img, dh)
        flat = a.reshape(-1, a.shape[-1])
        flat = flat - flat.mean(0)
        _, _, vt = np.linalg.svd(flat[:: max(1, len(flat) // 20000)], full_matrices=False)
        proj = (a - a.reshape(-1, a.shape[-1]).mean(0)) @ vt[0]
        m = proj.mean(0)
        if np.corrcoef(m, r)[0, 1] < 0:   # PC sign is arbitrary: orient to increase outward
            m = -m
        maps[i] = m.reshape(g, g)
        score[i] = abs(spearmanr(m, r).statistic)
    return xr.Dataset({"map": (("head", "y", "x"), maps, {"description": "mean PC1 projection per image token"}),
                       "radial_score": ("head", score, {"description": "|Spearman rho| of map vs token radius"})},
                      coords=dict(head=np.arange(len(sites)), site=("head", sites), y=np.arange(g), x=np.arange(g)),
                      attrs={"block": block, "description": "radial structure of head image-token outputs"})
