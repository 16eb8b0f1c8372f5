"""Ablation and activation patching at named sites, as composable context managers.

>>> with ablate(model, ["encoder.0.attn.heads[2]"], method="resample", reference=ref_x):  # doctest: +SKIP
...     y = model(x)
>>> res = patching_sweep(model, clean, corrupted, sites, metric=metrics.output())       # doctest: +SKIP
>>> res.normalized_effect.mean("sample")

Ablation methods (Miller, Chughtai & Saunders 2024: the choice changes conclusions, so
every result records it):

- ``"resample"`` (default): each sample's activation is replaced by that of a random
  reference sample (drawn with ``seed``), keeping it in distribution;
- ``"mean"``: the mean activation over the reference set (per position);
- ``"zero"``: zeros;
- ``"scale"``: multiplied by ``factor`` (amplify > 1, attenuate < 1).

Patching (Heimersheim & Nanda 2024): *denoising* runs the corrupted input with clean
activations patched in (is the site sufficient to restore the behaviour?); *noising* runs
the clean input with corrupted activations patched in (is it necessary?). Sweeps are
batched: the batch is tiled once per site and each tile gets its own site patched, so a
sweep over S sites costs about S/k forwards of k-fold batches rather than S forwards and
S host synchronisations. They also reuse the unpatched prefix (:mod:`scimech.prefix`):
the modules that finish before a site (in a block model, the blocks before the patched
one) are taken from the unpatched run instead of being computed again for every site.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
import xarray as xr
from torch import nn

from .ablation import AblationMethod, Method, check_reference, draw_rows, resolve_method
from .errors import DataValidationError
from .hooks import (
    HookSet,
    batch_size_of,
    check_fired,
    is_one_batch,
    iter_batches,
    run_forward,
    slice_batch,
    tile_batch,
)
from .metrics import Metric, as_metric
from .prefix import Shortcut, recording_reused, reusing, trace_calls
from .record import Recorder, _site_dims
from .sites import HeadLayout, ResolvedSite, resolve_site

__all__ = ["ablate", "patch", "ablation_sweep", "patching_sweep", "AblationMethod", "reference_activations",
           "normalized_effect"]



def _as_list(sites: str | Sequence[str]) -> list[str]:
    return [sites] if isinstance(sites, str) else list(sites)


def reference_activations(model: nn.Module, reference: Any, sites: Sequence[str], *, forward: Callable | None = None,
                          layouts: Mapping[str, HeadLayout] | None = None, batch_size: int = 256,
                          axes=None) -> dict[str, torch.Tensor]:
    """Activations at ``sites`` on reference inputs (for mean and resample ablation), in each
    site's canonical layout ``(sample, [window], *positions, feature)`` on the model's device."""
    sites = _as_list(sites)
    if isinstance(reference, Mapping) and all(s in reference for s in sites) and all(
        isinstance(reference[s], torch.Tensor) for s in sites
    ):
        return {s: reference[s] for s in sites}
    out: dict[str, list[torch.Tensor]] = {s: [] for s in sites}
    was = model.training
    model.eval()
    try:
        with torch.no_grad(), Recorder(model, sites, layouts=layouts, stop_early=True, axes=axes) as rec:
            for _, batch in iter_batches(reference, batch_size):
                rec.forward(batch, forward)
                rec.check_fired("reference activations for ablate")
                for s in sites:
                    out[s].append(rec.canonical[s])
    finally:
        model.train(was)
    return {s: torch.cat(v) for s, v in out.items()}


def _replacement(m: Method, site: ResolvedSite, current: torch.Tensor, ref: torch.Tensor | None,
                 factor: float | None, gen: torch.Generator | None, rows: torch.Tensor | None = None) -> torch.Tensor:
    """``m``'s replacement of one site's activation: resampling uses ``rows`` (reference rows,
    one per sample) when given, else a fresh draw from ``gen``."""
    if m.needs_reference:
        check_reference(site.name, ref, current)
        if m.name == "resample" and rows is None:
            rows = draw_rows(gen, ref.shape[0], current.shape[0])
    return m.replace(current, ref, factor, rows)


@contextmanager
def ablate(model: nn.Module, sites: str | Sequence[str], *, method: AblationMethod = "resample",
           reference: Any = None, factor: float | None = None, seed: int = 0, forward: Callable | None = None,
           layouts: Mapping[str, HeadLayout] | None = None, axes=None):
    """Ablate activations at ``sites`` for every forward pass inside the block.

    Parameters
    ----------
    model
        The model.
    sites
        Site strings (modules, units or heads).
    method
        ``"resample"`` (default), ``"mean"``, ``"zero"`` or ``"scale"``.
    reference
        For mean/resample: reference *inputs* (Tensor / dict, recorded here) or a dict
        ``{site: activations}`` already recorded.
    factor
        For ``"scale"``: the multiplier.
    seed
        Seed of the resampling draws.
    axes
        Activation layouts (:mod:`scimech.layout`), one string or a dict by site or module path.

    A module that runs several times in one forward pass is ablated at every call. Leaving
    the block raises :class:`~scimech.errors.SiteNeverRanError` if a site never ran in it:
    an ablation that never happened has no effect to report.
    """
    m = resolve_method(method, reference=reference, factor=factor, verb="ablate")
    sites = _as_list(sites)
    resolved = [resolve_site(model, s, layouts, axes) for s in sites]
    refs: dict[str, torch.Tensor] = {}
    if m.needs_reference:
        refs = reference_activations(model, reference, sites, forward=forward, layouts=layouts, axes=axes)
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def fn(site: ResolvedSite, t: torch.Tensor):
        cur = site.select(t)
        new = _replacement(m, site, cur, refs.get(site.name), factor, gen)
        return site.replace(t, new)

    with HookSet(resolved, fn, model=model) as hooks:
        yield
    hooks.check_fired("ablate")


@contextmanager
def patch(model: nn.Module, values: Mapping[str, torch.Tensor], layouts: Mapping[str, HeadLayout] | None = None,
          axes=None):
    """Set the activation at each site to the given tensor during the block.

    ``values[site]`` has the shape that :func:`~scimech.record.record` and
    :class:`~scimech.record.Recorder` give the site, in the model's axis order (``(B, N,
    head_dim)`` for one head of a transformer, ``(B, channel, y, x)`` for a CNN site). The
    values are written at every call of the site's module. Leaving the block raises
    :class:`~scimech.errors.SiteNeverRanError` if a site never ran in it.
    """
    resolved = [resolve_site(model, s, layouts, axes) for s in values]

    def fn(site: ResolvedSite, t: torch.Tensor):
        cur = site.select(t)
        perm = _site_dims(site, hooks.axes[site.name], cur.dim(), False)[1]   # canonical -> model order
        want = tuple(cur.shape[p] for p in perm)
        new = values[site.name]
        if tuple(new.shape) != want:
            raise DataValidationError(f"Patch for {site.name!r} has shape {tuple(new.shape)}; the site has {want} "
                                      "(the shape record() gives it).")
        inverse = [perm.index(i) for i in range(len(perm))]
        return site.replace(t, new.to(t.device).permute(inverse))

    with HookSet(resolved, fn, model=model) as hooks:
        yield
    hooks.check_fired("patch")


@contextmanager
def _tiled(model: nn.Module, resolved: Sequence[ResolvedSite], block: int, make: Callable, what: str):
    """Hooks where tile ``i`` (rows ``i*block:(i+1)*block``) gets ``make(i, site, current)``.

    Site ``i`` of ``resolved`` owns tile ``i``. Sites on the same module and port share one
    hook, which copies the tensor once and writes each site's tile in place. A site that
    never ran raises :class:`~scimech.errors.SiteNeverRanError` (``what``: the verb).
    """
    groups: dict[tuple[int, str], list[tuple[int, ResolvedSite]]] = {}
    rows = block * len(resolved)
    for i, site in enumerate(resolved):
        groups.setdefault((id(site.module), site.port), []).append((i, site))

    with ExitStack() as stack:
        hooksets = []
        for members in groups.values():
            def fn(_s: ResolvedSite, t: torch.Tensor, _members=members):
                if t.shape[0] != rows:
                    raise DataValidationError(
                        f"Site {_s.name!r} has a leading dim of {t.shape[0]}, but the tiled batch has {rows} rows. "
                        "Sweeps need activations batched on dim 0: use batch_first=True modules, or a forward= "
                        "that transposes sequence-first tensors."
                    )
                out = t.clone()
                for i, s in _members:
                    tile = out[i * block:(i + 1) * block]
                    s.assign_(tile, make(i, s, s.select(tile)))
                return out

            hooksets.append((stack.enter_context(HookSet([members[0][1]], fn)), members))
        yield
        for h, members in hooksets:
            check_fired({s.name: h.fired[members[0][1].name] for _, s in members}, what)


def _metric_values(metric: Metric, out: Any, target: Any) -> torch.Tensor:
    v = metric(out, target)
    if not isinstance(v, torch.Tensor) or v.dim() != 1:
        raise ValueError(f"The metric {metric.name!r} must return a 1-D tensor (one value per sample).")
    return v.detach().float().cpu()


def _full_target(target: Any, metric: Metric, n: int | None) -> Any:
    """The per-sample target of a sweep: ``target=``, else the metric's own ``reference``."""
    t = target if target is not None else getattr(metric, "reference", None)
    if t is not None and n is not None and len(t) != n:
        raise DataValidationError(f"target / metric reference has {len(t)} rows but the inputs have {n}; "
                                  "give one row per input sample.")
    return t


def _sites_per_forward(n_sites: int, batch: int, max_rows: int) -> int:
    return max(1, min(n_sites, max_rows // max(batch, 1)))


def _sweep_tiles(model: nn.Module, resolved: Sequence[ResolvedSite], batch: Any, b: int, make: Callable,
                 metric: Metric, tgt: Any, forward: Callable | None, k: int, row: torch.Tensor,
                 reuse: _Reuse | None = None, what: str = "patching_sweep") -> None:
    """Fill ``row[j]`` with the metric of the run where site ``j`` gets ``make(...)``,
    ``k`` sites per tiled forward (shared by the ablation and patching sweeps).

    With ``reuse``, sites are grouped by the modules they can take from the unpatched run
    (in a block model: by block), and each group's forwards reuse them (:mod:`scimech.prefix`).
    """
    groups: dict[Shortcut, list[int]] = {}
    for j, site in enumerate(resolved):
        groups.setdefault(reuse.plan[site.name] if reuse else Shortcut(), []).append(j)
    recorded = reuse.recorded if reuse else {}
    for shortcut, members in groups.items():
        for g in range(0, len(members), k):
            idx = members[g:g + k]
            group = [resolved[j] for j in idx]
            # reuse first, site hooks second: a site on a reused module patches its reused output
            n = len(group)
            with reusing(model, recorded, shortcut, n), _tiled(model, group, b, make, what):
                out = run_forward(model, tile_batch(batch, n) if n > 1 else batch, forward)
            vals = _metric_values(metric, out, tgt if tgt is None or n == 1 else tile_batch(tgt, n))
            row[idx] = vals.reshape(len(group), b)


@dataclass
class _Reuse:
    """What a sweep reuses: ``plan[site]``, and what was recorded for it in the current batch."""

    plan: dict[str, Shortcut]
    recorded: dict[tuple[str, str], Any] = field(default_factory=dict)

    def n_modules(self) -> int:
        return len({n for sc in self.plan.values() for n in sc.reused} |
                   {sc.resume.outer for sc in self.plan.values() if sc.resume is not None})


def _patch_sites(model: nn.Module, resolved: Sequence[ResolvedSite], base: Any, source: Mapping[str, torch.Tensor],
                 metric: Metric, tgt: Any, forward: Callable | None, max_rows: int,
                 reuse: _Reuse | None) -> torch.Tensor:
    """(site, sample) metric of the ``base`` batch with each site set to ``source[site]``."""
    b = batch_size_of(base)
    row = torch.empty(len(resolved), b, device="cpu")  # results, bound for numpy
    k = _sites_per_forward(len(resolved), b, max_rows)
    _sweep_tiles(model, resolved, base, b, lambda i, s, cur: source[s.name].to(cur.dtype), metric, tgt, forward, k,
                 row, reuse)
    return row


def _plan_reuse(model: nn.Module, batch: Any, resolved: Sequence[ResolvedSite], forward: Callable | None,
                enabled: bool) -> tuple[_Reuse | None, dict[str, Any]]:
    """Trace the model once and decide what each site's runs reuse; attrs saying which path runs."""
    if not enabled:
        return None, {"sweep_path": "batched", "sweep_path_note": "reuse_prefix=False"}
    try:
        trace = trace_calls(model, batch, forward)
    except Exception as err:  # the optimisation is off; the sweep itself reports real errors
        return None, {"sweep_path": "batched",
                      "sweep_path_note": f"tracing the model failed ({type(err).__name__}: {err})"}
    plan = {s.name: trace.shortcut(s) for s in resolved}
    if not any(plan.values()):
        return None, {"sweep_path": "batched", "sweep_path_note": "no module finishes before any site runs, so "
                      "nothing can be reused (not a sequence of blocks, or the sites come first)"}
    reuse = _Reuse(plan)
    n_resumed = sum(sc.resume is not None for sc in plan.values())
    return reuse, {"sweep_path": "prefix_reuse",
                   "sweep_path_note": f"{len(resolved)} sites in {len(set(plan.values()))} groups reuse the unpatched "
                                      f"run's outputs of {reuse.n_modules()} modules; {n_resumed} sites resume their "
                                      "enclosing module at the site"}


@contextmanager
def _capturing(model: nn.Module, reuse: _Reuse | None, rows: int):
    """Record the reused modules' outputs during the unpatched run of a batch."""
    if reuse is None:
        yield
        return
    with recording_reused(model, list(reuse.plan.values()), rows) as got:
        yield
    reuse.recorded = got


def ablation_sweep(model: nn.Module, inputs: Any, sites: Sequence[str], metric: Metric | Callable | None = None, *,
                   method: AblationMethod = "resample", reference: Any = None, factor: float | None = None,
                   forward: Callable | None = None, batch_size: int = 256, max_rows: int = 256, seed: int = 0,
                   layouts: Mapping[str, HeadLayout] | None = None, target: torch.Tensor | None = None,
                   reuse_prefix: bool = True, axes=None) -> xr.Dataset:
    """Ablate each site in turn and measure a per-sample metric.

    Parameters are those of :func:`ablate` and :func:`patching_sweep`; sites share
    tiled forward passes (``max_rows`` rows each) and reuse the unablated part of the
    forward pass (``reuse_prefix``) as in :func:`patching_sweep`. With
    ``method="resample"`` one draw of reference rows per batch serves every site.

    Returns
    -------
    xr.Dataset
        dims ``("site", "sample")``: ``baseline`` (no ablation, dim sample), ``ablated``,
        ``effect = ablated - baseline``; attrs ``method``, ``metric``, ``factor``, ``seed``,
        ``sweep_path``, ``sweep_path_note``.
    """
    m = resolve_method(method, reference=reference, factor=factor, verb="ablation_sweep")
    sites = _as_list(sites)
    metric = as_metric(metric)
    n_inputs = batch_size_of(inputs) if is_one_batch(inputs) else None
    target = _full_target(target, metric, n_inputs)
    resolved = [resolve_site(model, s, layouts, axes) for s in sites]
    refs = {}
    if m.needs_reference:
        refs = reference_activations(model, reference, sites, forward=forward, layouts=layouts, axes=axes)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    base_vals, abl_vals = [], []
    reuse, path = None, {}
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start, batch in iter_batches(inputs, batch_size):
                b = batch_size_of(batch)
                tgt = None if target is None else target[start:start + b]
                if start == 0:
                    reuse, path = _plan_reuse(model, batch, resolved, forward, reuse_prefix)
                with _capturing(model, reuse, b):
                    base_vals.append(_metric_values(metric, run_forward(model, batch, forward), tgt))
                row = torch.empty(len(sites), b, device="cpu")  # results, bound for numpy
                k = _sites_per_forward(len(sites), b, max_rows)
                # one resampling draw per batch, shared by every site: sample j is replaced by the
                # same reference sample at every site (a paired comparison across sites), and a
                # single-batch sweep equals ablate(model, site, seed=seed) site by site
                draws = {}
                if m.name == "resample":
                    sizes = {refs[s.name].shape[0] for s in resolved}
                    shared = draw_rows(gen, sizes.pop(), b) if len(sizes) == 1 else None
                    draws = {s.name: shared if shared is not None else draw_rows(gen, refs[s.name].shape[0], b)
                             for s in resolved}

                def make(i, s, cur, draws=draws):
                    return _replacement(m, s, cur, refs.get(s.name), factor, None, draws.get(s.name))

                _sweep_tiles(model, resolved, batch, b, make, metric, tgt, forward, k, row, reuse, "ablation_sweep")
                abl_vals.append(row)
    finally:
        model.train(was)
    baseline = torch.cat(base_vals).numpy()
    ablated = torch.cat(abl_vals, dim=1).numpy()
    ds = xr.Dataset(
        {
            "baseline": (("sample",), baseline, {"description": f"{metric.name} without ablation"}),
            "ablated": (("site", "sample"), ablated, {"description": f"{metric.name} with the site ablated"}),
            "effect": (("site", "sample"), ablated - baseline[None], {"description": "ablated - baseline"}),
        },
        coords={"site": sites, "sample": np.arange(baseline.shape[0])},
        attrs={"method": method, "metric": metric.name, "factor": "None" if factor is None else float(factor),
               "seed": seed, "description": "ablation sweep", **path},
    )
    return ds


def _patching_inputs(model: nn.Module, clean: Any, corrupted: Any, sites: Sequence[str], metric, direction: str,
                     target: Any, layouts: Mapping[str, HeadLayout] | None, axes=None):
    """Checked arguments of a patching run: ``(sites, metric, n, target, resolved sites)``."""
    if direction not in ("denoising", "noising"):
        raise ValueError(f"direction must be 'denoising' or 'noising'; got {direction!r}.")
    sites = _as_list(sites)
    metric = as_metric(metric)
    n_clean, n_corr = batch_size_of(clean), batch_size_of(corrupted)
    if n_clean != n_corr:
        raise DataValidationError(f"clean has {n_clean} rows and corrupted {n_corr}; patching needs pairs.")
    target = _full_target(target, metric, n_clean)
    return sites, metric, n_clean, target, [resolve_site(model, s, layouts, axes) for s in sites]


def normalized_effect(patched: np.ndarray, clean: np.ndarray, corrupted: np.ndarray) -> np.ndarray:
    """``(patched - corrupted) / (clean - corrupted)`` per (site, sample); NaN where clean == corrupted."""
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = clean - corrupted
        return np.where(np.abs(denom) > 0, (patched - corrupted[None]) / denom[None], np.nan)


def patching_sweep(model: nn.Module, clean: Any, corrupted: Any, sites: Sequence[str],
                   metric: Metric | Callable | None = None, *, direction: Literal["denoising", "noising"] = "denoising",
                   forward: Callable | None = None, batch_size: int = 64, max_rows: int = 256,
                   target: torch.Tensor | None = None, layouts: Mapping[str, HeadLayout] | None = None,
                   reuse_prefix: bool = True, axes=None) -> xr.Dataset:
    """Activation patching at each site, in one direction.

    Parameters
    ----------
    clean, corrupted
        Paired inputs (same number of rows; row i of each is one counterfactual pair).
    sites
        Site strings (modules, ports, units, heads); every input and activation is batched
        on dim 0.
    metric
        ``metric(output, target=None) -> (B,)`` (see :mod:`scimech.metrics`); default the
        mean output.
    direction
        ``"denoising"``: run corrupted, patch in clean activations (sufficiency);
        ``"noising"``: run clean, patch in corrupted activations (necessity).
    forward
        ``forward(model, batch)`` for models that need more than ``model(batch)``.
    batch_size
        Sample rows per block.
    max_rows
        Rows of one tiled forward pass: ``max_rows // batch_size`` sites share a pass (at
        least one). Larger suits GPUs; the default keeps CPU passes cache-sized.
    target
        Per-sample targets (one row per sample) for metrics that need them.
    layouts
        Extra head layouts.
    axes
        Activation layouts (:mod:`scimech.layout`): one string, or a dict by site or module path.
    reuse_prefix
        Take from the unpatched run the outputs of every module that finished before a
        site (in a model made of blocks: the blocks before the patched one), so that each
        patched forward pass only computes from the site on (:mod:`scimech.prefix`). Sites
        are then grouped by block. The results are those of full forward passes up to
        float rounding; ``False`` runs every patched pass in full. The reused outputs of
        one batch are held in memory (about one activation per block).

    Returns
    -------
    xr.Dataset
        dims ``("site", "sample")``: ``clean``, ``corrupted`` (metric of each unpatched run,
        dim sample), ``patched``, ``effect`` (patched minus the unpatched run of the
        direction) and ``normalized_effect = (patched - corrupted) / (clean - corrupted)``
        (1: the clean behaviour, 0: the corrupted one; NaN where clean == corrupted);
        attrs ``method``, ``direction``, ``metric``, ``sweep_path`` (``"prefix_reuse"`` or
        ``"batched"``: which path ran) and ``sweep_path_note`` (what was reused, or why not).
    """
    sites, metric, n_clean, target, resolved = _patching_inputs(model, clean, corrupted, sites, metric, direction,
                                                                target, layouts, axes)
    clean_v, corr_v, patched_v = [], [], []
    reuse, path = None, {}
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, n_clean, batch_size):
                stop = min(start + batch_size, n_clean)
                cb, xb = slice_batch(clean, start, stop), slice_batch(corrupted, start, stop)
                b = stop - start
                tgt = None if target is None else target[start:stop]
                src, base = (cb, xb) if direction == "denoising" else (xb, cb)
                if start == 0:
                    reuse, path = _plan_reuse(model, base, resolved, forward, reuse_prefix)
                with Recorder(model, resolved) as rec:         # the activations patched in
                    out_src = _metric_values(metric, run_forward(model, src, forward), tgt)
                source = dict(rec.canonical)
                rec.check_fired("patching_sweep")
                with _capturing(model, reuse, b):              # the run patched into
                    out_base = _metric_values(metric, run_forward(model, base, forward), tgt)
                clean_v.append(out_src if direction == "denoising" else out_base)
                corr_v.append(out_base if direction == "denoising" else out_src)
                patched_v.append(_patch_sites(model, resolved, base, source, metric, tgt, forward, max_rows, reuse))
    finally:
        model.train(was)
    c = torch.cat(clean_v).numpy()
    x = torch.cat(corr_v).numpy()
    p = torch.cat(patched_v, dim=1).numpy()
    base = x if direction == "denoising" else c
    norm = normalized_effect(p, c, x)
    return xr.Dataset(
        {
            "clean": (("sample",), c, {"description": f"{metric.name} on the clean input"}),
            "corrupted": (("sample",), x, {"description": f"{metric.name} on the corrupted input"}),
            "patched": (("site", "sample"), p, {"description": f"{metric.name} with the site patched"}),
            "effect": (("site", "sample"), p - base[None], {"description": "patched minus the unpatched run"}),
            "normalized_effect": (("site", "sample"), norm,
                                  {"description": "(patched - corrupted) / (clean - corrupted)"}),
        },
        coords={"site": sites, "sample": np.arange(c.shape[0])},
        attrs={"method": "activation_patching", "direction": direction, "metric": metric.name,
               "description": "denoising: corrupted run with clean activations (sufficiency); "
                              "noising: clean run with corrupted activations (necessity)", **path},
    )
