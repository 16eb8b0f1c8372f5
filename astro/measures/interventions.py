"""Step 3 (interventions): zero / mean / resample ablation and photometry-only -> multimodal
patching of every head of a block (``scimech.causal.intervene``), chunk by chunk over the test
galaxies (the unit of resumable work), and the effects per population with bootstrap intervals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
import xarray as xr

from scimech.analysis.stats import bootstrap_ci
from scimech.causal.intervene import ablation_sweep, patching_sweep, reference_activations
from scimech.errors import DataValidationError

from .. import photoz
from ..models.aion import IMAGE_KEY, LEGACY_SCALARS, MASK_PREFIX, AIONRedshift, rows_per_pass
from .assumptions import ATTR, measure_site_profile
from .inputs import StudyInputs

__all__ = [
    "chunk_bounds",
    "chunk_seed",
    "slice_batch",
    "intervention_chunk",
    "intervention_chunks",
    "summarise_interventions",
    "head_interventions",
    "at_block",
    "HEAD_STUDY",
]

#: the datasets of the head study, one slice per encoder block along ``block``
HEAD_STUDY = ("head_probes", "radial", "interventions", "bias")


def at_block(res: Mapping[str, xr.Dataset], block: int) -> dict[str, xr.Dataset]:
    """The study's datasets with the head study (:data:`HEAD_STUDY`) read in one encoder block.

    The head study runs in every block (a ``block`` dimension); findings 3 and 4 read the block the
    layer probes localise the gain to, the planted-truth rows the block the heads were planted in.
    Datasets without a ``block`` dimension (one block studied, or results saved before every
    block was) are returned as they are; a block not studied raises.
    """
    out = dict(res)
    for name in HEAD_STUDY:
        ds = res.get(name)
        if ds is None or "block" not in ds.dims:
            continue
        if int(block) not in ds["block"].values:
            raise DataValidationError(
                f"the head study ran in blocks {ds['block'].values.tolist()}, not in block {block}; "
                "rerun without --block to study every block."
            )
        one = ds.sel(block=int(block)).drop_vars("block")
        one.attrs = dict(ds.attrs, block=int(block))
        out[name] = one
    return out


def _blocks(block: int | Sequence[int]) -> tuple[list[int], bool]:
    """The blocks of an intervention request and whether it asked for several (a ``block`` dimension)."""
    if isinstance(block, (int, np.integer)):
        return [int(block)], False
    blocks = [int(b) for b in block]
    if not blocks:
        raise DataValidationError("no encoder block to intervene on; give a block number or a list of them.")
    return blocks, True


def chunk_bounds(n: int, chunk_size: int | None) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``range(n)`` in chunks of ``chunk_size`` (None: one chunk)."""
    if n <= 0:
        raise DataValidationError(f"no test galaxies to intervene on (n = {n}).")
    size = n if not chunk_size else int(chunk_size)
    if size <= 0:
        raise DataValidationError(f"chunk_size must be a positive number of galaxies; got {chunk_size}.")
    return [(a, min(a + size, n)) for a in range(0, n, size)]


def chunk_seed(seed: int, start: int) -> int:
    """Seed of the resampling draws of the chunk that starts at galaxy ``start``.

    Each chunk draws its own reference rows (seeded by the study seed and its first row),
    so a chunk's result depends only on the chunk, never on which worker ran it or on the
    other chunks; a single chunk starting at 0 uses ``seed`` itself.
    """
    return int(seed) + int(start)


def slice_batch(batch: Mapping[str, torch.Tensor], start: int, stop: int) -> dict[str, torch.Tensor]:
    """Rows ``start:stop`` of a flat batch dict."""
    return {k: v[start:stop] for k, v in batch.items()}


def intervention_chunk(
    adapter: AIONRedshift,
    multi: Mapping[str, torch.Tensor],
    phot: Mapping[str, torch.Tensor],
    reference: Mapping[str, torch.Tensor],
    block: int | Sequence[int],
    *,
    methods: Sequence[str] = ("zero", "mean", "resample"),
    seed: int = 0,
    batch_size: int = 256,
    start: int = 0,
    site_profile: bool | None = None,
) -> xr.Dataset:
    """Expected redshift of one catalogue chunk with each head of ``block`` intervened (a list of
    blocks: every head of each, all in one sweep per method, with a ``block`` dimension).

    The unit of work of the head study: chunks are independent, so they run anywhere
    (``scimech.run.parallel.map_units``) and are concatenated along ``sample``.

    Every ablation runs in both modes (the same replacement values and resampling draws),
    so the multimodal advantage *with the head ablated* can be compared with the advantage
    itself: a head that only serves the photometry costs both modes alike and leaves the
    advantage, a head that carries the image removes it.

    Returns
    -------
    xr.Dataset
        ``z_ablated`` (intervention, head, sample): the multimodal run with ``methods``
        ablations plus ``"patch"`` (the head's activation from the photometry-only run,
        i.e. noising); ``z_ablated_phot``: the photometry-only run with the same ablations
        (for ``"patch"`` the photometry-only run itself); ``z_multi``, ``z_phot`` (sample).
        ``sample`` counts from ``start``. With ``site_profile`` (default: the chunk that starts
        at galaxy 0, so once per study) the attribute :data:`astro.measures.assumptions.ATTR`
        holds what the verbs assumed about the model at the head sites, measured after them on
        the first batch they ran per input signature (:func:`~astro.measures.assumptions.measure_site_profile`).
    """
    blocks, several = _blocks(block)
    per_block = [adapter.head_sites(b) for b in blocks]
    sites = [s for ss in per_block for s in ss]
    metric = adapter.z_metric()
    model, fwd = adapter.model, adapter.forward
    batch_size = rows_per_pass(multi, batch_size)  # galaxies (rows) per forward pass: bounded tokens
    # the reference activations once for every method and both modes
    refs = (
        reference_activations(model, dict(reference), sites, forward=fwd, batch_size=batch_size)
        if any(m in ("mean", "resample") for m in methods)
        else {}
    )
    # photometry only with the image tokens dropped instead of masked: the same output (AION never
    # attends to a masked token) for a fifth of the tokens; the catalogue tokens come first, so their
    # reference activations are the first positions of the multimodal ones
    keys = [k for k in phot if not k.startswith(MASK_PREFIX)]
    n_cat = sum(1 for k in keys if k in LEGACY_SCALARS)
    if keys[:n_cat] == [k for k in keys if k in LEGACY_SCALARS] and IMAGE_KEY in keys:
        phot_run = {k: v for k, v in phot.items() if k not in (IMAGE_KEY, MASK_PREFIX + IMAGE_KEY)}
        refs_phot = {s: r[:, :n_cat] for s, r in refs.items()}
    else:
        phot_run, refs_phot = dict(phot), refs
    zs, zs_phot, base, phot_base = [], [], None, None
    for method in methods:
        for batch, ref, out in ((multi, refs, zs), (phot_run, refs_phot, zs_phot)):
            ds = ablation_sweep(
                model,
                dict(batch),
                sites,
                metric,
                method=method,
                reference=ref or None,
                forward=fwd,
                batch_size=batch_size,
                max_rows=batch_size,
                seed=chunk_seed(seed, start),
            )
            out.append(ds["ablated"].values)
            if batch is multi:
                base = ds["baseline"].values
            else:
                phot_base = ds["baseline"].values
    pt = patching_sweep(
        model,
        dict(multi),
        dict(phot),
        sites,
        metric,
        direction="noising",
        forward=fwd,
        batch_size=batch_size,
        max_rows=batch_size,
    )
    zs.append(pt["patched"].values)
    z_phot = pt["corrupted"].values
    phot_base = z_phot if phot_base is None else phot_base
    zs_phot.append(np.broadcast_to(phot_base, zs[-1].shape))
    z_multi = pt["clean"].values if base is None else base
    n = len(z_multi)
    attrs = {
        "block": blocks if several else blocks[0],
        "seed": seed,
        "chunk_start": start,
        "description": "per-head interventions, one chunk",
    }
    if (start == 0) if site_profile is None else site_profile:
        attrs[ATTR] = measure_site_profile(
            model,
            {"multimodal": slice_batch(multi, 0, batch_size), "photometry only": slice_batch(phot_run, 0, batch_size)},
            sites,
            fwd,
        )
    nh = len(per_block[0])
    if several:
        zs = [z.reshape(len(blocks), nh, -1) for z in zs]
        zs_phot = [z.reshape(len(blocks), nh, -1) for z in zs_phot]
        head_dims: tuple[str, ...] = ("block", "head")
        extra = dict(block=blocks, site=(head_dims, np.array(per_block, dtype=object).reshape(len(blocks), nh)))
    else:
        head_dims, extra = ("head",), dict(site=("head", sites))
    return xr.Dataset(
        {
            "z_ablated": (
                ("intervention", *head_dims, "sample"),
                np.stack(zs),
                {"description": "expected z, photometry + image, with the head intervened"},
            ),
            "z_ablated_phot": (
                ("intervention", *head_dims, "sample"),
                np.stack(zs_phot),
                {"description": "expected z, photometry only, with the head intervened alike"},
            ),
            "z_phot_base": (
                "sample",
                phot_base,
                {"description": "expected z, photometry only, the run z_ablated_phot intervenes on"},
            ),
            "z_multi": ("sample", z_multi, {"description": "expected z, photometry + image"}),
            "z_phot": ("sample", z_phot, {"description": "expected z, photometry only"}),
        },
        coords=dict(
            intervention=[*methods, "patch"],
            head=np.arange(nh),
            sample=np.arange(start, start + n),
            **extra,
        ),
        attrs=attrs,
    )


def _mean_ci(values: np.ndarray, n_bootstrap: int, seed: int) -> tuple[float, float, float]:
    """Mean of per-galaxy values and its percentile bootstrap interval (exact zeros stay (0, 0, 0))."""
    v = np.asarray(values, float)
    if v.size < 2 or not n_bootstrap:
        m = float(v.mean()) if v.size else np.nan
        return m, np.nan, np.nan
    return bootstrap_ci(v, np.mean, n_resamples=n_bootstrap, seed=seed, method="percentile")


def summarise_interventions(
    raw: xr.Dataset, z: np.ndarray, populations: Mapping[str, np.ndarray], *, n_bootstrap: int = 200, seed: int = 0
) -> xr.Dataset:
    """Effects per population, with bootstrap intervals, from the chunks of :func:`intervention_chunk`.

    Adds, over (intervention, head, population):

    * ``delta_abs_dz`` (+ ``_low``/``_high``): change of the multimodal mean|dz| caused by the
      intervention (positive: worse), a paired bootstrap over galaxies;
    * ``advantage_lost`` (+ ``_low``/``_high``): the multimodal advantage minus the advantage
      left when both modes get the intervention, ``(|dz|_p - |dz|_m) - (|dz|_p' - |dz|_m')``
      averaged over galaxies (primes: intervened): the part of the image's gain that passes
      through the head (its causal effect on the advantage; 0 for a head that only serves the
      photometry or serves nothing). NaN for chunks saved before ``z_ablated_phot`` existed;
    * ``advantage_left``: ``(mean|dz|_phot - mean|dz|_intervened) / (mean|dz|_phot - mean|dz|_multi)``
      (the multimodal run intervened against the untouched photometry-only run; 1: intact,
      <= 0: removed).

    With a ``block`` dimension (every block's heads), each block is summarised alike and the
    effects gain that dimension.
    """
    if "block" in raw.dims:
        parts = [
            summarise_interventions(raw.sel(block=b), z, populations, n_bootstrap=n_bootstrap, seed=seed)
            for b in raw["block"].values
        ]
        out = xr.concat(parts, "block", data_vars="all", coords="different", compat="equals", join="override")
        for v in ("z_multi", "z_phot", "z_phot_base"):
            if v in out and "block" in out[v].dims:
                out[v] = out[v].isel(block=0, drop=True)
        out.attrs = dict(parts[0].attrs, blocks=[int(b) for b in raw["block"].values])
        return out
    if raw.sizes["sample"] != len(z) or not np.array_equal(raw["sample"].values, np.arange(len(z))):
        raise DataValidationError(
            f"intervention chunks cover samples {raw['sample'].values[:3]}... "
            f"({raw.sizes['sample']}), the test set has {len(z)}: a chunk is missing or repeated."
        )
    zab = raw["z_ablated"].values
    adz = np.abs((zab - z) / (1 + z))
    adz_m = np.abs(photoz.dz(z, raw["z_multi"].values))
    adz_p = np.abs(photoz.dz(z, raw["z_phot"].values))
    adz_pi = np.abs((raw["z_ablated_phot"].values - z) / (1 + z)) if "z_ablated_phot" in raw else None
    adz_pb = np.abs(photoz.dz(z, raw["z_phot_base"].values)) if "z_phot_base" in raw else adz_p
    pops = list(populations)
    shape = zab.shape[:2] + (len(pops),)
    delta, left = np.zeros(shape), np.zeros(shape)
    d_ci = np.full(shape + (2,), np.nan)
    lost = np.full(shape + (3,), np.nan)
    for k, p in enumerate(pops):
        m = np.asarray(populations[p], bool)
        delta[..., k] = adz[..., m].mean(-1) - adz_m[m].mean()
        adv = adz_p[m].mean() - adz_m[m].mean()
        left[..., k] = (adz_p[m].mean() - adz[..., m].mean(-1)) / adv if abs(adv) > 1e-12 else np.nan
        for i in range(shape[0]):
            for h in range(shape[1]):
                d_ci[i, h, k] = _mean_ci(adz[i, h, m] - adz_m[m], n_bootstrap, seed)[1:]
                if adz_pi is not None:
                    lost[i, h, k] = _mean_ci(
                        (adz_pb[m] - adz_m[m]) - (adz_pi[i, h, m] - adz[i, h, m]), n_bootstrap, seed
                    )
    out = raw.drop_vars("sample").assign_coords(population=pops)
    dims = ("intervention", "head", "population")
    out["delta_abs_dz"] = (
        dims,
        delta,
        {"description": "mean|dz| intervened minus multimodal", "units": "dimensionless"},
    )
    out["delta_abs_dz_low"] = (dims, d_ci[..., 0], {"description": "95% percentile bootstrap bound"})
    out["delta_abs_dz_high"] = (dims, d_ci[..., 1], {"description": "95% percentile bootstrap bound"})
    out["advantage_lost"] = (
        dims,
        lost[..., 0],
        {
            "description": "multimodal advantage minus the advantage with the head intervened in both modes",
            "units": "dimensionless",
        },
    )
    out["advantage_lost_low"] = (dims, lost[..., 1], {"description": "95% percentile bootstrap bound"})
    out["advantage_lost_high"] = (dims, lost[..., 2], {"description": "95% percentile bootstrap bound"})
    out["advantage_left"] = (dims, left, {"description": "fraction of the multimodal advantage left"})
    out = out.assign_coords(sample=np.arange(len(z)))
    out.attrs = {k: raw.attrs[k] for k in ("block", "seed") if k in raw.attrs and np.ndim(raw.attrs[k]) == 0}
    out.attrs.update(
        n_bootstrap=int(n_bootstrap),
        description=(
            "per-head ablation (zero/mean/resample) and patching (photometry-only activations into the multimodal run)"
        ),
    )
    return out


def head_interventions(
    adapter: AIONRedshift,
    inp: StudyInputs,
    block: int,
    *,
    methods: Sequence[str] = ("zero", "mean", "resample"),
    seed: int = 0,
    batch_size: int = 256,
    chunk_size: int | None = None,
    n_bootstrap: int = 200,
) -> xr.Dataset:
    """Per-head ablations and photometry-only -> multimodal patching; redshift per head.

    Runs :func:`intervention_chunk` over chunks of ``chunk_size`` test galaxies (default:
    one chunk) in this process and summarises them (:func:`summarise_interventions`); the
    study CLI maps the same chunks over Dask workers instead.

    Returns
    -------
    xr.Dataset
        ``z_ablated`` (intervention, head, sample) where ``intervention`` includes ``"patch"``;
        ``z_ablated_phot``, ``z_multi``, ``z_phot``; ``delta_abs_dz``, ``advantage_lost`` (with
        bootstrap bounds) and ``advantage_left`` (intervention, head, population).
    """
    return summarise_interventions(
        intervention_chunks(
            adapter, inp, block, methods=methods, seed=seed, batch_size=batch_size, chunk_size=chunk_size
        ),
        inp.z,
        inp.populations,
        n_bootstrap=n_bootstrap,
        seed=seed,
    )


def intervention_chunks(
    adapter: AIONRedshift,
    inp: StudyInputs,
    block: int | Sequence[int],
    *,
    methods: Sequence[str] = ("zero", "mean", "resample"),
    seed: int = 0,
    batch_size: int = 256,
    chunk_size: int | None = None,
) -> xr.Dataset:
    """:func:`intervention_chunk` over chunks of ``chunk_size`` test galaxies (default: one chunk),
    here, concatenated along ``sample``; the attributes are the first chunk's (its site profile)."""
    chunks = [
        intervention_chunk(
            adapter,
            slice_batch(inp.multi, a, b),
            slice_batch(inp.phot, a, b),
            inp.reference,
            block,
            methods=methods,
            seed=seed,
            batch_size=batch_size,
            start=a,
        )
        for a, b in chunk_bounds(len(inp.z), chunk_size)
    ]
    return xr.concat(chunks, "sample", combine_attrs="override")
