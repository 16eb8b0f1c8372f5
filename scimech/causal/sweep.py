"""The machinery of the sweeps: tiled forward passes, the row check, prefix reuse, call targets.

:func:`~scimech.causal.intervene.ablation_sweep`, :func:`~scimech.causal.intervene.patching_sweep` and the
verification of :func:`~scimech.causal.atp.attribution_patching` change one site per run. Rather
than one forward pass per site, the batch is tiled: ``k`` copies in one pass, copy ``i``
with site ``i`` changed. That is only right when the rows of a batch do not interact, which
many scientific models break: message passing over a graph whose connectivity is passed
separately (the copies run on another graph), an adaptive ODE solver (one step-size control
for every row), batch statistics, attention or pooling across the batch. So the first tiled
pass of a sweep carries one more copy, left unchanged, and its metric must equal the
untiled run's (within the profile's tolerance of the metric's dtype, 1e-5 of its scale in
float32, :func:`scimech.capture.profile.tolerance`); where it does not, or where the tiled pass
fails, every site gets a forward pass of its own, and the result says so in its attrs
(``row_check``, ``sweep_path="per_site"``). The control copy cannot see a coupling whose shared
step its own rows set (an adaptive solver whose step follows the batch's largest error, where the
changed copies err less), so the model profile's rows check (the first half of the rows alone,
measured on the unchanged batch at no pass more) decides first: rows that interact there run one
site per pass from the start. Before any site is changed, the first batch runs
unchanged once more: a model whose output on the same input changes between passes (state
kept across calls, random draws) would add that change to every effect, and is refused.

A *target* is a site with the calls it changes (:mod:`scimech.capture.calls`); with ``by_call`` a
sweep has one target per (site, call), the effect of each step of a rollout.

Where the metric reads one position of its output alone, the modules after the sites that act
on each position alone compute that position only (:meth:`~scimech.causal.prefix_reuse.CallTrace.tail`);
the first pass that does so carries the unchanged copy too, and where its metric differs from the
untiled run's, every pass computes them in full (attrs ``sweep_tail``).

Every sweep is one batch loop, :func:`sweep_batches`, around its *setter*: what a changed site
gets. :func:`~scimech.causal.intervene.ablation_sweep` supplies the ablation method's replacement,
:func:`~scimech.causal.intervene.patching_sweep` the source run's activations
(:func:`source_setter`), and the verification of attribution patching the same source on the
batch it kept (:func:`sweep_tiles` with a :class:`TilePlan`). A new sweep is a new setter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from scimech.capture.batches import batch_size_of, is_graph_batch, n_samples_of, tile_batch
from scimech.capture.calls import CallPolicy, repeat_message, shortfall
from scimech.capture.hooks import HookSet, run_forward
from scimech.capture.profile import ModelProfile, same_values
from scimech.capture.record import Recorder
from scimech.capture.session import Session
from scimech.capture.sites import HeadLayout, ResolvedSite, resolve_site
from scimech.causal.metrics import Metric, as_metric
from scimech.causal.prefix_reuse import Shortcut, at_position, recording_reused, reusing, trace_calls
from scimech.causal.samples import per_sample as _per_sample
from scimech.causal.samples import sample_index
from scimech.errors import DataValidationError, SiteCalledTwiceError, SiteNeverRanError
from scimech.run.memory import steady_heap
from scimech.run.progress import bar as _bar

__all__ = [
    "Target",
    "Reuse",
    "RowCheck",
    "TilePlan",
    "Setter",
    "SweepRun",
    "sweep_batches",
    "source_setter",
    "unchanged_pass",
    "check_source",
    "sites_per_forward",
    "sweep_tiles",
    "plan_reuse",
    "capturing",
    "count_calls",
    "targets_for",
    "site_list",
    "sweep_target",
    "patching_inputs",
    "normalized_effect",
]


@dataclass(frozen=True)
class Target:
    """One site of a sweep with the calls it changes (``policy``)."""

    site: ResolvedSite
    policy: CallPolicy


def targets_for(
    resolved: Sequence[ResolvedSite], policy: CallPolicy, by_call: bool, counts: Mapping[str, int] | None
) -> tuple[list[Target], list[int] | None]:
    """The targets of a sweep and, with ``by_call``, the call indices (one target per site and call)."""
    if not by_call:
        return [Target(s, policy) for s in resolved], None
    if policy.mode == "index":
        calls = list(policy.indices)
    elif policy.mode == "all":
        n = set((counts or {}).values())
        if len(n) != 1:
            raise DataValidationError(
                f"by_call=True with calls='all': the sites run different numbers of times per "
                f"forward pass ({dict(counts or {})}); give the calls as a list."
            )
        calls = list(range(n.pop()))
    else:
        raise ValueError("by_call=True needs calls='all' or a list of call indices (one effect per call).")
    return [Target(s, CallPolicy("index", (c,))) for s in resolved for c in calls], calls


@dataclass
class RowCheck:
    """Whether tiling is right for this model: ``None`` until checked, then the verdict."""

    coupled: bool | None = None
    note: str = ""
    #: the model's profile, which keeps the verdict for later sweeps (:mod:`scimech.causal.model_profile`)
    profile: ModelProfile | None = None

    @classmethod
    def of(cls, profile: ModelProfile | None) -> RowCheck:
        """A row check that starts from the verdict a profile keeps (none yet: checked in the first tiled pass)."""
        check = cls(profile=profile)
        if profile is not None and profile.rows_coupled:
            # measured on the unchanged batch: a tiled pass's control copy cannot see a coupling whose shared
            # step its own rows set (an adaptive solver's largest error), so every site runs a pass of its own
            check.coupled, check.note = True, f"the model profile: {profile.rows_interact}"
        elif profile is not None and profile.tiling is not None:
            check.coupled, check.note = profile.tiling
        return check

    def settle(self, coupled: bool, note: str) -> None:
        """The verdict, kept in the profile."""
        self.coupled, self.note = coupled, note
        if self.profile is not None:
            self.profile.tiling = (coupled, note)

    def attrs(self) -> dict[str, str]:
        if self.coupled is None:
            return {"row_check": "not needed: one site per forward pass, nothing tiled"}
        if self.coupled:
            return {
                "row_check": f"coupled: {self.note}",
                "sweep_path": "per_site",
                "sweep_path_note": "rows of a tiled batch interact, so every site ran in a forward pass of its "
                "own (no tiling, no prefix reuse)",
            }
        return {"row_check": f"independent: {self.note}"}


@contextmanager
def _tiled(
    targets: Sequence[Target],
    block: int,
    n_tiles: int,
    make: Callable,
    s: Session,
    last: Mapping[str, int],
):
    """Hooks where tile ``i`` (rows ``i*block:(i+1)*block``) gets ``make(i, site, current, call)``
    at the calls target ``i`` changes; tiles beyond the targets are left unchanged.

    Targets on the same module and port share one hook, which copies the tensor once and
    writes each target's tile in place. A site that never ran, or never reached a call asked
    for, raises :class:`~scimech.errors.SiteNeverRanError` (named by the session's verb).
    """
    what, model = s.verb, s.model
    groups: dict[tuple[int, str], list[tuple[int, Target]]] = {}
    rows = block * n_tiles
    for i, tg in enumerate(targets):
        groups.setdefault((id(tg.site.module), tg.site.port), []).append((i, tg))

    with ExitStack() as stack:
        hooksets = []
        for members in groups.values():
            # the tiling hook function needs its HookSet (the call under way): set just below
            h = HookSet([members[0][1].site], _unchanged)

            def fn(_s: ResolvedSite, t: torch.Tensor, _members=members, _h=h):
                c = _h.call
                acting = []
                for i, tg in _members:
                    if tg.policy.mode == "error" and c >= 1:
                        raise SiteCalledTwiceError(repeat_message(tg.site.name, tg.site.module, model, what))
                    if tg.policy.acts(c, last.get(tg.site.name)):
                        acting.append((i, tg.site))
                if not acting:
                    return None
                whole = _s.axes is not None and _s.axes.unbatched  # one sample, never tiled (sweep_tiles)
                if not whole and t.shape[0] != rows:
                    raise DataValidationError(
                        f"Site {_s.name!r} has a leading dim of {t.shape[0]}, but the tiled batch has {rows} rows. "
                        "Sweeps need activations batched on dim 0: use batch_first=True modules, or a forward= "
                        "that transposes sequence-first tensors."
                    )
                out = t.clone()
                for i, s in acting:
                    tile = out if whole else out[i * block : (i + 1) * block]
                    s.assign_(tile, make(i, s, s.select(tile), c))
                return out

            h.fn = fn
            hooksets.append((stack.enter_context(h), members))
        yield
        for h, members in hooksets:
            name0 = members[0][1].site.name
            s.fired({tg.site.name: h.fired[name0] for _, tg in members})
            h.end_pass()
            for counts in h.passes:
                for _, tg in members:
                    lack = shortfall(tg.policy, counts.get(name0, 0), last.get(tg.site.name))
                    if lack:
                        raise SiteNeverRanError(f"{what}: site {tg.site.name!r} {lack}")


def sites_per_forward(n_sites: int, batch: int, max_rows: int) -> int:
    return max(1, min(n_sites, max_rows // max(batch, 1)))


def _unchanged(site: ResolvedSite, t: torch.Tensor) -> None:
    """A hook function that leaves every activation as it is."""
    return None


@dataclass
class TilePlan:
    """What the tiled passes of one batch need beside the batch and the setter.

    ``session``: the verb's session (model, ``forward=``, the verb's name, metric values);
    ``targets``: the sites (with their calls) changed one per tile; ``metric``; ``max_rows``:
    rows of one tiled pass; ``reuse``: what is taken from the unchanged run
    (:mod:`scimech.causal.prefix_reuse`); ``last``: per site, the index of its last call in the
    unchanged run (``calls="last"``); ``check``: the sweep's row check (``None``: none);
    ``advance``: called with the number of targets each pass finished (a progress bar);
    ``position``: ``(index, length)`` where the metric reads that one position of its output's
    dim 1 alone (:attr:`~scimech.causal.metrics.Metric.reads`), so the modules after the sites that
    act on each position alone compute it only (:meth:`~scimech.causal.prefix_reuse.CallTrace.tail`);
    ``tails``: filled with the modules so computed.
    """

    session: Session
    targets: Sequence[Target]
    metric: Metric
    max_rows: int
    reuse: Reuse | None = None
    last: Mapping[str, int] = field(default_factory=dict)
    check: RowCheck | None = None
    advance: Callable[[int], None] | None = None
    position: tuple[int, int] | None = None
    tails: set[str] = field(default_factory=set)


@steady_heap()  # big tiled temporaries reused, not paged in afresh (scimech.run.memory)
def sweep_tiles(
    plan: TilePlan,
    batch: Any,
    make: Callable,
    tgt: Any = None,
    baseline: torch.Tensor | None = None,
    per_sample: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """The (target, sample) metric of ``batch`` with each target set by the setter's
    ``make(i, site, current, call)``, several targets per tiled forward pass (one per tile).

    With ``plan.reuse``, targets are grouped by the modules they can take from the unchanged run
    (in a block model: by block), and each group's forwards reuse them (:mod:`scimech.causal.prefix_reuse`).
    ``plan.check``: the sweep's row check; the first tiled pass carries an unchanged copy whose
    metric must equal ``baseline`` (the untiled run), else one target runs per pass and no
    module is reused from then on. ``per_sample``: per-row values summed per sample.

    With ``plan.position``, the modules of each group's tail compute the position the metric
    reads alone. The first pass that does so on a model carries the unchanged copy too; where its
    metric differs from ``baseline`` (something between them mixes positions) the pass runs again
    in full, and so does every later one (the verdict is kept with the model's trace).
    """
    s, targets, metric, reuse, check = plan.session, plan.targets, plan.metric, plan.reuse, plan.check
    model, forward, last = s.model, s.forward, plan.last
    b = batch_size_of(batch)
    n_out = len(baseline) if baseline is not None else b
    # results, bound for numpy, in the metric's precision
    row = torch.empty(len(targets), n_out, device="cpu", dtype=torch.float32 if baseline is None else baseline.dtype)
    k = sites_per_forward(len(targets), b, plan.max_rows)
    if check is not None and check.coupled:
        k, reuse = 1, None
    if any(tg.site.axes is not None and tg.site.axes.unbatched for tg in targets):
        k = 1  # a site that holds one sample (an unbatched graph's edges) has no rows to tile
    groups: dict[Shortcut, list[int]] = {}
    for j, tg in enumerate(targets):
        groups.setdefault(reuse.plan[tg.site.name] if reuse else Shortcut(), []).append(j)
    recorded = reuse.recorded if reuse else {}
    done: set[int] = set()
    pending = [
        (shortcut, members[g : g + k]) for shortcut, members in groups.items() for g in range(0, len(members), k)
    ]
    trace = reuse.trace if reuse is not None and plan.position is not None else None
    told = (metric.name, plan.position)  # the tail's verdict, kept with the trace
    while pending:
        shortcut, idx = pending.pop(0)
        group = [targets[j] for j in idx]
        n = len(group)
        verdict = trace.tail_checked.get(told) if trace is not None else None
        tail: tuple[str, ...] = ()
        if trace is not None and plan.position is not None and (verdict is None or verdict[0]):
            tail = trace.tail([tg.site for tg in group], plan.position[1])
        checking_tail = bool(tail) and verdict is None
        if checking_tail and (k < 2 or baseline is None):
            tail, checking_tail = (), False  # checked in a tiled pass, which has room for the unchanged copy
        control = baseline is not None and ((n > 1 and check is not None and check.coupled is None) or checking_tail)
        tiles = n + int(control)
        try:
            # reuse first, site hooks second: a site on a reused module patches its reused output
            with (
                reusing(model, recorded, shortcut, tiles),
                _tiled(group, b, tiles, make, s, last),
                at_position(model, tail, plan.position[0] if plan.position else -1),
            ):
                out = run_forward(model, tile_batch(batch, tiles) if tiles > 1 else batch, forward)
            vals = s.values(metric, out, tgt if tgt is None or tiles == 1 else tile_batch(tgt, tiles))
            vals = vals.reshape(tiles, -1)
            if per_sample is not None:  # per-row values summed per sample, tile by tile
                vals = torch.stack([per_sample(v) for v in vals])
            if control:
                assert baseline is not None  # as control says
                # NaN at the same places (land points) agree; the rest within the tolerance of the
                # metric's own dtype (bfloat16 / float16: another batch size sums in another order)
                ok, rel = same_values(vals[-1], baseline, s.metric_tolerance)
                if checking_tail:
                    assert trace is not None  # as checking_tail says
                    trace.tail_checked[told] = (ok, _tail_note(ok, rel, tiles, metric.name, plan.position, tail))
                    if not ok:  # the tail (or the tiling): this group again, in full, still checked
                        pending.insert(0, (shortcut, idx))
                        continue
                if check is not None and check.coupled is None:
                    check.settle(
                        not ok,
                        f"an unchanged copy in the first tiled pass of {tiles} copies gave the untiled run's "
                        f"{metric.name} to {rel:.1e} of its scale"
                        if ok
                        else f"an unchanged copy in a tiled pass of {tiles} copies changed {metric.name} by "
                        f"{rel:.1e} of its scale (rows interact: a graph passed separately, an adaptive solver, "
                        "batch statistics or attention across the batch)",
                    )
                vals = vals[:-1]
        except (SiteCalledTwiceError, SiteNeverRanError):
            raise
        except Exception as err:  # noqa: BLE001 - a tiled pass that fails: the rows are not independent
            if not control:
                raise
            if checking_tail:
                assert trace is not None  # as checking_tail says
                trace.tail_checked[told] = (
                    False,
                    f"the pass with the tail at one position failed ({type(err).__name__})",
                )
                pending.insert(0, (shortcut, idx))
                continue
            assert check is not None  # as control says
            check.settle(True, f"the tiled forward pass failed ({type(err).__name__}: {str(err)[:160]})")
        if control and check is not None and check.coupled:
            # found just now: every target again, one forward pass each, nothing reused
            pending = [(Shortcut(), [j]) for j in range(len(targets))]
            continue
        row[idx] = vals.reshape(n, -1)
        plan.tails.update(tail)
        if plan.advance is not None:  # targets done for the first time (a per-site rerun counts once)
            plan.advance(len(set(idx) - done))
            done.update(idx)
    return row


def _tail_note(ok: bool, rel: float, tiles: int, name: str, position: Any, tail: Sequence[str]) -> str:
    at = f"position {position[0]} of {position[1]}"
    if ok:
        return (
            f"{len(tail)} modules after the sites that act on each position alone ({', '.join(tail[:4])}"
            f"{', ...' if len(tail) > 4 else ''}) computed at {at} only, the one {name} reads: an unchanged "
            f"copy in the first such pass of {tiles} copies gave the full run's {name} to {rel:.1e} of its scale"
        )
    return (
        f"computed in full: with the modules after the sites at {at} only, an unchanged copy changed "
        f"{name} by {rel:.1e} of its scale (something after them mixes positions)"
    )


@dataclass
class Reuse:
    """What a sweep reuses: ``plan[site]``, and what was recorded for it in the current batch;
    ``trace``: the model's call trace it was planned from."""

    plan: dict[str, Shortcut]
    recorded: dict[tuple[str, str], Any] = field(default_factory=dict)
    trace: Any = None

    def n_modules(self) -> int:
        return len(
            {n for sc in self.plan.values() for n in sc.reused}
            | {sc.resume.outer for sc in self.plan.values() if sc.resume is not None}
        )


def check_source(site: str, src: torch.Tensor, cur: torch.Tensor, verb: str) -> None:
    """Patching pairs row ``i`` of the source run with row ``i`` of the run patched into: the
    two activations must have one shape (torch would broadcast a length-1 sequence silently)."""
    if tuple(src.shape) != tuple(cur.shape):
        raise DataValidationError(
            f"{verb}: the source run's activation at {site!r} has shape {tuple(src.shape)} but the run patched into "
            f"has {tuple(cur.shape)}. Clean and corrupted inputs are paired row for row and must give one shape per "
            "sample: the same sequence length (pad them to one length), the same grid, graphs with the same nodes."
        )


def source_at(source: torch.Tensor | Sequence[torch.Tensor], policy: CallPolicy, call: int) -> torch.Tensor:
    """The source activation for call ``call``: ``source`` recorded call by call (a list, policies
    other than ``"error"``; calls may change shape), with every call stacked on dim 1, or one
    call (``"error"``)."""
    if policy.mode == "error":
        return cast(torch.Tensor, source)  # one call's activation: "error" records no more
    calls = source.unbind(1) if isinstance(source, torch.Tensor) else source
    if policy.mode == "last":
        return calls[-1]
    if call >= len(calls):
        raise DataValidationError(
            f"The source run has {len(calls)} call(s) of the site but the patched run reached call {call} (a number "
            "of calls that depends on the input, as an adaptive solver's steps): there is no source for that call. "
            f"Patch the calls both runs make, calls={list(range(len(calls)))} (later calls run unpatched), or "
            "calls='last', or use a fixed-step solver."
        )
    return calls[call]


def source_make(source: Mapping[str, torch.Tensor | Sequence[torch.Tensor]], policy: CallPolicy, verb: str) -> Callable:
    """The patching setter's ``make``: each target gets the source run's activation at its site and
    call (``source[site]``: one tensor, every call stacked on dim 1, or a list of the calls:
    :func:`source_at`), checked against the run patched into, row for row."""
    pol = CallPolicy("error") if policy.mode == "error" else policy

    def make(i, s, cur, call):
        src = source_at(source[s.name], pol, call)
        check_source(s.name, src, cur, verb)
        return src.to(cur.dtype)

    return make


def plan_reuse(
    model: nn.Module,
    batch: Any,
    resolved: Sequence[ResolvedSite],
    forward: Callable | None,
    enabled: bool,
    prof: ModelProfile | None = None,
) -> tuple[Reuse | None, dict[str, Any]]:
    """Trace the model once and decide what each site's runs reuse; attrs saying which path runs.
    The trace is kept in the model's profile (``prof``): a later sweep on the same model, forward
    and input signature plans from it without tracing again."""
    if not enabled:
        return None, {"sweep_path": "batched", "sweep_path_note": "reuse_prefix=False"}
    try:
        trace = prof.call_trace if prof is not None and prof.call_trace is not None else None
        if trace is None:
            trace = trace_calls(model, batch, forward)
            if prof is not None:
                prof.call_trace = trace
    except Exception as err:  # the optimisation is off; the sweep itself reports real errors
        return None, {
            "sweep_path": "batched",
            "sweep_path_note": f"tracing the model failed ({type(err).__name__}: {err})",
        }
    plan = {s.name: trace.shortcut(s) for s in resolved}
    if not any(plan.values()):
        return None, {
            "sweep_path": "batched",
            "sweep_path_note": "no module finishes before any site runs, so "
            "nothing can be reused (not a sequence of blocks, or the sites come first)",
        }
    reuse = Reuse(plan, trace=trace)
    n_resumed = sum(sc.resume is not None for sc in plan.values())
    return reuse, {
        "sweep_path": "prefix_reuse",
        "sweep_path_note": f"{len(resolved)} sites in {len(set(plan.values()))} groups reuse the unpatched "
        f"run's outputs of {reuse.n_modules()} modules; {n_resumed} sites resume their "
        "enclosing module at the site",
    }


@contextmanager
def capturing(model: nn.Module, reuse: Reuse | None, rows: int):
    """Record the reused modules' outputs during the unpatched run of a batch."""
    if reuse is None:
        yield
        return
    with recording_reused(model, list(reuse.plan.values()), rows) as got:
        yield
    reuse.recorded = got


@contextmanager
def count_calls(resolved: Sequence[ResolvedSite], enabled: bool = True):
    """Count the calls of each site in the forward passes of the block: yields a dict filled on
    exit with the calls of each site in the last pass."""
    got: dict[str, int] = {}
    if not enabled:
        yield got
        return
    with HookSet(resolved, lambda s, t: None) as h:
        yield got
    h.end_pass()
    if h.passes:
        got.update(h.passes[-1])


def site_list(sites: str | Sequence[str]) -> list[str]:
    """Site strings as a list (one string is one site)."""
    return [sites] if isinstance(sites, str) else list(sites)


def sweep_target(target: Any, metric: Metric, n: int | None) -> Any:
    """The per-sample target of a sweep: ``target=``, else the metric's own ``reference``."""
    t = target if target is not None else getattr(metric, "reference", None)
    if t is not None and n is not None and len(t) != n:
        raise DataValidationError(
            f"target / metric reference has {len(t)} rows but the inputs have {n}; give one row per input sample."
        )
    return t


def patching_inputs(
    model: nn.Module,
    clean: Any,
    corrupted: Any,
    sites: Sequence[str],
    metric,
    direction: str,
    target: Any,
    layouts: Mapping[str, HeadLayout] | None,
    axes=None,
) -> tuple[list[str], Metric, int, Any, list[ResolvedSite]]:
    """Checked arguments of a patching run: ``(sites, metric, n, target, resolved sites)``."""
    if direction not in ("denoising", "noising"):
        raise ValueError(f"direction must be 'denoising' or 'noising'; got {direction!r}.")
    sites = site_list(sites)
    metric = as_metric(metric)
    n_clean, n_corr = n_samples_of(clean), n_samples_of(corrupted)
    if n_clean != n_corr:
        raise DataValidationError(f"clean has {n_clean} rows and corrupted {n_corr}; patching needs pairs.")
    if is_graph_batch(clean) and is_graph_batch(corrupted):
        sizes = [np.bincount(b.batch.cpu().numpy(), minlength=b.num_graphs) for b in (clean, corrupted)]
        if not np.array_equal(sizes[0], sizes[1]):
            bad = int(np.flatnonzero(sizes[0] != sizes[1])[0])
            raise DataValidationError(
                f"Graph {bad} has {sizes[0][bad]} nodes in clean and {sizes[1][bad]} in corrupted: patching sets each "
                "node of a clean graph from the same node of its corrupted pair, so paired graphs need the same nodes "
                "(the same graph with other features)."
            )
    target = sweep_target(target, metric, n_clean)
    return sites, metric, n_clean, target, [resolve_site(model, s, layouts, axes) for s in sites]


def normalized_effect(
    patched: np.ndarray, clean: np.ndarray, corrupted: np.ndarray, usable: np.ndarray | None = None
) -> np.ndarray:
    """``(patched - corrupted) / (clean - corrupted)`` per (site, sample); NaN where clean ==
    corrupted, and where ``usable`` (per sample) is False: a difference at the metric's noise
    floor (:meth:`scimech.capture.session.Session.normalisable`)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = clean - corrupted
        ok = np.abs(denom) > 0 if usable is None else usable & (np.abs(denom) > 0)
        return np.where(ok, (patched - corrupted[None]) / denom[None], np.nan)


# -- the one batch loop of every sweep ------------------------------------------------------------

#: A sweep's setter: ``setter(batch, source_batch, target, per_sample) -> (make, source values)``,
#: called once per batch before its unchanged pass. ``make(i, site, current, call)`` is what
#: target ``i`` gets at ``site`` (``current``: the site's activation in the tile); the source values
#: are the metric of a source run (patching), or ``None``.
Setter = Callable[[Any, Any, Any, Callable | None], tuple[Callable, torch.Tensor | None]]


@dataclass
class SweepRun:
    """What the batch loop of a sweep gives: per sample, the metric of the unchanged run
    (``baseline``) and of the setter's source run (``source``, patching; else ``None``); per
    target and sample, the metric with the target changed (``changed``); the call indices of a
    sweep by call (``calls``); and the attrs saying which path ran and the row check."""

    baseline: torch.Tensor
    source: torch.Tensor | None
    changed: torch.Tensor
    calls: list[int] | None
    attrs: dict[str, Any]


def unchanged_pass(
    s: Session,
    batch: Any,
    resolved: Sequence[ResolvedSite],
    reuse: Reuse | None,
    rows: int,
    counting: bool,
    first: bool,
) -> tuple[Any, dict, RowCheck | None]:
    """A sweep's unchanged pass of ``batch`` (its prefix captured for reuse, each site's calls
    counted): the outputs, the calls, and on the ``first`` batch the profile's verdict on it
    (repeatable passes, packed rows, rows that interact; folded into this pass) as the sweep's :class:`RowCheck`
    (``None`` on later batches)."""
    with capturing(s.model, reuse, rows), count_calls(resolved, counting) as counts:
        out = s.run(batch)
    if not first:
        return out, counts, None
    prof = s.check(batch, {"repeatable", "packing", "coupling"}, sites=resolved, outputs=out)
    return out, counts, RowCheck.of(prof)


def source_setter(s: Session, resolved: Sequence[ResolvedSite], metric: Metric) -> Setter:
    """The patching setter: the source batch runs with its activations recorded at every site
    (every call kept where calls are chosen), and each target gets the source's activation."""
    policy = s.calls

    def setter(batch, source_batch, tgt, agg):
        with Recorder(s.model, resolved, calls="error" if policy.mode == "error" else "all", verb=s.verb) as rec:
            out = s.run(source_batch)
        s.fired(rec)
        # call by call where calls are chosen: calls of changing shape are patched each from its own
        source = dict(rec.canonical) if policy.mode == "error" else rec.per_call
        with s.grad():
            values = s.values(metric, out, tgt, agg)
        return source_make(source, policy, s.verb), values

    return setter


def sweep_batches(
    s: Session,
    batches: Iterable[tuple[int, Any, Any]],
    resolved: Sequence[ResolvedSite],
    metric: Metric,
    setter: Setter,
    *,
    target: Any = None,
    by_call: bool = False,
    reuse_prefix: bool = True,
    max_rows: int = 256,
    progress: bool | None = None,
) -> SweepRun:
    """The batch loop of every sweep: for each ``(start, batch, source_batch)`` (``start``: the
    batch's first sample), the setter's source run, the unchanged pass of ``batch`` (the first
    batch's checked by the profile and traced for prefix reuse), and the tiled passes with one
    target changed per tile by the setter (:func:`sweep_tiles`). Calls, ``forward=``, samples and
    the verb's name come from the session ``s``. A progress bar counts the targets done, batch by
    batch (``progress``: :func:`scimech.run.progress.progress_enabled`)."""
    policy = s.calls
    counting = policy.mode == "last" or (by_call and policy.mode == "all")
    base_v: list[torch.Tensor] = []
    src_v: list[torch.Tensor] = []
    changed: list[torch.Tensor] = []
    reuse: Reuse | None = None
    path: dict[str, Any] = {}
    check = RowCheck()
    targets: list[Target] | None = None
    call_list: list[int] | None = None
    tails: set[str] = set()
    bar = _bar(None, s.verb, progress, unit="site")  # closed below, or when dropped on an error
    for i, (start, batch, source_batch) in enumerate(batches):
        with s.grad(batch):  # the autograd mode the model needs (its profile's; found by the first pass)
            b = batch_size_of(batch)
            tgt = None if target is None else target[start : start + n_samples_of(batch)]
            if i == 0:
                reuse, path = plan_reuse(s.model, batch, resolved, s.forward, reuse_prefix, s.profile)
            idx = sample_index(batch, s.samples)
            agg = None if idx is None else (lambda v, _i=idx: _per_sample(v, _i))
            make, src = setter(batch, source_batch, tgt, agg)
            out, counts, first = unchanged_pass(s, batch, resolved, reuse, b, counting, i == 0)
            check = first if first is not None else check
        with s.grad():
            base = s.values(metric, out, tgt, agg)
            if targets is None:
                targets, call_list = targets_for(resolved, policy, by_call, counts)
            bar.total = (bar.total or 0) + len(targets)  # each batch: every target once more
            bar.set_description(s.verb if i == 0 else f"{s.verb}, batch {i + 1}", refresh=False)
            last = {n: c - 1 for n, c in counts.items()} if policy.mode == "last" else {}
            reads = getattr(metric, "reads", None)
            position = reads(out) if reads is not None and reuse is not None else None
            plan = TilePlan(s, targets, metric, max_rows, reuse, last, check, bar.update, position)
            changed.append(sweep_tiles(plan, batch, make, tgt, base, agg))
            tails |= plan.tails
        base_v.append(base)
        if src is not None:
            src_v.append(src)
    bar.close()
    if not base_v:
        raise ValueError(f"{s.verb} got no inputs: the dataset is empty.")
    return SweepRun(
        torch.cat(base_v),
        torch.cat(src_v) if src_v else None,
        torch.cat(changed, dim=1),
        call_list,
        {**path, **check.attrs(), **_tail_attrs(reuse, metric, tails)},
    )


def _tail_attrs(reuse: Reuse | None, metric: Metric, used: set[str]) -> dict[str, str]:
    """``sweep_tail``: which modules after the sites computed the one position the metric reads
    alone, and how that was checked, or why they ran in full (only for a metric that reads one
    position, on the prefix reuse path)."""
    trace = reuse.trace if reuse is not None else None
    got = [v for k, v in (trace.tail_checked.items() if trace is not None else ()) if k[0] == metric.name]
    if getattr(metric, "reads", None) is None or trace is None or not got:
        return {}
    ok, note = got[-1]
    if ok and used:
        return {"sweep_tail": f"{note}; {len(used)} modules so computed in this sweep"}
    return {"sweep_tail": note}
