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
S host synchronisations. They also reuse the unpatched prefix (:mod:`scimech.causal.prefix_reuse`):
the modules that finish before a site (in a block model, the blocks before the patched
one) are taken from the unpatched run instead of being computed again for every site.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import numpy as np
import torch
import xarray as xr
from torch import nn

from scimech.capture.batches import (
    batch_size_of,
    is_one_batch,
    iter_batches,
    n_samples_of,
    slice_batch,
)
from scimech.capture.calls import CallPolicy, Calls, current_pass
from scimech.capture.record import Recorder, site_dims
from scimech.capture.session import Session
from scimech.capture.sites import HeadLayout, ResolvedSite, resolve_site, site_coords
from scimech.causal.ablation import AblationMethod, Method, check_reference, resolve_method
from scimech.causal.metrics import Metric, as_metric
from scimech.causal.samples import (
    FixedMesh,
    Samples,
    check_batching,
    check_mesh,
    mesh_nodes,
    reference_chunk,
    sample_index,
)
from scimech.causal.sweep import (
    Setter,
    normalized_effect,
    patching_inputs,
    site_list,
    source_setter,
    sweep_batches,
    sweep_target,
)
from scimech.errors import DataValidationError

__all__ = [
    "ablate",
    "patch",
    "ablation_sweep",
    "patching_sweep",
    "AblationMethod",
    "reference_activations",
    "normalized_effect",
]


def _given_activations(reference: Any, sites: Sequence[str]) -> bool:
    """Whether ``reference`` is activations already recorded for every site: ``{site: tensor}``,
    ``{site: DataArray}`` or the Dataset that :func:`~scimech.capture.record.record` returned."""
    return isinstance(reference, (Mapping, xr.Dataset)) and all(
        isinstance(reference.get(s), (torch.Tensor, xr.DataArray)) for s in sites
    )


#: the dims of a recorded activation that make up its feature axis (last in the canonical layout)
_FEATURE_DIMS = ("feature", "channel", "head", "head_dim")


def _canonical_recorded(value: torch.Tensor | xr.DataArray, site: str) -> torch.Tensor:
    """A recorded activation in the canonical layout ``(sample, [call], [window], *positions,
    feature)``: a DataArray from :func:`~scimech.capture.record.record` is read by its dims (stored in the
    model's order, ``sample, channel, y, x`` for a channels-first site, even where channel, y and x
    have one size); a tensor is taken as canonical already."""
    if not isinstance(value, xr.DataArray):
        return value
    base = [str(d).split("/", 1)[1] if str(d).startswith(f"{site}/") else str(d) for d in value.dims]
    if not base or base[0] != "sample":
        raise DataValidationError(
            f"reference[{site!r}]: a DataArray of recorded activations has 'sample' as its first "
            f"dim, as record() gives it; got dims {tuple(value.dims)}."
        )
    lead = [i for i, d in enumerate(base) if d in ("sample", "call")]
    feat = [i for i, d in enumerate(base) if d in _FEATURE_DIMS]
    pos = [i for i in range(len(base)) if i not in lead and i not in feat]
    return torch.from_numpy(np.ascontiguousarray(value.values.transpose(lead + pos + feat)))


def reference_activations(
    model: nn.Module,
    reference: Any,
    sites: Sequence[str],
    *,
    forward: Callable | None = None,
    layouts: Mapping[str, HeadLayout] | None = None,
    batch_size: int = 256,
    axes=None,
    calls: Calls = "error",
    verb: str = "reference_activations",
) -> dict[str, torch.Tensor]:
    """Activations at ``sites`` on reference inputs (for mean and resample ablation), in each
    site's canonical layout ``(sample, [window], *positions, feature)`` on the model's device.

    ``calls`` (:mod:`scimech.capture.calls`): for a site that runs several times per forward pass,
    which calls to record; with ``"all"`` or a list the activations get a call axis (dim 1),
    so that each call is replaced by the reference's same call. ``verb``: the name its messages
    start with (the verb it serves)."""
    sites = site_list(sites)
    out: dict[str, list[torch.Tensor]] = {s: [] for s in sites}
    with Session(model, verb, reference, calls=calls, forward=forward, rows_are_samples=True) as ses:
        policy = ses.calls
        if _given_activations(reference, sites):
            return {s: _canonical_recorded(reference[s], s) for s in sites}
        with Recorder(model, sites, layouts=layouts, stop_early=True, axes=axes, calls=policy, verb=verb) as rec:
            for _, batch in iter_batches(reference, batch_size):
                # under no_grad, unless the forward takes gradients itself (the model's profile)
                ses.run(batch, functools.partial(rec.forward, batch, forward))
                ses.fired(rec)
                for s in sites:
                    out[s].append(rec.canonical[s])
    if policy.stacked:
        counts = {s: sorted({t.shape[1] for t in v}) for s, v in out.items()}
        varying = {s: c for s, c in counts.items() if len(c) > 1}
        if varying:
            raise DataValidationError(
                f"Reference inputs ran the site(s) {list(varying)} a different number of times per batch ({varying}; "
                "a number of calls that depends on the data, e.g. an adaptive solver's steps), so there is no "
                "reference for each call. Give the reference as one batch, fixed call indices (calls=k), or "
                "reference activations {site: tensor} shaped like one call (used at every call)."
            )
    return {s: torch.cat(v) for s, v in out.items()}


def _references(
    s: Session, m: Method, reference: Any, sites: Sequence[str], layouts, axes, calls: CallPolicy
) -> dict[str, torch.Tensor]:
    """The reference activations a method needs (none for zero and scale), recorded at ``calls``."""
    if not m.needs_reference:
        return {}
    return reference_activations(
        s.model,
        reference,
        sites,
        forward=s.forward,
        layouts=layouts,
        axes=axes,
        batch_size=reference_chunk(reference, s.samples),
        calls=calls,
        verb=f"{s.verb} (its reference activations)",
    )


def _ref_at(ref: torch.Tensor | None, cur: torch.Tensor, policy: CallPolicy | None, call: int, site: str):
    """The reference for call ``call`` of a site: ``ref`` itself when it is shaped like one call,
    else its call axis (dim 1) at the position of ``call`` among the calls recorded."""
    if ref is None or policy is None or not policy.stacked or ref.dim() != cur.dim() + 1:
        return ref
    pos = call if policy.mode == "all" else (policy.indices.index(call) if call in policy.indices else -1)
    if not 0 <= pos < ref.shape[1]:
        raise DataValidationError(
            f"Site {site!r}: the reference has {ref.shape[1]} call(s) but this forward pass reached call {call} (a "
            "number of calls that depends on the data). Use fixed call indices (calls=k), or reference "
            "activations {site: tensor} shaped like one call."
        )
    return ref[:, pos]


def _mesh_fix_checked(s: Session, reference: Any, sites: Sequence[str]) -> str:
    """Where ``samples=FixedMesh(nodes)`` meets reference inputs whose rows are samples (a grid per row)
    and the model builds the mesh itself: the refusal's fix (``samples=`` dropped, the site's rows
    declared packed sample by sample) checked on the reference's first samples, site by site: whether
    the site holds ``nodes`` rows per sample, packed sample by sample (the profile's packing check: the
    first half of the samples alone gives the site's first rows). What was found, for the message
    (``""``: it could not be checked)."""
    nodes = mesh_nodes(s.samples)
    try:
        first = slice_batch(reference, 0, min(n_samples_of(reference), 8))
        rows = batch_size_of(first)
        plain = [resolve_site(s.model, name) for name in sites]
        prof = s.check(first, {"sites"}, sites=plain)
    except Exception:  # noqa: BLE001 - not told: the refusal stands as it is
        return ""
    found = []
    for r in plain:
        shapes = prof.sites[r.name].shapes if r.name in prof.sites else []
        if not shapes or len(shapes[0]) < 2 or shapes[0][0] != rows * nodes:
            got = f"{shapes[0][0]} rows" if shapes and shapes[0] else "no rows"
            found.append(
                f"site {r.name!r} gives {got} for {rows} samples, not {rows} x {nodes}: the layout does not apply"
            )
            continue
        tail = " ".join([*(f"position_{i}" for i in range(1, len(shapes[0]) - 1)), "feature"])
        layout = f"batch*window {tail}"
        try:
            packed = resolve_site(s.model, r.name, axes={r.name: layout})
            prof = s.check(first, {"packing"}, sites=[packed])
            packing = prof.sites[r.name].packing or "not checked"
        except Exception as e:  # noqa: BLE001 - shown, not raised: the refusal is raised by the caller
            packing = f"not checked ({type(e).__name__})"
        found.append(
            f"site {r.name!r} holds {rows} x {nodes} rows for {rows} samples, {packing}"
            + (f": axes={{{r.name!r}: {layout!r}}} works" if packing == "sample by sample" else "")
        )
    return f"Checked on the first {rows} reference samples: " + "; ".join(found) + "."


def _check_samples(s: Session, m: Method, reference: Any, sites: Sequence[str]) -> None:
    """Mean and resample treat the rows of the reference and the run as samples: check it."""
    if not m.needs_reference:
        return
    verb, samples = s.verb, s.samples
    given = _given_activations(reference, sites)
    if not given:
        try:
            check_mesh(reference, samples, verb, "reference inputs")
        except DataValidationError as err:
            checked = _mesh_fix_checked(s, reference, sites)
            if checked:
                raise DataValidationError(f"{err} {checked}") from None
            raise
    if samples is None and not given and is_one_batch(reference):
        n = n_samples_of(reference)
        first = slice_batch(reference, 0, min(n, 64))
        # drift first (it would look like rows that interact), then the rows: once per model and signature
        s.check(first, {"repeatable", "rows"}, why=f"method={m.name!r} (averaging or swapping rows as samples)")
    if m.draws_rows and not isinstance(samples, FixedMesh):
        idx: torch.Tensor | None
        if isinstance(samples, torch.Tensor):
            idx = samples
        elif is_one_batch(reference) and not given:
            idx = sample_index(reference, samples)
        else:
            idx = None
        if idx is not None and idx.unique().numel() != idx.numel():
            raise DataValidationError(
                f"{verb}: method={m.name!r} with samples of several rows each (graphs, point clouds) would have to "
                "match rows between samples of different sizes and orders; it is not available. Use method='mean' "
                "(the mean over every reference row) or method='zero'; where every sample is the same mesh, pass "
                "samples=scimech.FixedMesh(nodes) to swap whole samples node for node."
            )


def _replacement(
    m: Method,
    site: ResolvedSite,
    current: torch.Tensor,
    ref: torch.Tensor | None,
    factor: float | None,
    gen: torch.Generator | None,
    rows: torch.Tensor | None = None,
    nodes: int = 1,
) -> torch.Tensor:
    """``m``'s replacement of one site's activation: a method that draws reference rows uses
    ``rows`` (one per row) when given, else draws afresh from ``gen``; ``nodes``: rows per
    sample of a fixed mesh."""
    m.check_dtype(site.name, current)
    if nodes > 1 and site.axes is not None and (site.axes.unbatched or site.axes.windowed):
        raise DataValidationError(
            f"{site.name!r}: samples=FixedMesh(nodes={nodes}) and the site's layout '{site.axes}' both say which rows "
            "are one sample (the mesh nodes of a sample on the first axis of the inputs, and the site's own rows "
            "packed sample by sample); read together they would group the site's samples into meshes again. Where the "
            "inputs' rows are samples (the model builds the mesh itself), drop samples=; where they are mesh nodes, "
            "give the site a batched layout ('batch feature')."
        )
    if m.needs_reference:
        assert ref is not None  # the verbs refuse a method that needs a reference when none is given
        check_reference(site.name, ref, current)
        if rows is None:
            rows = m.draw(gen, ref.shape[0], current.shape[0], nodes)
    return m.replace(current, ref, factor, rows, nodes)


def _unambiguous(site: ResolvedSite, axes, cur: torch.Tensor, ref: torch.Tensor) -> None:
    """A tensor of reference activations is read in the canonical layout (features last); where
    the site's own order differs (channels first) and both orders have one shape (channel, y
    and x of one size), the tensor could be either, and reading it would be a guess: refused."""
    perm = site_dims(site, axes, cur.dim(), False)[1]
    own = tuple(cur.shape[p] for p in perm)
    if perm != sorted(perm) and own == tuple(cur.shape) and tuple(ref.shape[1:]) == own[1:]:
        raise DataValidationError(
            f"ablate at {site.name!r}: the reference tensor of shape {tuple(ref.shape)} could be in the site's own "
            f"order ('{axes}', as record() stores it) or in the canonical order with the features last, which have one "
            "shape here; reading it would be a guess. Give the DataArray or Dataset that record() returned "
            f"(reference=ds or {{{site.name!r}: ds[{site.name!r}]}}), whose dims say the order, or reference inputs."
        )


@contextmanager
def ablate(
    model: nn.Module,
    sites: str | Sequence[str],
    *,
    method: AblationMethod = "resample",
    reference: Any = None,
    factor: float | None = None,
    seed: int = 0,
    forward: Callable | None = None,
    layouts: Mapping[str, HeadLayout] | None = None,
    axes=None,
    calls: Calls = "error",
    samples: Samples = None,
):
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
        For mean/resample: reference *inputs* (Tensor / dict, recorded here), or activations
        already recorded: the Dataset :func:`~scimech.capture.record.record` returned, ``{site:
        DataArray}`` (read by its dims, in the site's own layout) or ``{site: tensor}`` in the
        canonical layout ``(sample, [window], *positions, feature)``.
    factor
        For ``"scale"``: the multiplier.
    seed
        Seed of the resampling draws.
    axes
        Activation layouts (:mod:`scimech.capture.layout`), one string or a dict by site or module path.
    calls
        For a site that runs several times in one forward pass (:mod:`scimech.capture.calls`):
        ``"error"`` (default), ``"all"``, a call index or a list of them. Reference inputs
        are recorded at the same calls, and call ``c`` is replaced from the reference's call
        ``c``; reference activations ``{site: tensor}`` shaped like one call serve every call.
        Resampling draws reference rows once per forward pass: a sample is driven by one
        reference sample at every call.
    samples
        Which rows are one sample (:mod:`scimech.causal.samples`): mean and resample treat rows as
        samples, so without it the reference inputs are first checked for rows that interact
        (graph nodes, an adaptive solver), and an error names ``samples=`` where they do.
        With samples of several rows (graphs), ``"mean"`` is the mean over every reference
        row; ``"resample"`` is refused. With ``samples=FixedMesh(nodes)`` (every sample the
        same mesh, ``nodes`` rows in one node order), ``"mean"`` is each node's mean over the
        reference samples and ``"resample"`` swaps whole samples node for node.

    Raises
    ------
    scimech.errors.SiteNeverRanError
        On leaving the block, if a site never ran in it, or never reached a call asked for: an
        ablation that never happened has no effect to report.

    Examples
    --------
    Zeroing the first layer's output leaves the last layer its bias alone:

    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    >>> x = torch.randn(8, 3)
    >>> with sm.ablate(model, "0", method="zero"):
    ...     y = model(x)
    >>> torch.equal(y, model[2].bias.expand(8, 1))
    True

    A hidden unit the last layer does not read has no effect when ablated:

    >>> with torch.no_grad():
    ...     model[2].weight[0, 1] = 0.0
    >>> with sm.ablate(model, "1.units[1]", method="mean", reference=torch.randn(16, 3)):
    ...     y = model(x)
    >>> torch.equal(y, model(x))
    True
    """
    # the user runs the passes inside the block: the session leaves the model's modes alone
    ses = Session(model, "ablate", calls=calls, forward=forward, samples=samples, allow_last=False)
    m = resolve_method(method, reference=reference, factor=factor, verb=ses.verb)
    policy = ses.calls
    sites = site_list(sites)
    _check_samples(ses, m, reference, sites)
    resolved = [resolve_site(model, s, layouts, axes) for s in sites]
    refs = _references(ses, m, reference, sites, layouts, axes, policy)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    drawn: dict[str, tuple[object, torch.Tensor]] = {}  # site -> (forward pass, reference rows)
    nodes = mesh_nodes(samples)
    # plain tensors given as reference activations: their layout is checked where it could be guessed
    raw = {s for s in sites if _given_activations(reference, sites) and isinstance(reference[s], torch.Tensor)}

    def fn(site: ResolvedSite, t: torch.Tensor):
        cur = site.select(t)
        ref = _ref_at(refs.get(site.name), cur, policy, hooks.call, site.name)
        if site.name in raw and ref is not None:
            _unambiguous(site, hooks.axes[site.name], cur, ref)
        rows = None
        if m.draws_rows:  # one draw per forward pass and site
            check_reference(site.name, ref, cur)
            p = current_pass()
            if site.name not in drawn or drawn[site.name][0] is not p or drawn[site.name][1].shape[0] != cur.shape[0]:
                picked = m.draw(gen, ref.shape[0], cur.shape[0], nodes)
                assert picked is not None  # a method that draws rows returns the rows it drew
                drawn[site.name] = (p, picked)
            rows = drawn[site.name][1]
        new = _replacement(m, site, cur, ref, factor, gen, rows, nodes)
        return site.replace(t, new)

    with ses, ses.hooks(resolved, fn) as hooks:  # every site checked for having run on leaving
        yield


@contextmanager
def patch(
    model: nn.Module,
    values: Mapping[str, torch.Tensor],
    layouts: Mapping[str, HeadLayout] | None = None,
    axes=None,
    calls: Calls = "error",
):
    """Set the activation at each site to the given tensor during the block.

    ``values[site]`` has the shape that :func:`~scimech.capture.record.record` and
    :class:`~scimech.capture.record.Recorder` give the site, in the model's axis order (``(B, N,
    head_dim)`` for one head of a transformer, ``(B, channel, y, x)`` for a CNN site). The
    ``calls`` (:mod:`scimech.capture.calls`) says which calls of a site that runs several times per
    forward pass are set: ``"error"`` (default), ``"all"``, an index or a list. A value shaped
    like one call is written at every call chosen; with ``"all"`` or a list, a value with a
    call axis after the sample axis (as ``record(..., calls=...)`` gives it) is written call by
    call. Leaving the block raises :class:`~scimech.errors.SiteNeverRanError` if a site never
    ran in it, or never reached a call asked for.

    Examples
    --------
    Patching a clean run's hidden activations into a corrupted run gives the clean output:

    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    >>> clean, corrupted = torch.randn(4, 3), torch.randn(4, 3)
    >>> hidden = sm.record(model, clean, ["1"])["1"]  # (sample, feature)
    >>> with sm.patch(model, {"1": torch.as_tensor(hidden.values)}):
    ...     y = model(corrupted)
    >>> torch.allclose(y, model(clean))
    True
    """
    ses = Session(model, "patch", calls=calls, allow_last=False)  # the user runs the passes: modes left alone
    policy = ses.calls
    resolved = [resolve_site(model, s, layouts, axes) for s in values]

    def fn(site: ResolvedSite, t: torch.Tensor):
        cur = site.select(t)
        perm = site_dims(site, hooks.axes[site.name], cur.dim(), False)[1]  # canonical -> model order
        want = tuple(cur.shape[p] for p in perm)
        new = values[site.name]
        if policy.stacked and new.dim() == len(want) + 1:
            new = _ref_at(new, cur, policy, hooks.call, site.name)
        if tuple(new.shape) != want:
            raise DataValidationError(
                f"Patch for {site.name!r} has shape {tuple(new.shape)}; the site has {want} "
                "(the shape record() gives it)."
            )
        inverse = [perm.index(i) for i in range(len(perm))]
        # a copy: a model that writes into the site's output in place (out += x) must not change the
        # values given here, which the next forward pass in the block uses again
        return site.replace(t, new.to(t.device, copy=True).permute(inverse))

    with ses, ses.hooks(resolved, fn) as hooks:  # every site checked for having run on leaving
        yield


def _sweep_dataset(
    per_sample: dict, per_target: dict, sites: Sequence[str], calls: list[int] | None, attrs: dict
) -> xr.Dataset:
    """A sweep's result: ``per_sample`` variables ``(name: (array, description))`` on dim
    ``sample``, ``per_target`` ones on ``(site, sample)``, or ``(site, call, sample)`` when the
    sweep ran by call (one target per site and call)."""
    data: dict[str, tuple[tuple[str, ...], Any, dict[str, Any]]] = {
        k: (("sample",), a, {"description": d}) for k, (a, d) in per_sample.items()
    }
    for k, (a, d) in per_target.items():
        if calls is None:
            data[k] = (("site", "sample"), a, {"description": d})
        else:
            data[k] = (("site", "call", "sample"), a.reshape(len(sites), len(calls), -1), {"description": d})
    n = next(iter(per_sample.values()))[0].shape[0]
    coords = {"site": list(sites), "sample": np.arange(n)} | ({} if calls is None else {"call": calls})
    return xr.Dataset(data, coords=coords | site_coords(sites), attrs=attrs)  # layer, head, unit on site


def ablation_sweep(
    model: nn.Module,
    inputs: Any,
    sites: Sequence[str],
    metric: Metric | Callable | None = None,
    *,
    method: AblationMethod = "resample",
    reference: Any = None,
    factor: float | None = None,
    forward: Callable | None = None,
    batch_size: int = 256,
    max_rows: int = 256,
    seed: int = 0,
    layouts: Mapping[str, HeadLayout] | None = None,
    target: torch.Tensor | None = None,
    reuse_prefix: bool = True,
    axes=None,
    calls: Calls = "error",
    by_call: bool = False,
    samples: Samples = None,
) -> xr.Dataset:
    """Ablate each site in turn and measure a per-sample metric.

    Parameters are those of :func:`ablate` and :func:`patching_sweep`; sites share
    tiled forward passes (``max_rows`` rows each, after a check that the rows of a batch
    do not interact, :mod:`scimech.causal.sweep`) and reuse the unablated part of the forward pass
    (``reuse_prefix``) as in :func:`patching_sweep`. With ``method="resample"`` one draw of
    reference rows per batch serves every site and every call.

    ``calls`` (:mod:`scimech.capture.calls`): ``"error"``, ``"all"``, ``"last"`` (the last call of
    the unablated run; the ablated run must make as many), an index or a list.
    ``by_call=True`` ablates each call alone (with ``calls="all"`` or a list): the effect of
    each step of a rollout, on a ``call`` dim. ``samples`` as in :func:`ablate`.

    Returns
    -------
    xr.Dataset
        dims ``("site", "sample")`` (``("site", "call", "sample")`` by call): ``baseline``
        (no ablation, dim sample), ``ablated``, ``effect = ablated - baseline``; attrs
        ``method``, ``metric``, ``factor``, ``seed``, ``calls``, ``sweep_path``,
        ``sweep_path_note``, ``row_check``, and ``sweep_tail`` for a metric that reads one position
        (as in :func:`patching_sweep`).

    Examples
    --------
    A hidden unit the last layer does not read: zeroing it changes no sample's output.

    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    >>> with torch.no_grad():
    ...     model[2].weight[0, 1] = 0.0
    >>> sweep = sm.ablation_sweep(model, torch.randn(8, 3), ["1.units[0]", "1.units[1]"], method="zero")
    >>> sweep["effect"].dims, sweep["site"].values.tolist()
    (('site', 'sample'), ['1.units[0]', '1.units[1]'])
    >>> sweep["effect"].sel(site="1.units[1]").values.tolist()
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    """
    with Session(model, "ablation_sweep", inputs, calls=calls, forward=forward, samples=samples) as ses:
        m = resolve_method(method, reference=reference, factor=factor, verb=ses.verb)
        policy = ses.calls
        sites = site_list(sites)
        _check_samples(ses, m, reference, sites)
        check_batching(inputs, samples, batch_size, ses.verb)
        metric = as_metric(metric)
        n_inputs = n_samples_of(inputs) if is_one_batch(inputs) else None
        target = sweep_target(target, metric, n_inputs)
        resolved = [resolve_site(model, s, layouts, axes) for s in sites]
        ref_calls = CallPolicy("all") if by_call and policy.mode == "all" else policy
        refs = _references(ses, m, reference, sites, layouts, axes, ref_calls)
        setter = _ablation_setter(m, resolved, refs, ref_calls, factor, seed, mesh_nodes(samples))
        run = sweep_batches(
            ses,
            ((start, batch, None) for start, batch in iter_batches(inputs, batch_size)),
            resolved,
            metric,
            setter,
            target=target,
            by_call=by_call,
            reuse_prefix=reuse_prefix,
            max_rows=max_rows,
        )
    baseline, ablated = run.baseline.numpy(), run.changed.numpy()
    return _sweep_dataset(
        {"baseline": (baseline, f"{metric.name} without ablation")},
        {
            "ablated": (ablated, f"{metric.name} with the site ablated"),
            "effect": (ablated - baseline[None], "ablated - baseline"),
        },
        sites,
        run.calls,
        {
            "method": method,
            "metric": metric.name,
            "factor": "None" if factor is None else float(factor),
            "seed": seed,
            "calls": str(policy),
            "description": "ablation sweep",
            **run.attrs,
        },
    )


def _ablation_setter(
    m: Method,
    resolved: Sequence[ResolvedSite],
    refs: Mapping[str, torch.Tensor],
    ref_policy: CallPolicy,
    factor: float | None,
    seed: int,
    nodes: int,
) -> Setter:
    """The ablation sweep's setter: each target gets the method's replacement of its activation.
    One resampling draw per batch serves every site and call: sample j is replaced by the same
    reference sample at every site (a paired comparison across sites), and a single-batch sweep
    equals ``ablate(model, site, seed=seed)`` site by site."""
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def setter(batch, _source, _tgt, _agg):
        b = batch_size_of(batch)
        draws = {}
        if m.draws_rows:
            sizes = {refs[s.name].shape[0] for s in resolved}
            shared = m.draw(gen, sizes.pop(), b, nodes) if len(sizes) == 1 else None
            draws = {
                s.name: shared if shared is not None else m.draw(gen, refs[s.name].shape[0], b, nodes) for s in resolved
            }

        def make(i, s, cur, call):
            ref = _ref_at(refs.get(s.name), cur, ref_policy, call, s.name)
            return _replacement(m, s, cur, ref, factor, None, draws.get(s.name), nodes)

        return make, None

    return setter


def patching_sweep(
    model: nn.Module,
    clean: Any,
    corrupted: Any,
    sites: Sequence[str],
    metric: Metric | Callable | None = None,
    *,
    direction: Literal["denoising", "noising"] = "denoising",
    forward: Callable | None = None,
    batch_size: int = 64,
    max_rows: int = 256,
    target: torch.Tensor | None = None,
    layouts: Mapping[str, HeadLayout] | None = None,
    reuse_prefix: bool = True,
    axes=None,
    calls: Calls = "error",
    by_call: bool = False,
    samples: Samples = None,
) -> xr.Dataset:
    """Activation patching at each site, in one direction.

    Parameters
    ----------
    clean, corrupted
        Paired inputs (same number of rows; row i of each is one counterfactual pair).
    sites
        Site strings (modules, ports, units, heads); every input and activation is batched
        on dim 0.
    metric
        ``metric(output, target=None) -> (B,)`` (see :mod:`scimech.causal.metrics`); default the
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
        Activation layouts (:mod:`scimech.capture.layout`): one string, or a dict by site or module path.
    reuse_prefix
        Take from the unpatched run the outputs of every module that finished before a
        site (in a model made of blocks: the blocks before the patched one), so that each
        patched forward pass only computes from the site on (:mod:`scimech.causal.prefix_reuse`). Sites
        are then grouped by block. The results are those of full forward passes up to
        float rounding; ``False`` runs every patched pass in full. The reused outputs of
        one batch are held in memory (about one activation per block).
    calls
        For sites that run several times per forward pass (:mod:`scimech.capture.calls`):
        ``"error"`` (default), ``"all"``, ``"last"`` (each run's last call), an index or a
        list; call ``c`` of the run patched into gets call ``c`` of the source run.
    by_call
        Patch each call alone (``calls="all"`` or a list): a ``call`` dim, the effect of each
        step of a rollout.
    samples
        Which rows are one sample (:mod:`scimech.causal.samples`; a graph batch's own ``batch`` by
        default): a metric that returns one value per row is summed per sample.

    Returns
    -------
    xr.Dataset
        dims ``("site", "sample")``: ``clean``, ``corrupted`` (metric of each unpatched run,
        dim sample), ``patched``, ``effect`` (patched minus the unpatched run of the
        direction) and ``normalized_effect = (patched - corrupted) / (clean - corrupted)``
        (1: the clean behaviour, 0: the corrupted one; NaN where clean == corrupted);
        attrs ``method``, ``direction``, ``metric``, ``calls``, ``sweep_path`` (``"prefix_reuse"``,
        ``"batched"`` or ``"per_site"``: which path ran), ``sweep_path_note`` (what was
        reused, or why not), ``row_check`` (whether the rows of a tiled batch were found
        independent, :mod:`scimech.causal.sweep`) and, for a metric that reads one position of its
        output (:func:`~scimech.causal.metrics.logit_difference`), ``sweep_tail``: which modules after
        the sites that act on each position alone (a transformer's last MLP, final norm and
        unembedding) computed that position only, checked once by an unchanged copy, or why they
        ran in full.

    Examples
    --------
    In a chain of layers every site carries the whole computation: patching any one of them
    restores the clean behaviour exactly (normalised effect 1).

    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    >>> clean, corrupted = torch.randn(4, 3), torch.randn(4, 3)
    >>> sweep = sm.patching_sweep(model, clean, corrupted, ["0", "1", "2"])
    >>> sweep["normalized_effect"].dims
    ('site', 'sample')
    >>> sweep["normalized_effect"].round(6).values.tolist()
    [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    """
    sites, metric, n_clean, target, resolved = patching_inputs(
        model, clean, corrupted, sites, metric, direction, target, layouts, axes
    )
    with Session(model, "patching_sweep", clean, calls=calls, forward=forward, samples=samples) as ses:
        check_batching(clean, samples, batch_size, ses.verb)
        policy = ses.calls

        def pairs():
            for start in range(0, n_clean, batch_size):
                stop = min(start + batch_size, n_clean)
                cb, xb = slice_batch(clean, start, stop), slice_batch(corrupted, start, stop)
                yield (start, xb, cb) if direction == "denoising" else (start, cb, xb)  # (start, run, source)

        run = sweep_batches(
            ses,
            pairs(),
            resolved,
            metric,
            source_setter(ses, resolved, metric),
            target=target,
            by_call=by_call,
            reuse_prefix=reuse_prefix,
            max_rows=max_rows,
        )
        assert run.source is not None  # the patching setter runs the source
        base, src, p = run.baseline.numpy(), run.source.numpy(), run.changed.numpy()
        c, x = (src, base) if direction == "denoising" else (base, src)
        norm = normalized_effect(p, c, x, ses.normalisable(c, x, metric.name))
    return _sweep_dataset(
        {"clean": (c, f"{metric.name} on the clean input"), "corrupted": (x, f"{metric.name} on the corrupted input")},
        {
            "patched": (p, f"{metric.name} with the site patched"),
            "effect": (p - base[None], "patched minus the unpatched run"),
            "normalized_effect": (norm, "(patched - corrupted) / (clean - corrupted)"),
        },
        sites,
        run.calls,
        {
            "method": "activation_patching",
            "direction": direction,
            "metric": metric.name,
            "calls": str(policy),
            "description": "denoising: corrupted run with clean activations (sufficiency); "
            "noising: clean run with corrupted activations (necessity)",
            **run.attrs,
        },
    )
