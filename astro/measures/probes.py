"""Steps 2 and 3 (probes): ridge probes of z and A_V on each encoder block (``scimech.record`` +
``scimech.analysis.probe``), the block where the image's gain appears, per-head probes of colours and
template photo-z, and the radial organisation of each head's image-token output."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import torch
import xarray as xr
from scipy.stats import spearmanr

from scimech.analysis.probe import probe_sites
from scimech.capture.record import record
from scimech.errors import DataValidationError

from ..models.aion import IMAGE_KEY, AIONRedshift, rows_per_pass
from .inputs import StudyInputs

__all__ = [
    "record_blocks",
    "layer_probes",
    "localised_block",
    "head_probes",
    "head_radial_structure",
    "PrecisionWarning",
    "spread_over_rms",
]


class PrecisionWarning(UserWarning):
    """The galaxies' differences in an activation are below what the model's ``--dtype`` resolves."""


def spread_over_rms(features: np.ndarray) -> float:
    """rms of the galaxy-to-galaxy differences of pooled features over their rms: the share of an
    activation a probe can use, to set against the model dtype's resolution."""
    f = np.asarray(features, np.float64)
    return float(np.sqrt(np.mean((f - f.mean(0)) ** 2) / max(np.mean(f**2), 1e-300)))


def _check_resolution(adapter: AIONRedshift, feats: dict[str, np.ndarray]) -> dict[str, float]:
    """Each site's :func:`spread_over_rms`; a :class:`PrecisionWarning` when the model computes in a
    half precision whose rounding (2**-8 of a value in bfloat16, 2**-11 in float16) is within 8 times
    some site's spread: the probes would then read rounding, not galaxies."""
    spread = {s: spread_over_rms(f) for s, f in feats.items()}
    dtype = getattr(adapter, "dtype", torch.float32)
    if dtype != torch.float32 and spread:
        unit = torch.finfo(dtype).eps / 2
        low = {s: r for s, r in spread.items() if r < 8 * unit}
        if low:
            worst = min(low, key=low.get)
            warnings.warn(
                f"{len(low)} of {len(spread)} sites vary between galaxies by less than 8 roundings of "
                f"{str(dtype).removeprefix('torch.')} ({worst}: {low[worst]:.2%} of its rms, one rounding "
                f"{unit:.2%}); their probes would read rounding. Rerun with --dtype float32.",
                PrecisionWarning,
                stacklevel=3,
            )
    return spread


def _pool(acts: np.ndarray, n_scalar: int, mode: str) -> np.ndarray:
    """Mean over the tokens visible in the mode: scalars only (photometry) or all (multimodal)."""
    return acts[:, :n_scalar].mean(1) if mode == "photometry" else acts.mean(1)


def record_blocks(
    adapter: AIONRedshift, batch, sites: Sequence[str], batch_size: int | None = None, reduce=None
) -> xr.Dataset:
    """Activations at ``sites`` over a batch dict, streamed in passes of ``batch_size`` galaxies
    (default :func:`rows_per_pass`); ``reduce`` (``scimech.capture.record.record``'s) pools each pass's
    tokens before the next, so only the pooled features of every galaxy are held."""
    return record(
        adapter.model,
        batch,
        list(sites),
        forward=adapter.forward,
        batch_size=batch_size or rows_per_pass(batch),
        stop_early=True,
        reduce=reduce,
    )


def _pooler(n_scalar: int, mode: str):
    """``reduce`` of :func:`record_blocks`: :func:`_pool` of one pass, in float32 whatever the
    model's ``--dtype`` (a bfloat16 mean over 584 tokens would keep 3 significant digits)."""
    return (lambda t: t[:, :n_scalar].float().mean(1)) if mode == "photometry" else (lambda t: t.float().mean(1))


def layer_probes(
    adapter: AIONRedshift, inp: StudyInputs, *, cv: int = 5, alpha: float = 1.0, n_bootstrap: int = 200
) -> xr.Dataset:
    """R2 of ridge probes of z and A_V on each encoder block output, per mode.

    Both modes pool the same tokens, the catalogue's (the first ``inp.n_scalar_tokens``), so the
    gain is what the image adds to the photometry's tokens by that block. (A mean over every
    visible token, the image's with the catalogue's in the multimodal run, compares two
    different averages: on the planted stand-in, whose image enters only in block 0, it read a
    block-0 gain of -0.016 in R2, the catalogue tokens diluted by the image tokens, and put the
    gain in block 1; docs/astro.md.)

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
    for i, batch in enumerate(modes.values()):
        # the catalogue tokens in both modes, pooled per pass
        rec = record_blocks(adapter, batch, sites, reduce=_pooler(inp.n_scalar_tokens, "photometry"))
        feats = {s: rec[s].values for s in sites}
        for j, y in enumerate(targets.values()):
            res = probe_sites(
                feats,
                y,
                cv=cv,
                alpha=alpha,
                control=False,
                n_bootstrap=n_bootstrap,
                dim="layer",
                coords=list(range(len(sites))),
                groups=inp.groups,
            )
            score[i, j] = res["score_mean"].values
            lo[i, j] = res["score_ci_low"].values if "score_ci_low" in res else np.nan
            hi[i, j] = res["score_ci_high"].values if "score_ci_high" in res else np.nan
    dims = ("mode", "target", "layer")
    coords = dict(mode=list(modes), target=list(targets), layer=np.arange(len(sites)))
    ds = xr.Dataset(
        {"score": (dims, score, {"units": "R2"}), "score_low": (dims, lo), "score_high": (dims, hi)}, coords=coords
    )
    ds["gain"] = ds["score"].sel(mode="multimodal") - ds["score"].sel(mode="photometry")
    ds.attrs.update(
        description="layerwise linear probes (ridge, CV R2) of encoder block outputs, mean over the catalogue tokens",
        cv=cv,
        alpha=alpha,
        pooled="catalogue tokens, both modes",
    )
    return ds


def localised_block(layers: xr.Dataset, target: str = "z") -> int:
    """The block where the multimodal probe gain increases most (gain of block -1 taken as 0)."""
    g = layers["gain"].sel(target=target).values
    inc = np.diff(np.concatenate([[0.0], g]))
    return int(np.argmax(inc))


# ---------------------------------------------------------------- 3. heads
def _head_acts(adapter, batch, block, reduce=None):
    sites = adapter.head_sites(block)
    rec = record_blocks(adapter, batch, sites, reduce=reduce)
    return sites, {s: rec[s].values for s in sites}


def head_probes(
    adapter: AIONRedshift, inp: StudyInputs, block: int, *, cv: int = 5, alpha: float = 1.0, n_bootstrap: int = 200
) -> xr.Dataset:
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
    sites, feats = _head_acts(adapter, inp.multi, block, reduce=_pooler(inp.n_scalar_tokens, "photometry"))
    spread = _check_resolution(adapter, feats)
    targets = {
        "g-r": inp.colours[:, 0],
        "r-i": inp.colours[:, 1],
        "i-z": inp.colours[:, 2],
        "z_template": inp.z_template,
        "z": inp.z,
        "a_v": inp.a_v,
    }
    out = np.full((4, len(sites), len(targets)), np.nan)
    for j, (name, y) in enumerate(targets.items()):
        colour = name in ("g-r", "r-i", "i-z")  # interval and control task for the colours only
        res = probe_sites(
            feats,
            y,
            cv=cv,
            alpha=alpha,
            control=colour,
            n_bootstrap=n_bootstrap if colour else 0,
            ci_method="percentile",
            groups=inp.groups,
        )
        out[0, :, j] = res["score_mean"].values
        if colour:
            out[1, :, j] = res["score_ci_low"].values if "score_ci_low" in res else np.nan
            out[2, :, j] = res["score_ci_high"].values if "score_ci_high" in res else np.nan
            out[3, :, j] = res["selectivity_mean"].values
    dims = ("head", "target")
    ds = xr.Dataset(
        {
            "score": (dims, out[0], {"units": "R2", "description": "cross-validated R2 of a ridge probe"}),
            "score_low": (dims, out[1], {"units": "R2", "description": "95% percentile bootstrap bound"}),
            "score_high": (dims, out[2], {"units": "R2", "description": "95% percentile bootstrap bound"}),
            "selectivity": (dims, out[3], {"units": "R2", "description": "R2 minus control-task R2"}),
        },
        coords=dict(head=np.arange(len(sites)), target=list(targets), site=("head", sites)),
    )
    ds["spread"] = (
        "head",
        [spread[s] for s in sites],
        {"units": "1", "description": "rms of the galaxy-to-galaxy differences of the probed features over their rms"},
    )
    ds.attrs.update(
        description=f"per-head probes in encoder block {block}",
        block=block,
        n_bootstrap=n_bootstrap,
        dtype=str(getattr(adapter, "dtype", torch.float32)).removeprefix("torch."),
    )
    return ds


def _image_token_moments(adapter: AIONRedshift, inp: StudyInputs, block: int, n_img: int, max_rows: int = 20000):
    """Per head of ``block``, from the image-token outputs (galaxies x tokens, dh) of the multimodal
    run, streamed in passes (:func:`rows_per_pass`) so only (tokens, dh) sums and a row sample are held:
    ``(sites, token_mean (n_img, dh), mean (dh,), rows)``; ``rows`` are every ``k``-th (galaxy, token)
    row, ``k = max(1, galaxies * n_img // max_rows)``, in galaxy-major order."""
    sites = adapter.head_sites(block)
    a0 = inp.n_scalar_tokens
    n = int(inp.multi[IMAGE_KEY].shape[0])
    step = max(1, n * n_img // max_rows)
    per = rows_per_pass(inp.multi)
    sums: dict[str, np.ndarray] = {}
    kept: dict[str, list[np.ndarray]] = {s: [] for s in sites}
    for start in range(0, n, per):
        part = {k: v[start : start + per] for k, v in inp.multi.items()}
        rec = record_blocks(adapter, part, sites, batch_size=per, reduce=lambda t: t[:, a0 : a0 + n_img].float())
        for s in sites:
            a = rec[s].values.astype(np.float64)  # (galaxies, n_img, dh)
            sums[s] = sums.get(s, 0.0) + a.sum(0)
            flat = a.reshape(-1, a.shape[-1])
            first = (-(start * n_img)) % step  # the first kept row of this pass
            kept[s].append(flat[first::step])
    token_mean = {s: sums[s] / n for s in sites}
    mean = {s: token_mean[s].mean(0) for s in sites}
    return sites, token_mean, mean, {s: np.concatenate(kept[s]) for s in sites}


def head_radial_structure(adapter: AIONRedshift, inp: StudyInputs, block: int, grid: int | None = None) -> xr.Dataset:
    """Each head's image-token output on the token grid and its radial organisation.

    For head h the image-token outputs (samples x tokens, dh) are projected on their first
    principal component; the mean projection per token is a (grid, grid) map. The radial
    score is |Spearman rho| between that map and the token's distance from the centre.
    """
    if IMAGE_KEY not in inp.multi:
        raise DataValidationError("head_radial_structure needs image tokens in the inputs.")
    n_img = inp.multi[IMAGE_KEY].shape[1]
    g = grid or int(round(np.sqrt(n_img)))
    yy, xx = np.mgrid[0:g, 0:g]
    r = np.hypot(yy - (g - 1) / 2, xx - (g - 1) / 2).ravel()
    sites, token_mean, mean, rows = _image_token_moments(adapter, inp, block, n_img)
    maps = np.zeros((len(sites), g, g))
    score = np.zeros(len(sites))
    for i, s in enumerate(sites):
        _, _, vt = np.linalg.svd(rows[s] - mean[s], full_matrices=False)
        m = (token_mean[s] - mean[s]) @ vt[0]  # the mean over galaxies of each token's PC1 projection
        if np.corrcoef(m, r)[0, 1] < 0:  # PC sign is arbitrary: orient to increase outward
            m = -m
        maps[i] = m.reshape(g, g)
        score[i] = abs(spearmanr(m, r).statistic)
    return xr.Dataset(
        {
            "map": (("head", "y", "x"), maps, {"description": "mean PC1 projection per image token"}),
            "radial_score": ("head", score, {"description": "|Spearman rho| of map vs token radius"}),
        },
        coords=dict(head=np.arange(len(sites)), site=("head", sites), y=np.arange(g), x=np.arange(g)),
        attrs={"block": block, "description": "radial structure of head image-token outputs"},
    )
