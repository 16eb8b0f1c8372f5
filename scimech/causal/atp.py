"""Attribution patching: every site's patching effect from two forwards and one backward.

Activation patching needs one forward pass per site. Attribution patching (AtP; Nanda
2022, "Attribution patching: activation patching at industrial scale"; Syed, Rager &
Conmy 2023) replaces each patched run by its first-order Taylor expansion around the
unpatched run:

    effect(site) ~ (a_source - a_base) . d metric / d a   (at the base run)

so the effects of *all* sites come from one forward pass on the source input (its
activations), one forward pass on the base input and one backward pass (the gradient at
every site). For ``direction="denoising"`` the base run is the corrupted input and the
source the clean one; ``"noising"`` swaps them (as in :func:`scimech.causal.intervene.patching_sweep`).
The estimate is exact when the metric is linear in the site's activation downstream of
it, and can miss where it is not. AtP* (Kramár, Lieberum, Shah & Nanda 2024,
arXiv:2403.00745) fixes the two failures that matter most:

- **QK fix** (``qk_fix=True``): a patched query or key changes the attention weights
  through a softmax, which saturates, so its gradient says little about a large change.
  For sites on the query or key projection (``q_proj`` / ``k_proj`` output, all units or
  ``units[...]``) of a :class:`~scimech.capture.attention.DecomposedMultiheadAttention`, the
  attention weights of the patched query / key are computed exactly and only their effect
  on the metric is linearised: ``effect ~ sum (A_patched - A) . d metric / d A``.
- **GradDrop** (``graddrop=True``): a site's direct effect and its effect through later
  layers can cancel in the gradient although they do not cancel in the patched run. For
  a model made of residual blocks (found from its call structure:
  :meth:`scimech.causal.prefix_reuse.CallTrace.blocks`), the gradient is recomputed ``L`` times with the
  gradient through block ``l``'s own computation dropped (only its skip path kept), and
  the site's score is ``sum_l |mean estimate without l| / (L - 1)``: a magnitude for
  ranking, not a signed effect. It costs ``L`` more backward passes.

The estimate ranks sites; ``verify_top=k`` reruns exact activation patching on the top
``k`` (with the prefix reuse of :func:`~scimech.causal.intervene.patching_sweep`) and reports both.
:func:`ranking_agreement` compares a ranking with exact patching of every site.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
import torch
import xarray as xr
from scipy.stats import spearmanr
from torch import nn

from scimech.capture.attention import DecomposedMultiheadAttention
from scimech.capture.batches import batch_size_of, is_graph_batch, n_samples_of, slice_batch
from scimech.capture.calls import CallPolicy, Calls
from scimech.capture.hooks import HookSet, first_tensor, override_forward, run_forward
from scimech.capture.profile import same_values
from scimech.capture.record import Recorder
from scimech.capture.session import Session, integer_activation, result_values
from scimech.capture.sites import HeadLayout, ResolvedSite, site_coords
from scimech.causal.intervene import patching_sweep
from scimech.causal.metrics import Metric
from scimech.causal.prefix_reuse import trace_calls
from scimech.causal.samples import (
    Samples,
    check_batching,
    per_sample,
    sample_index,
)
from scimech.causal.sweep import Reuse as _Reuse
from scimech.causal.sweep import (
    RowCheck,
    Target,
    TilePlan,
    capturing,
    check_source,
    normalized_effect,
    patching_inputs,
    plan_reuse,
    source_at,
    source_make,
    sweep_tiles,
)
from scimech.errors import DataValidationError
from scimech.run.progress import bar as _bar

__all__ = ["attribution_patching", "ranking_agreement"]


class _GradGate(torch.autograd.Function):
    """Identity on a block's output whose backward can route the gradient around the block.

    When ``state["dropped"] == index`` the gradient of the output goes straight to the
    block's input (the skip path of ``y = x + f(x)``) and none enters the block.
    """

    @staticmethod
    def forward(ctx, y, x, state, index):
        ctx.state, ctx.index = state, index
        return y.view_as(y)

    @staticmethod
    def backward(ctx, g):
        if ctx.state["dropped"] == ctx.index:
            return None, g, None, None
        return g, None, None, None


def _qk_attention(model: nn.Module, site: ResolvedSite) -> tuple[str, DecomposedMultiheadAttention, str] | None:
    """``(attention path, attention, "q" | "k")`` for a site on a query / key projection output."""
    path, _, child = site.module_path.rpartition(".")
    if site.port != "output" or child not in ("q_proj", "k_proj"):
        return None
    parent = model.get_submodule(path) if path else model
    if not isinstance(parent, DecomposedMultiheadAttention):
        return None
    return path, parent, child[0]


class _Probes:
    """Zero tensors added at the sites (and at attention weights for the QK fix) during the
    base run: their gradients are the metric's gradients there, and the graph is unchanged."""

    def __init__(
        self,
        model: nn.Module,
        resolved: Sequence[ResolvedSite],
        qk: Mapping[str, tuple],
        policy: CallPolicy | None = None,
        cut: bool = False,
        verb: str = "attribution_patching",
    ):
        self.model, self.verb = model, verb
        self.cut = cut  # calls after the first probed one take only their probe's gradient path
        self.policy = policy or CallPolicy("error")
        self.by_point: dict[tuple[int, str], ResolvedSite] = {}
        for s in resolved:
            self.by_point.setdefault((id(s.module), s.port), s)
        self.base: dict[tuple[int, str, int], torch.Tensor] = {}  # (module, port, call) -> its activation
        self.leaves: dict[Any, torch.Tensor] = {}
        self.attn_calls: dict[str, dict[str, Any]] = {}
        self.qk_attn = {path: attn for path, attn, _ in qk.values()}

    @staticmethod
    def point(site: ResolvedSite) -> tuple[int, str]:
        return id(site.module), site.port

    def _probe(self, key: Any, t: torch.Tensor) -> torch.Tensor:
        if not (t.is_floating_point() or t.is_complex()):
            site = self.by_point.get(key[:2])
            raise integer_activation(
                self.verb,
                site.name if site else key[1],
                t,
                "and a gradient needs a floating activation",
                "Use patching_sweep for this site (exact effects, no gradient).",
            )
        z = torch.zeros_like(t, requires_grad=True)
        self.leaves[key] = z
        return t + z

    def __enter__(self) -> _Probes:
        self._stack = ExitStack()
        try:

            def on_site(s: ResolvedSite, t: torch.Tensor) -> torch.Tensor:
                key = (*self.point(s), hooks.call)  # one probe per call of the site
                self.base[key] = t.detach()
                if self.cut and any(k[:2] == key[:2] for k in self.leaves):
                    # an overwritten later call: its value no longer depends on the earlier calls
                    return self._probe(key, t.detach())
                return self._probe(key, t)

            # 'last' is known only after the pass: probe every call, keep the last in _estimates
            pol = CallPolicy("all") if self.policy.mode == "last" else self.policy
            hooks = self._stack.enter_context(
                HookSet(self.by_point.values(), on_site, model=self.model, calls=pol, verb=self.verb)
            )
            self.hooks = hooks
            for path, attn in self.qk_attn.items():
                orig = attn.attention_weights

                def weights(q, k, attn_mask=None, key_padding_mask=None, is_causal=False, _path=path, _orig=orig):
                    a = _orig(q, k, attn_mask, key_padding_mask, is_causal)
                    self.attn_calls[_path] = dict(
                        q=q.detach(),
                        k=k.detach(),
                        attn_mask=attn_mask,
                        key_padding_mask=key_padding_mask,
                        is_causal=is_causal,
                        weights=a.detach(),
                        orig=_orig,
                    )
                    return self._probe(("attn", _path), a)

                attn.__dict__["attention_weights"] = weights
                self._stack.callback(attn.__dict__.pop, "attention_weights", None)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()


def _gates(model: nn.Module, blocks: Sequence[str], state: dict) -> ExitStack:
    """Wrap each block's output in a :class:`_GradGate` (block input and output of one shape)."""
    stack = ExitStack()
    for i, name in enumerate(blocks):

        def make(inner, _i=i):
            def forward(*args, **kwargs):
                out = inner(*args, **kwargs)
                x = first_tensor(args[0]) if args else next(v for v in kwargs.values() if isinstance(v, torch.Tensor))
                y = first_tensor(out)
                if x.shape != y.shape:
                    return out
                g = _GradGate.apply(y, x, state, _i)
                return g if isinstance(out, torch.Tensor) else (g, *out[1:])

            return forward

        stack.callback(override_forward(model.get_submodule(name), make).remove)
    return stack


def _first_order(g: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """Per-sample first-order change of a real metric: ``sum Re(conj(g) * delta)``.

    torch's gradient of a real function with respect to a complex tensor is the conjugate
    Wirtinger form ``dL/dRe + i dL/dIm``, so the change for a complex step ``delta`` is
    ``Re(conj(g) delta) = dL/dRe Re(delta) + dL/dIm Im(delta)``; for real tensors this is ``g * delta``.
    """
    prod = (g.conj() * delta).real if (g.is_complex() or delta.is_complex()) else g * delta
    return prod.reshape(delta.shape[0], -1).sum(1)


def _estimates(
    resolved: Sequence[ResolvedSite],
    probes: _Probes,
    grads: Mapping[Any, torch.Tensor | None],
    source: Mapping[str, torch.Tensor | Sequence[torch.Tensor]],
    qk: Mapping[str, tuple],
    verb: str,
) -> torch.Tensor:
    """(site, sample) first-order effects from one set of probe gradients, summed over the
    calls probed (each call against the source's same call; ``source[site]``: one call, or the
    calls stacked on dim 1 or listed, :func:`~scimech.causal.sweep.source_at`)."""
    rows = []
    pol = probes.policy
    for s in resolved:
        point = probes.point(s)
        keys = sorted(k for k in probes.base if k[:2] == point)
        if pol.mode == "last":
            keys = keys[-1:]
        base = probes.base[keys[0]]
        est = torch.zeros(base.shape[0], device=base.device)
        if s.name in qk:  # one call (qk is only used under calls="error")
            path, attn, which = qk[s.name]
            call = probes.attn_calls[path]
            g = grads.get(("attn", path))
            one = cast(torch.Tensor, source[s.name])  # calls="error": one tensor, the site's one call
            check_source(s.name, one, s.select(base), verb)
            new = attn.split_heads(s.replace(base, one))
            q, k = (new, call["k"]) if which == "q" else (call["q"], new)
            with torch.no_grad():
                a_new = call["orig"](q, k, call["attn_mask"], call["key_padding_mask"], call["is_causal"])
            if g is not None:
                est = _first_order(g, a_new - call["weights"])
        else:  # every call probed, each against the source's same call
            for key in keys:
                base, g = probes.base[key], grads.get(key)
                src = source_at(source[s.name], pol, key[2])
                check_source(s.name, src, s.select(base), verb)
                if g is not None:
                    est = est + _first_order(s.select(g), src.to(base.dtype) - s.select(base))
        rows.append(result_values(est))
    return torch.stack(rows)


def attribution_patching(
    model: nn.Module,
    clean: Any,
    corrupted: Any,
    sites: Sequence[str],
    metric: Metric | Callable | None = None,
    *,
    direction: Literal["denoising", "noising"] = "denoising",
    forward: Callable | None = None,
    batch_size: int = 64,
    target: torch.Tensor | None = None,
    layouts: Mapping[str, HeadLayout] | None = None,
    qk_fix: bool = True,
    graddrop: bool = False,
    verify_top: int = 0,
    max_rows: int = 256,
    axes=None,
    calls: Calls = "error",
    samples: Samples = None,
) -> xr.Dataset:
    """Estimated activation-patching effect of every site (AtP / AtP*), optionally verified.

    Parameters
    ----------
    model, clean, corrupted, sites, metric, direction, forward, batch_size, target, layouts, axes
        As in :func:`scimech.causal.intervene.patching_sweep`. The metric must be differentiable.
    qk_fix
        Exact attention weights for query / key sites of a ``DecomposedMultiheadAttention``
        (AtP*); other sites are unaffected.
    graddrop
        Add the GradDrop magnitude (AtP*) and rank by it; needs a model of residual blocks
        and costs one backward pass per block.
    verify_top
        Rerun exact activation patching on the ``verify_top`` best-ranked sites.
    max_rows
        Rows per tiled forward pass of the verification.
    calls
        For sites that run several times per forward pass (:mod:`scimech.capture.calls`): ``"error"``
        (default), ``"all"``, ``"last"``, an index or a list. The estimate of patching several
        calls is the sum of the first-order terms of each call (call ``c`` gets the source's
        call ``c``); the QK fix applies to sites that run once.

    samples
        Which rows are one sample (:mod:`scimech.causal.samples`; a graph batch's own ``batch`` by
        default). Per-row estimates are summed per sample, as is a metric that returns one
        value per row. Without it the rows of the first batch are checked for interaction
        (graph nodes, an adaptive solver): a per-row gradient of a summed metric would mix
        rows that interact, so that is an error naming ``samples=``.

    Returns
    -------
    xr.Dataset
        The variables of :func:`~scimech.causal.intervene.patching_sweep`, with ``patched``,
        ``effect`` and ``normalized_effect`` estimated; ``score`` (site): what the ranking
        sorts, ``|mean effect|`` over samples (with GradDrop: ``sum_l |mean effect without
        l| / (L - 1)``); ``rank`` (site): 1 for the largest score. With GradDrop:
        ``graddrop_effect`` (dropped_block, site, sample).
        With ``verify_top``: ``exact_patched``, ``exact_effect``, ``exact_normalized_effect``
        (site, sample; NaN for sites not verified), ``verified`` (site) and ``exact_rank``
        (site: rank by ``|mean exact effect|`` among the verified, NaN elsewhere). attrs
        ``method``, ``estimator`` ("AtP" / "AtP*"), ``qk_fix_sites``, ``graddrop_blocks``,
        ``direction``, ``metric`` and, when verified, the verification's ``sweep_path``.
        Coords ``layer``, ``head``, ``unit`` on ``site`` where the sites name them
        (:func:`scimech.capture.sites.site_coords`), as on the sweeps' results.

    Notes
    -----
    Complex activations (spectral coefficients) use ``Re(conj(grad) * delta)``, the first-order
    change of a real metric for a complex step (torch's gradient is the conjugate form).

    Examples
    --------
    Three linear branches summed: the first-order estimate is exact here, and patching branch
    ``k`` (weights ``k``) from a clean input of ones into a corrupted one of zeros changes the
    output by ``2 k``:

    >>> class Branches(torch.nn.Module):  # y = a(x) + b(x) + c(x)
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.a, self.b, self.c = (torch.nn.Linear(2, 1, bias=False) for _ in range(3))
    ...     def forward(self, x):
    ...         return self.a(x) + self.b(x) + self.c(x)
    >>> model = Branches()
    >>> with torch.no_grad():  # weights 1, 2 and 3
    ...     for w, branch in enumerate([model.a, model.b, model.c], start=1):
    ...         _ = branch.weight.fill_(w)
    >>> clean, corrupted = torch.ones(4, 2), torch.zeros(4, 2)
    >>> est = attribution_patching(model, clean, corrupted, ["a", "b", "c"], metric=lambda y: y[:, 0])
    >>> est["effect"].dims, est["effect"].mean("sample").values.tolist()
    (('site', 'sample'), [2.0, 4.0, 6.0])
    >>> est["rank"].values.tolist(), est.attrs["estimator"]  # c has the largest effect
    ([3, 2, 1], 'AtP')
    """
    if verify_top < 0 or int(verify_top) != verify_top:
        raise ValueError(f"verify_top must be a whole number >= 0; got {verify_top!r}.")
    sites, metric, n_clean, target, resolved = patching_inputs(
        model, clean, corrupted, sites, metric, direction, target, layouts, axes
    )
    with Session(
        model,
        "attribution_patching",
        clean,
        calls=calls,
        forward=forward,
        samples=samples,
        needs={"repeatable", "rows", "packing"},
        why="A per-sample first-order effect",
    ) as ses:
        check_batching(clean, samples, batch_size, ses.verb)
        policy = ses.calls
        qk = {
            s.name: a
            for s in resolved
            if qk_fix and policy.mode == "error" and (a := _qk_attention(model, s)) is not None
        }
        # one batch: the verification patches the base run kept here (no new reference runs)
        keep = (
            bool(verify_top)
            and n_clean <= batch_size
            and policy.mode in ("error", "index")
            and samples is None
            and not is_graph_batch(clean)
        )
        blocks: list[str] = []
        if graddrop:
            blocks = trace_calls(model, corrupted if direction == "denoising" else clean, forward).blocks(model)
            if len(blocks) < 2:
                raise ValueError(
                    "graddrop=True needs a model made of two or more blocks called one after the other "
                    "(x = block(x)); none was found. Use graddrop=False."
                )
        sizes = {"batch_size": batch_size, "max_rows": max_rows}
        est = _estimate_all(ses, clean, corrupted, target, resolved, metric, qk, blocks, direction, keep, **sizes)
        c, x, effect, base, last = est
        usable = ses.normalisable(c, x, metric.name)  # a constant metric refused; noise-floor pairs masked
        data, coords = _estimate_variables(sites, metric.name, c, x, base, effect, blocks, est.graddrop, usable)
        attrs: dict[str, Any] = {
            "method": "attribution_patching",
            "estimator": "AtP*" if (qk or blocks) else "AtP",
            "qk_fix_sites": ", ".join(qk) or "none",
            "graddrop_blocks": ", ".join(blocks) or "none",
            "direction": direction,
            "metric": metric.name,
            "description": "first-order (attribution patching) estimate of activation patching; "
            "Nanda 2022, Kramar et al. 2024 (AtP*)",
        }
        if verify_top:
            top = [sites[i] for i in np.argsort(data["rank"][1])[: int(verify_top)]]
            if keep:
                assert last is not None  # keep: the one batch, estimated above
                exact_patched = _verify_kept_batch(ses, resolved, top, last, metric, max_rows)
                path = last.path
            else:
                ex = patching_sweep(
                    model,
                    clean,
                    corrupted,
                    top,
                    metric,
                    direction=direction,
                    forward=forward,
                    batch_size=batch_size,
                    max_rows=max_rows,
                    target=target,
                    layouts=layouts,
                    axes=axes,
                    calls=policy,
                    samples=samples,
                )
                exact_patched = {s: ex["patched"].sel(site=s).values for s in top}
                path = {k: ex.attrs[k] for k in ("sweep_path", "sweep_path_note")}
            data.update(_verified(sites, exact_patched, base, c, x, usable))
            attrs.update(verify_top=len(top), **path)
    return xr.Dataset(data, coords=coords, attrs=attrs)


@dataclass
class _Estimates:
    """The estimates of every batch: clean and corrupted metric (sample), the estimated effect
    (site, sample), the metric of the run patched into, the last batch (what a verification of
    one batch reuses) and, with GradDrop, the estimates with each block dropped."""

    clean: np.ndarray
    corrupted: np.ndarray
    effect: np.ndarray
    base: np.ndarray
    last: _Batch | None
    graddrop: list[torch.Tensor]

    def __iter__(self):
        return iter((self.clean, self.corrupted, self.effect, self.base, self.last))


def _estimate_all(
    ses: Session, clean, corrupted, target, resolved, metric, qk, blocks, direction, keep, *, batch_size, max_rows
) -> _Estimates:
    """The first-order estimates batch by batch (the profile checked on the first base batch, and
    the sites the gradient never reaches patched exactly there)."""
    n_clean = n_samples_of(clean)
    clean_v, corr_v, est_v, gd_v = [], [], [], []
    last: _Batch | None = None
    bar = _bar(n_clean, ses.verb, unit="sample")  # closed below, or when dropped on an error
    for start in range(0, n_clean, batch_size):
        stop = min(start + batch_size, n_clean)
        if start == 0:  # what the estimate assumes: measured once per model, forward and input signature
            first_base = slice_batch(corrupted if direction == "denoising" else clean, start, stop)
            ses.profile_for(first_base)  # the base run's profile serves every pass of the estimate
            ses.check(first_base, sites=resolved)
        last = _estimate_batch(
            ses,
            slice_batch(clean, start, stop),
            slice_batch(corrupted, start, stop),
            None if target is None else target[start:stop],
            resolved,
            metric,
            qk,
            blocks,
            direction=direction,
            keep=keep,
        )
        if start == 0:
            _check_unreached(ses, resolved, last, metric, max_rows)
        clean_v.append(last.source_metric if direction == "denoising" else last.base_metric)
        corr_v.append(last.base_metric if direction == "denoising" else last.source_metric)
        est_v.append(last.per_run[0])
        if blocks:
            gd_v.append(torch.stack(last.per_run[1:]))
        bar.update(stop - start)
    bar.close()
    c, x = torch.cat(clean_v).numpy(), torch.cat(corr_v).numpy()
    return _Estimates(c, x, torch.cat(est_v, dim=1).numpy(), x if direction == "denoising" else c, last, gd_v)


@dataclass
class _Batch:
    """One batch of :func:`attribution_patching`: the metric on the source and base runs, the
    estimates per gradient pass (all blocks, then each block dropped), and what the
    verification of a single batch reuses (the source activations, the base input, the
    recorded base run)."""

    source_metric: torch.Tensor
    base_metric: torch.Tensor
    per_run: list[torch.Tensor]
    source: dict
    base_batch: Any
    target: torch.Tensor | None
    reuse: Any
    path: dict
    policy: CallPolicy
    #: sites the metric's gradient never reached (autograd gave no gradient at any call)
    unreached: tuple[str, ...] = ()


def _unreached(group, probes, grads: Mapping[Any, torch.Tensor | None], qk) -> list[str]:
    """The sites of ``group`` with no gradient at any call probed: their estimate would be 0."""
    out = []
    for s in group:
        if s.name in qk:
            got = grads.get(("attn", qk[s.name][0])) is not None
        else:
            got = any(grads.get(k) is not None for k in probes.base if k[:2] == probes.point(s))
        if not got:
            out.append(s.name)
    return out


def _check_unreached(ses: Session, resolved, batch: _Batch, metric, max_rows: int) -> None:
    """A site the gradient never reaches has a first-order estimate of 0. That is its effect
    when nothing downstream uses it; under ``torch.no_grad()``, after a ``.detach()`` or in a
    reentrant checkpoint inside the model it is not. So those sites are patched exactly once on
    the first batch, and a non-zero effect is refused rather than reported as 0."""
    if not batch.unreached:
        return
    names = ", ".join(repr(n) for n in batch.unreached)
    if batch.policy.mode not in ("error", "index"):
        raise DataValidationError(
            f"{ses.verb}: the metric's gradient never reaches {names} (torch.no_grad(), .detach() or a "
            "reentrant checkpoint inside the model, or an unused output), so the estimate would be 0 whatever the "
            "site does. Measure it exactly with patching_sweep(..., calls=...) instead."
        )
    chosen = [r for r in resolved if r.name in batch.unreached]
    idx = sample_index(batch.base_batch, ses.samples)
    agg = None if idx is None else (lambda v, _i=idx: per_sample(v, _i))
    with ses.grad():
        plan = TilePlan(ses, [Target(r, batch.policy) for r in chosen], metric, max_rows)
        make = source_make(batch.source, batch.policy, ses.verb)
        rows = sweep_tiles(plan, batch.base_batch, make, batch.target, batch.base_metric, agg)
    # a change beyond what another batch size moves the metric by (the profile's tolerance of its dtype)
    moved = {
        r.name: float((row - batch.base_metric).abs().max())
        for r, row in zip(chosen, rows, strict=True)
        if not same_values(batch.base_metric, row, ses.metric_tolerance)[0]
    }
    if moved:
        raise DataValidationError(
            f"{ses.verb}: the metric's gradient never reaches {', '.join(map(repr, moved))}, yet patching "
            f"{'it' if len(moved) == 1 else 'them'} changes the metric by up to {max(moved.values()):.3g} on the first "
            "batch: the site runs under torch.no_grad(), after a .detach() or inside a reentrant checkpoint "
            "(torch.utils.checkpoint(..., use_reentrant=True)), where no gradient flows, and a first-order estimate "
            "of 0 would be wrong. Measure these sites with patching_sweep (exact), or let the gradient through "
            "(use_reentrant=False)."
            + (
                " This model takes a gradient inside its forward (forces from an energy): where the output is that "
                "gradient, a shift of a site after which the energy is linear does not change it to first order, "
                "so choose sites before the last nonlinearity."
                if ses.profile is not None and ses.profile.needs_grad
                else ""
            )
        )


def _estimate_batch(
    ses: Session,
    clean_batch,
    corrupted_batch,
    target,
    resolved,
    metric,
    qk,
    blocks,
    *,
    direction,
    keep,
) -> _Batch:
    model, forward, policy, samples = ses.model, ses.forward, ses.calls, ses.samples
    src_batch, base_batch = (
        (clean_batch, corrupted_batch) if direction == "denoising" else (corrupted_batch, clean_batch)
    )
    with Recorder(model, resolved, calls="error" if policy.mode == "error" else "all", verb=ses.verb) as rec:
        out_src = ses.run(src_batch)
    ses.fired(rec)
    source = dict(rec.canonical) if policy.mode == "error" else rec.per_call  # call by call: shapes may change
    state = {"dropped": None}
    reuse, path = plan_reuse(model, base_batch, resolved, forward, True, ses.profile) if keep else (None, {})
    # several calls of a site patched at once: the patched run overwrites every one of them, so the
    # gradient at call c must not flow through the later (overwritten) calls of the same site: each
    # such site gets a backward pass of its own with its later calls cut from their inputs
    multi = policy.mode == "all" or (policy.mode == "index" and len(policy.indices) > 1)
    if multi and blocks:
        raise ValueError(
            f"{ses.verb}: graddrop=True with several calls of a site at once is not "
            "available; give one call (calls=k or calls='last') or graddrop=False."
        )
    groups = [[s] for s in resolved] if multi else [list(resolved)]
    rows: list[torch.Tensor] = []
    per_run: list[torch.Tensor] = []
    unreached: list[str] = []
    for group in groups:
        with (
            torch.enable_grad(),
            _gates(model, blocks, state),
            _Probes(model, group, qk, policy, cut=multi, verb=ses.verb) as probes,
            capturing(model, reuse if group is groups[0] else None, batch_size_of(clean_batch)),
        ):
            out = run_forward(model, base_batch, forward)
            ses.fired({s.name: int(any(k[:2] == probes.point(s) for k in probes.base)) for s in group})
            m = metric(out, target)
            keys = list(probes.leaves)
            leaves = [probes.leaves[k] for k in keys]
            if isinstance(m, torch.Tensor) and m.is_complex():
                raise DataValidationError(
                    f"{ses.verb}: the metric {metric.name!r} is complex ({str(m.dtype).removeprefix('torch.')}"
                    "), and a gradient ranks sites by the change of a real number. Measure a real part of it: "
                    "metrics.output(part='real'), 'imag', 'abs' or 'angle', or a metric returning a real tensor; "
                    "patching_sweep keeps a complex metric as it is."
                )
            needs_grad = ses.profile is not None and ses.profile.needs_grad
            if isinstance(m, torch.Tensor) and m.dim() == 1 and not m.requires_grad and needs_grad:
                raise DataValidationError(
                    f"{ses.verb}: the metric {metric.name!r} has no gradient with respect to the sites: the "
                    "model computes its output with torch.autograd.grad inside forward (forces from an energy), and "
                    "without create_graph=True that output is cut from the graph. Call torch.autograd.grad(..., "
                    "create_graph=True) in the model's forward (or in a forward= passed here), or measure the sites "
                    "exactly with patching_sweep, which needs no graph."
                )
            if not isinstance(m, torch.Tensor) or m.dim() != 1 or not m.requires_grad:
                raise ValueError(
                    f"attribution patching needs a differentiable metric returning one value per "
                    f"sample; {metric.name!r} returned {type(m).__name__} "
                    f"{'without a gradient' if isinstance(m, torch.Tensor) else ''}."
                )
            total = m.sum()
            runs = [None, *range(len(blocks))]
            per_run = []
            for dropped in runs:
                state["dropped"] = dropped
                g = torch.autograd.grad(total, leaves, retain_graph=dropped != runs[-1], allow_unused=True)
                grads = dict(zip(keys, g, strict=True))
                if dropped is None:
                    unreached += _unreached(group, probes, grads, qk)
                per_run.append(_estimates(group, probes, grads, source, qk, ses.verb))
        rows.append(per_run[0])
    if multi:
        per_run = [torch.cat(rows)]
    with ses.grad():
        src_m = ses.values(metric, out_src, target)
    base_m = result_values(m)
    idx = sample_index(base_batch, samples)
    if idx is not None:  # per-row values summed per sample
        n = int(idx.max()) + 1
        per_run = [per_sample(r.T, idx.cpu(), n).T for r in per_run]
        src_m, base_m = per_sample(src_m, idx.cpu(), n), per_sample(base_m, idx.cpu(), n)
    return _Batch(src_m, base_m, per_run, source, base_batch, target, reuse, path, policy, tuple(unreached))


def _estimate_variables(sites, metric_name, c, x, base, effect, blocks, gd_v, usable) -> tuple[dict, dict]:
    """The estimated variables (``patched``, ``effect``, ``normalized_effect``, ``score``,
    ``rank``; with GradDrop ``graddrop_effect``) and their coords (``usable``: the samples whose
    clean and corrupted metric differ beyond its noise floor)."""
    patched = base[None] + effect
    data: dict[str, tuple[str | tuple[str, ...], Any, dict[str, str]]] = {
        "clean": (("sample",), c, {"description": f"{metric_name} on the clean input"}),
        "corrupted": (("sample",), x, {"description": f"{metric_name} on the corrupted input"}),
        "patched": (("site", "sample"), patched, {"description": f"estimated {metric_name} with the site patched"}),
        "effect": (("site", "sample"), effect, {"description": "estimated patched minus the unpatched run"}),
        "normalized_effect": (
            ("site", "sample"),
            normalized_effect(patched, c, x, usable),
            {"description": "estimated (patched - corrupted) / (clean - corrupted)"},
        ),
    }
    coords: dict[str, Any] = {"site": sites, "sample": np.arange(c.shape[0])} | site_coords(sites)
    if blocks:
        dropped = torch.cat(gd_v, dim=2).numpy()
        coords["dropped_block"] = blocks
        data["graddrop_effect"] = (
            ("dropped_block", "site", "sample"),
            dropped,
            {
                "description": "estimated effect with the gradient through the block's own "
                "computation dropped (GradDrop)"
            },
        )
        # AtP*: the magnitude of each dropped-block estimate of the mean effect, summed, / (L - 1)
        score = np.abs(dropped.mean(2)).sum(0) / (len(blocks) - 1)
    else:
        score = np.abs(effect.mean(1))
    data["score"] = (
        "site",
        score,
        {
            "description": "ranking score: |mean estimated effect| (GradDrop: sum over "
            "blocks of |mean effect without the block| / (L - 1))"
        },
    )
    data["rank"] = ("site", _ranks(score), {"description": "1 = largest score"})
    return data, coords


def _verify_kept_batch(ses: Session, resolved, top, batch: _Batch, metric, max_rows: int) -> dict[str, np.ndarray]:
    """Exact patching of the ``top`` sites on the one batch whose base run was kept: the patching
    setter (the source activations recorded by the estimate) on that batch's tiled passes."""
    chosen = [r for r in resolved if r.name in top]
    reuse = batch.reuse
    sub = None if reuse is None else _Reuse({r.name: reuse.plan[r.name] for r in chosen}, reuse.recorded)
    plan = TilePlan(
        ses, [Target(r, batch.policy) for r in chosen], metric, max_rows, sub, check=RowCheck.of(ses.profile)
    )
    with ses.grad():
        rows = sweep_tiles(
            plan, batch.base_batch, source_make(batch.source, batch.policy, ses.verb), batch.target, batch.base_metric
        )
    return {r.name: rows[i].numpy() for i, r in enumerate(chosen)}


def _ranks(score: np.ndarray) -> np.ndarray:
    """1 for the largest score (ties in site order)."""
    order = np.argsort(-np.nan_to_num(score, nan=-np.inf), kind="stable")
    r = np.empty(len(score), int)
    r[order] = np.arange(1, len(score) + 1)
    return r


def _verified(
    sites: Sequence[str],
    exact_patched: Mapping[str, np.ndarray],
    base: np.ndarray,
    c: np.ndarray,
    x: np.ndarray,
    usable: np.ndarray,
) -> dict[str, tuple]:
    """The variables of the exact patching of the verified sites (``exact_*``, ``verified``, ``exact_rank``)."""
    patched = np.full((len(sites), len(base)), np.nan)
    for s, v in exact_patched.items():
        patched[sites.index(s)] = v
    what = f"exact activation patching of the {len(exact_patched)} best-ranked sites; NaN elsewhere"
    verified = np.isin(sites, list(exact_patched))
    exact_rank = np.full(len(sites), np.nan)
    exact_rank[verified] = _ranks(np.abs((patched[verified] - base[None]).mean(1)))
    return {
        "exact_patched": (("site", "sample"), patched, {"description": what}),
        "exact_effect": (("site", "sample"), patched - base[None], {"description": what}),
        "exact_normalized_effect": (
            ("site", "sample"),
            normalized_effect(patched, c, x, usable),
            {"description": what},
        ),
        "verified": ("site", verified, {"description": "exact patching was run"}),
        "exact_rank": ("site", exact_rank, {"description": "rank by |mean exact effect| among the verified sites"}),
    }


def ranking_agreement(estimated: xr.Dataset, exact: xr.Dataset, top: int = 8) -> xr.Dataset:
    """How well an estimated ranking of sites matches exact activation patching of every site.

    Parameters
    ----------
    estimated
        A result of :func:`attribution_patching` (its ``score``).
    exact
        A :func:`~scimech.causal.intervene.patching_sweep` of the same sites (``|mean effect|``).
    top
        Size of the top set compared.

    Returns
    -------
    xr.Dataset
        ``top_overlap``: fraction of the exact top ``top`` sites among the estimated top
        ``top``; ``spearman``: Spearman rank correlation of the two scores over all sites;
        ``missed``: exact top sites the estimate ranked below ``top`` (comma-separated attr).

    Examples
    --------
    Three linear branches summed, where the first-order estimate is exact, so it ranks the sites
    as exact patching does:

    >>> class Branches(torch.nn.Module):  # y = a(x) + b(x) + c(x)
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.a, self.b, self.c = (torch.nn.Linear(2, 1, bias=False) for _ in range(3))
    ...     def forward(self, x):
    ...         return self.a(x) + self.b(x) + self.c(x)
    >>> model = Branches()
    >>> with torch.no_grad():  # weights 1, 2 and 3
    ...     for w, branch in enumerate([model.a, model.b, model.c], start=1):
    ...         _ = branch.weight.fill_(w)
    >>> clean, corrupted = torch.ones(4, 2), torch.zeros(4, 2)
    >>> sites, metric = ["a", "b", "c"], lambda y: y[:, 0]
    >>> est = sm.attribution_patching(model, clean, corrupted, sites, metric=metric)
    >>> exact = sm.patching_sweep(model, clean, corrupted, sites, metric=metric)
    >>> agree = ranking_agreement(est, exact, top=2)
    >>> float(agree["top_overlap"]), float(agree["spearman"]), agree.attrs["missed"]
    (1.0, 1.0, 'none')
    """

    sites = list(exact["site"].values)
    est = estimated["score"].sel(site=sites).values
    true = abs(exact["effect"].mean("sample")).values
    k = min(int(top), len(sites))
    t_top = {sites[i] for i in np.argsort(-true, kind="stable")[:k]}
    e_top = {sites[i] for i in np.argsort(-est, kind="stable")[:k]}
    rho = float(spearmanr(est, true).statistic) if len(sites) > 2 else float("nan")
    missed = sorted(t_top - e_top)
    return xr.Dataset(
        {"top_overlap": len(t_top & e_top) / k, "spearman": rho},
        attrs={
            "top": k,
            "missed": ", ".join(missed) or "none",
            "description": "agreement of an estimated site ranking with exact activation patching",
        },
    )
