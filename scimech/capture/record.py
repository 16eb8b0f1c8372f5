"""Recording activations at named sites of any ``nn.Module`` into xarray.

>>> with Recorder(model, ["encoder.0.attn.heads[3]", "encoder.1"]) as rec:   # doctest: +SKIP
...     model(x)
>>> rec.activations["encoder.1"].shape

>>> ds = record(model, inputs, ["encoder.0", "encoder.1"], reduce="mean")    # doctest: +SKIP
>>> ds["encoder.1"].dims      # ('sample', 'feature')

Only the named sites are kept (never a cache of everything); ``reduce`` shrinks each
activation over positions before it is stored; ``to_zarr`` streams batch by batch to
disk for recordings larger than memory; ``stop_early`` ends each forward pass after the
last site has fired.
"""

from __future__ import annotations

import functools
import itertools
import os
import warnings
import weakref
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import torch
import xarray as xr
from torch import nn
from xarray.indexes import PandasIndex

from scimech.capture.batches import batch_size_of, is_one_batch, iter_batches, n_samples_of
from scimech.capture.calls import CallPolicy, Calls, Pass, current_pass, shortfall
from scimech.capture.hooks import HookSet, StopForward, run_forward
from scimech.capture.layout import Axes
from scimech.capture.session import Session
from scimech.capture.sites import HeadLayout, ResolvedSite, resolve_site
from scimech.errors import DataValidationError, DimensionError
from scimech.run.options import removal_notice
from scimech.run.progress import progress as _progress

__all__ = ["Recorder", "record", "stack_sites", "Reduce", "Repeat", "Calls"]

Reduce = Literal["mean", "last", "first", "max"] | Callable[[torch.Tensor], torch.Tensor] | None
Repeat = Literal["error", "stack", "last"]


def _calls_from(calls, repeat, verb: str) -> Calls:
    """``calls=``, or the old ``repeat=`` spelling (``"stack"`` is ``calls="all"``) with a warning
    (parsed by the verb's session)."""
    if repeat is not None:
        notice = removal_notice("repeat=", "calls= (repeat='stack' is calls='all')")
        warnings.warn(f"{verb}: {notice}", DeprecationWarning, stacklevel=3)
        if calls not in (None, "error"):
            raise ValueError(f"{verb}: give calls= or the old repeat=, not both.")
        if repeat not in ("error", "stack", "last"):
            raise ValueError(f"repeat must be 'error', 'stack' or 'last'; got {repeat!r}.")
        calls = "all" if repeat == "stack" else repeat
    return "error" if calls is None else calls


def _reduce(t: torch.Tensor, how: Reduce, head_split: bool) -> torch.Tensor:
    """Reduce over the positions of a canonical ``(B, *positions, feature)`` tensor (``(B,
    *positions, head, head_dim)`` with ``head_split``): every position axis (windows, tokens,
    grid points) is flattened into one, dim 1, and reduced; the features are kept."""
    if how is None:
        return t
    trailing = 2 if head_split else 1
    last_pos = t.dim() - 1 - trailing
    if last_pos < 1:
        return t
    t = t.flatten(1, last_pos)
    if callable(how):
        return how(t)
    if how == "mean":
        return t.mean(dim=1)
    if how == "max":
        return t.amax(dim=1)
    if how == "last":
        return t[:, -1]
    if how == "first":
        return t[:, 0]
    raise ValueError(f"reduce must be None, 'mean', 'max', 'first', 'last' or a callable; got {how!r}.")


class Recorder:
    """Capture activations at named sites during forward passes.

    Parameters
    ----------
    model
        Any ``nn.Module``.
    sites
        Site strings (see :mod:`scimech.capture.sites`), or sites already resolved.
    reduce
        ``None`` (keep positions), ``"mean"``, ``"max"``, ``"first"``, ``"last"`` or a
        callable applied to each ``(B, N, feature)`` activation, where every position axis
        of the site's layout (tokens, windows, grid points) is flattened into dim 1.
    calls
        Which calls of a site that runs more than once in one forward pass (RNN or solver
        steps, weight sharing, a rollout) are kept (:mod:`scimech.capture.calls`): ``"error"``
        (default), ``"all"`` (a new dim 1 indexes the calls), ``"last"``, an index ``k`` or a
        list of indices (a dim 1 in their order). ``repeat=`` is the old spelling
        (``"stack"`` = ``"all"``), deprecated.
    stop_early
        End each forward pass (an internal :class:`~scimech.capture.hooks.StopForward`, swallowed
        by the Recorder, :meth:`forward` and :func:`record`) once every site has fired
        enough. With ``calls="error"`` the first pass inside the ``with`` block runs to the
        end (a second call would be an error), later ones stop after each site's first
        call; with call indices every pass stops after the highest index; with ``"all"`` or
        ``"last"`` passes never stop early (how many calls a pass makes can depend on the
        data, as an adaptive solver's steps do).
    detach
        Store detached tensors (default); ``False`` keeps the graph (for gradients).
    layouts
        Extra :class:`~scimech.capture.sites.HeadLayout` by attention-module path.
    axes
        Activation layouts (:mod:`scimech.capture.layout`): one string for every site, or a dict by
        site or module path, e.g. ``{"unet.down.0": "batch channel y x"}``.
    verb
        The name its messages start with: the verb that records (default ``"Recorder"``).

    Attributes
    ----------
    activations : dict[str, torch.Tensor]
        The captured tensors of the last forward pass, by site (``calls="all"`` or a list: calls
        stacked on a new dim 1).

    Examples
    --------
    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    >>> with sm.Recorder(model, ["0", "1"]) as rec:
    ...     y = model(torch.ones(2, 3))
    >>> {site: tuple(a.shape) for site, a in rec.activations.items()}
    {'0': (2, 4), '1': (2, 4)}
    >>> torch.equal(rec.activations["1"], rec.activations["0"].clamp(min=0))  # the ReLU's output
    True
    """

    def __init__(
        self,
        model: nn.Module,
        sites: Sequence[str | ResolvedSite],
        *,
        reduce: Reduce = None,
        calls: Calls = "error",
        stop_early: bool = False,
        detach: bool = True,
        layouts: Mapping[str, HeadLayout] | None = None,
        axes=None,
        repeat: Repeat | None = None,
        verb: str = "Recorder",
    ):
        if isinstance(sites, str):
            sites = [sites]
        self.verb = verb
        # a Recorder is a block the user runs: its session parses calls= and leaves the modes alone
        self.calls = Session(model, verb, calls=_calls_from(calls, repeat, verb)).calls
        if not sites:
            raise ValueError("Recorder needs at least one site; list candidates with scimech.list_sites(model).")
        self.model = model
        self.resolved: list[ResolvedSite] = [
            s if isinstance(s, ResolvedSite) else resolve_site(model, s, layouts, axes) for s in sites
        ]
        self.reduce, self.detach = reduce, detach
        self.stop_early = bool(stop_early)
        self._calls: dict[str, list[torch.Tensor]] = {}
        self._pass: Pass | None = None
        self._expected: dict[str, int] | None = None  # calls needed per site before a pass may stop
        self._cache: dict[str, torch.Tensor] | None = None
        self._hooks: HookSet | None = None
        self._axes: dict[str, Axes] = {}
        self._root_handles: list = []
        #: sites whose activation may be kept as the model's own tensor, not a copy (``record``
        #: sets it for sites found not written in place; checked after each pass by :meth:`_settle`)
        self._alias: frozenset[str] = frozenset()
        #: whether to watch the model's tensors of the other sites for in-place writes (``record``)
        self._watch_all = False
        self._watched: dict[str, _Watch] = {}

    @property
    def canonical(self) -> dict[str, torch.Tensor]:
        """The captured tensors in each site's canonical layout ``(batch, [window], *positions,
        feature)`` (:mod:`scimech.capture.layout`): what the interventions compute with."""
        if self._cache is None:
            if self.calls.stacked:
                for k, v in self._calls.items():
                    _one_shape(k, v, self.calls)
                self._cache = {k: torch.stack(v, dim=1) for k, v in self._calls.items()}
            else:
                self._cache = {k: v[-1] for k, v in self._calls.items()}
        return self._cache

    @property
    def per_call(self) -> dict[str, list[torch.Tensor]]:
        """The captured tensors of the last forward pass, call by call (canonical layout), with
        no call axis: calls of changing shape (a decoder's growing sequence) kept as they are."""
        return {k: list(v) for k, v in self._calls.items()}

    @property
    def fired(self) -> dict[str, int]:
        """Whether each site recorded anything in the last forward pass (1) or not (0): what a
        verb's session checks (:meth:`scimech.capture.session.Session.fired`)."""
        return {s.name: int(s.name in self._calls) for s in self.resolved}

    @property
    def activations(self) -> dict[str, torch.Tensor]:
        """The captured tensors of the last forward pass, in the model's own axis order (as
        :func:`record` stores them: ``(batch, channel, y, x)`` for a CNN site)."""
        out = {}
        for site in self.resolved:
            t = self.canonical.get(site.name)
            if t is not None:
                axes = self._axes.get(site.name)
                out[site.name] = t if axes is None else t.permute(site_dims(site, axes, t.dim(), self.calls.stacked)[1])
        return out

    # hooks ---------------------------------------------------------------------------
    def _capture(self, site: ResolvedSite, t: torch.Tensor) -> None:
        """Keep one call (the HookSet counts the calls, raises a second one under ``"error"`` and
        passes on only the calls ``calls=`` asks for)."""
        p = current_pass()
        if p is not self._pass:  # a new forward pass: forget the last one's calls
            self._reset()
            self._pass = p
        x = site.select(t)
        x = _reduce(x, self.reduce, site.head_split is not None)
        if self.detach:
            x = x.detach()
        if x.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():
            # the model's own memory: a later in-place op of the model (ReLU(inplace=True), x += ...)
            # would silently change what we recorded, so it is copied, or kept and checked after the pass
            x = self._keep(site.name, t, x)
        if self.calls.stacked:
            self._calls.setdefault(site.name, []).append(x)
        else:
            self._calls[site.name] = [x]
        self._cache = None
        exp = self._expected
        if self.stop_early and exp is not None and all(self._live().pass_counts.get(k, 0) >= n for k, n in exp.items()):
            raise StopForward

    def _live(self) -> HookSet:
        """The hooks of the ``with`` block: a Recorder records only inside one."""
        if self._hooks is None:
            raise RuntimeError(
                "A Recorder records inside its with block: `with Recorder(model, sites) as rec: rec.forward(batch)`."
            )
        return self._hooks

    def _reset(self) -> None:
        self._calls, self._cache, self._watched = {}, None, {}

    def _keep(self, name: str, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """What to keep of ``x``, which shares the memory of the model's tensor ``t``: ``x`` itself
        where :attr:`_alias` allows it (one call kept, ``x`` the whole of its memory), else a copy;
        watched (its version counter, which every in-place op bumps, and whether the model still
        holds ``t``) where ``record`` checks it after the pass (:meth:`_settle`)."""
        if t.is_inference():  # no version counter to check (made under torch.inference_mode): copied
            return x.clone()
        alias = name in self._alias and not self.calls.stacked and _whole(x)
        if alias or (self._watch_all and not self.calls.stacked):
            probe = x if alias else t.detach()  # a detached alias shares t's version counter
            root = t if t._base is None else t._base  # t may be a view (the canonical one) of the model's tensor
            self._watched[name] = _Watch(weakref.ref(root), probe, probe._version, alias)
        return x if alias else x.clone()

    def _settle(self) -> tuple[dict[str, bool], set[str]]:
        """After a pass: ``(written, lost)``. ``written``: for each watched site, whether the model
        changed its tensor in place after the hook; ``lost``: the sites so written whose value was
        kept without a copy (the value at the hook is gone: the pass must run again with them
        copied). A value kept without a copy whose tensor the model still holds (and could change
        in a later pass) is copied now."""
        written, lost = {}, set()
        for name, w in self._watched.items():
            written[name] = w.probe._version != w.version
            if written[name] and w.alias:
                lost.add(name)
            elif w.alias and w.held() is not None and name in self._calls:
                self._calls[name] = [self._calls[name][-1].clone()]
                self._cache = None
        self._watched = {}
        return written, lost

    def _finish(self) -> None:
        """A pass ran to the end: check the calls asked for, and (once) decide the early stop."""
        self._pass = None
        pol = self.calls
        for s in self.resolved:
            n = self._live().pass_counts.get(s.name, 0)
            lack = shortfall(pol, n) if n else None  # a site that never ran: check_fired says so
            if lack:
                raise DimensionError(f"{self.verb}: site {s.name!r} {lack}")
        if self._expected is None and self.stop_early:
            if pol.mode == "error":
                self._expected = {s.name: 1 for s in self.resolved}
            elif pol.mode == "index":
                self._expected = {s.name: max(pol.indices) + 1 for s in self.resolved}

    def __enter__(self) -> Recorder:
        self._expected = None
        # 'last' keeps overwriting, so every call reaches _capture; the others the HookSet filters
        policy = CallPolicy("all") if self.calls.mode == "last" else self.calls
        try:
            self._hooks = HookSet(
                self.resolved,
                lambda s, t: self._capture(s, t),
                model=self.model,
                calls=policy,
                verb=self.verb,
            ).__enter__()
            self._axes = self._hooks.axes
            # before the HookSet's own hook closes the pass: a top-level model call ends a pass here
            self._root_handles.append(self.model.register_forward_hook(self._root_done, prepend=True))
        except BaseException:
            if self._hooks is not None:
                self._hooks.remove()
            self._remove_root()
            raise
        return self

    def _root_done(self, *_) -> None:
        p = current_pass()
        if p is not None and p.root and p is self._pass:
            self._finish()

    def _remove_root(self) -> None:
        while self._root_handles:
            self._root_handles.pop().remove()

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if self._hooks is not None:
                self._hooks.remove()
                self._hooks = None
        finally:
            self._remove_root()
        # the early stop we raised ourselves ends the block quietly; anything else propagates
        return exc_type is not None and issubclass(exc_type, StopForward) and self.stop_early

    @property
    def axes(self) -> dict[str, Axes]:
        """The layout of each site's activation, as met in the forward passes so far."""
        return dict(self._axes)

    def forward(self, batch: Any, forward: Callable | None = None) -> Any:
        """Run one batch (``forward(model, batch)`` or the default call) as one forward pass,
        stopping early if asked.

        Returns the model's output, or ``None`` when the pass was stopped early.
        """
        self._reset()
        self._live().end_pass()
        try:
            out = run_forward(self.model, batch, forward)
        except StopForward:
            return None
        self._finish()
        return out


def _whole(x: torch.Tensor) -> bool:
    """Whether ``x`` is all of its memory, each element once (contiguous, or a permutation of
    that): kept without a copy, it holds no more memory than its own."""
    if x.untyped_storage().nbytes() != x.numel() * x.element_size():
        return False
    strides = x.stride()
    return x.permute(sorted(range(x.dim()), key=lambda d: -strides[d])).is_contiguous()


class _Watch(NamedTuple):
    """A site's tensor watched until the end of a pass (:meth:`Recorder._settle`)."""

    held: weakref.ref  # the model's tensor: alive after the pass where the model holds it
    probe: torch.Tensor  # an alias sharing its version counter
    version: int  # that counter at the hook
    alias: bool  # whether the value kept is that alias (no copy)


def _one_shape(site: str, calls: Sequence[torch.Tensor], policy: CallPolicy) -> None:
    """Calls stacked on one call axis must have one shape; else name the call selections that work."""
    shapes = [tuple(t.shape) for t in calls]
    if len(set(shapes)) <= 1:
        return
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, shp in enumerate(shapes):
        groups.setdefault(shp, []).append(i)
    same = max(groups.values(), key=len)
    raise DimensionError(
        f"Site {site!r}: its calls in one forward pass have different shapes ({', '.join(map(str, shapes[:6]))}"
        f"{', ...' if len(shapes) > 6 else ''}; a decoder's growing sequence, attention over another axis), so they "
        f"cannot share one 'call' axis with calls={policy}. Choose calls of one shape: calls={same if len(same) > 1 else same[0]}"
        f" (shape {shapes[same[0]]}), calls='last' or one call index; or run the verb once per call."
    )


def site_dims(site: ResolvedSite, axes: Axes, ndim: int, stacked: bool) -> tuple[list[str], list[int]]:
    """Dims of a recorded site (after ``sample``, in the model's axis order) and the
    permutation from the canonical array to that order."""
    if site.head_split is not None:
        tail: tuple[str, ...] = ("head", "head_dim")
    elif site.heads is not None:
        tail = ("head_dim",)
    else:
        tail = (axes.feature_name,)
    if not stacked:
        dims, perm = axes.storage(ndim, tail)
        return dims[1:], perm
    dims, perm = axes.storage(ndim - 1, tail)  # the call axis sits right after the sample
    return ["call", *dims[1:]], [0, 1, *[p + 1 for p in perm[1:]]]


def _unique_dims(dims: Mapping[str, list[str]], shapes: Mapping[str, tuple[int, ...]]) -> dict[str, list[str]]:
    """A shared dim name must mean one size: the most common size keeps the plain name, the
    other sites get theirs prefixed with the site name (``"<site>/feature"``)."""

    counts: dict[str, Counter] = {}
    for s, shp in shapes.items():
        for d, n in zip(dims[s], shp, strict=True):
            counts.setdefault(d, Counter())[n] += 1
    keep = {d: c.most_common(1)[0][0] for d, c in counts.items()}
    return {s: [d if keep[d] == n else f"{s}/{d}" for d, n in zip(dims[s], shapes[s], strict=True)] for s in shapes}


def _to_numpy(t: torch.Tensor, dtype: str) -> np.ndarray:
    """Real activations as ``dtype``; complex ones (spectral layers) as complex64, never cut to their real part."""
    if t.is_complex():
        return t.to(torch.complex64).cpu().numpy()
    return t.float().cpu().numpy().astype(dtype, copy=False)


def record(
    model: nn.Module,
    inputs: Any,
    sites: Sequence[str],
    *,
    batch_size: int = 256,
    reduce: Reduce = None,
    calls: Calls = "error",
    forward: Callable | None = None,
    layouts: Mapping[str, HeadLayout] | None = None,
    to_zarr: str | os.PathLike | None = None,
    stop_early: bool = True,
    progress: bool = False,
    sample_coord: Sequence | np.ndarray | None = None,
    dtype: str = "float32",
    axes=None,
    repeat: Repeat | None = None,
) -> xr.Dataset:
    """Record activations at ``sites`` over a dataset, batch by batch.

    Parameters
    ----------
    model
        The model; switched to ``eval`` for the recording and restored afterwards.
    inputs
        A Tensor, or any nesting of dicts, tuples, lists and dataclasses of Tensors batched on
        dim 0, or an iterable of such batches.
    sites
        Site strings.
    batch_size
        Rows per forward pass when ``inputs`` is one big batch.
    reduce, calls, layouts, axes
        As in :class:`Recorder` (``repeat=``: the old spelling of ``calls=``, deprecated).
    forward
        ``forward(model, batch)``; default ``model(batch)`` / ``model(**batch)``.
    to_zarr
        Stream to a zarr store at this path (appended batch by batch) and return it opened
        lazily: recordings larger than memory.
    stop_early
        End each forward pass after the last site fired, from the second batch on (the first
        runs to the end to count how often each site runs): saves the rest of the network
        on every batch but the first.
    sample_coord
        Values of the ``sample`` coordinate (default 0..n-1).
    dtype
        Storage dtype of real activations; complex activations are kept complex (complex64).

    Returns
    -------
    xr.Dataset
        One variable per site (named by the site), dims ``("sample", ...)`` followed by the
        axes of the site's layout in the model's order (:mod:`scimech.capture.layout`): e.g.
        ``position, feature`` for a transformer, ``channel, y, x`` for a CNN, ``window,
        position, feature`` for windowed attention; ``head_dim`` replaces the feature axis
        of a head site (``head, head_dim`` for ``heads`` without an index); ``reduce``
        removes the position axes; ``call`` follows ``sample`` with ``calls="all"`` (coordinate:
        the call index) or a list of indices (coordinate: those indices).
        Names are prefixed by the site where sizes differ. Attrs of each variable: its
        ``module``, ``port`` and ``axes``.

    Notes
    -----
    Each value is the activation as it was when the site's module returned, even where the
    model writes into that tensor in place later (a ``ReLU(inplace=True)``, ``x += ...``). An
    activation is copied once, into the arrays of all the rows (or not at all where one batch
    holds them all), where the model's earlier passes left its tensor alone and the model does
    not hold it after the pass; a tensor the model writes into after the hook is copied at the
    hook (the first batch of a site copies it, to learn which). Version counters tell, checked
    after every pass: a write that starts later (it depends on the data) runs that batch again,
    copying the site.

    Examples
    --------
    A 2-layer model's sites are its module paths (``sm.list_sites(model)``):

    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    >>> x = torch.randn(10, 3)
    >>> ds = sm.record(model, x, ["0", "1"], batch_size=4)
    >>> ds["0"].dims, ds["0"].shape
    (('sample', 'feature'), (10, 4))
    >>> np.allclose(ds["0"], model[0](x).detach())  # the first layer's output, sample by sample
    True
    >>> bool((ds["1"] >= 0).all())  # after the ReLU
    True
    """
    if isinstance(sites, str):
        sites = [sites]
    # the verb's session: calls= parsed, eval mode (given back on leaving), the profile's checks
    with Session(
        model, "record", inputs, calls=_calls_from(calls, repeat, "record"), forward=forward, rows_are_samples=True
    ) as sess:
        resolved = [resolve_site(model, s, layouts, axes) for s in sites]
        one_sample = _one_sample_per_pass(resolved, inputs, batch_size)
        batches = _packing_checked(sess, resolved, iter_batches(inputs, batch_size))
        out = _Recording(sites, sess.calls, reduce, to_zarr, rows=None if one_sample else _rows_of(inputs))
        with Recorder(
            model,
            resolved,
            reduce=reduce,
            calls=sess.calls,
            stop_early=stop_early,
            layouts=layouts,
            axes=axes,
            verb="record",
        ) as rec:
            passes = _Passes(model, rec, sess, forward)
            for start, batch in _progress(batches, desc="recording") if progress else batches:
                # under no_grad, unless the forward takes gradients itself: found by the first pass
                # and kept in the model's profile (scimech.capture.profile), no pass of its own
                passes.run(batch)
                sess.fired(rec)
                rows = 1 if one_sample else batch_size_of(batch)
                out.add(rec, _batch_arrays(rec, sites, dtype, rows), start)
    return out.dataset(sample_coord)


def _packing_checked(sess: Session, resolved: Sequence[ResolvedSite], batches):
    """The batches, where sites declare rows packed sample by sample (``'batch*window ...'``)
    after that packing was checked once, on the first batch."""
    if not any(r.axes is not None and r.axes.windowed for r in resolved):
        return batches
    first = next(batches, None)
    if first is None:
        return batches
    sess.check(first[1], {"packing"}, sites=resolved)
    return itertools.chain([first], batches)


def _rows_of(inputs: Any) -> int | None:
    """How many rows ``record`` will store in all, where one batch of inputs whose rows are its
    samples tells it (its arrays are then filled in place, batch by batch); else ``None``."""
    if not is_one_batch(inputs):
        return None
    try:
        rows = batch_size_of(inputs)
        return rows if n_samples_of(inputs) == rows else None
    except TypeError:
        return None


#: per model, by site: whether a pass of ``record`` found the model writing in place into the
#: site's tensor after the hook (``True``: copied at the hook; ``False``: kept without a copy)
_IN_PLACE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Passes:
    """``record``'s passes, with no copy of an activation that the model leaves alone.

    A site's activation is the model's own tensor. It is kept without a copy where an earlier
    pass of the model found the tensor not written in place after the hook (:data:`_IN_PLACE`),
    else copied at the hook; every pass checks the tensors' version counters (bumped by every
    in-place op) at its end. A tensor kept without a copy but written after all (a write that
    depends on the data) costs the batch a second pass, with that site copied; a tensor the
    model still holds after the pass (and could change in a later one) is copied then.
    """

    def __init__(self, model: nn.Module, rec: Recorder, sess: Session, forward: Callable | None):
        try:
            self.known: dict[str, bool] = _IN_PLACE.setdefault(model, {})
        except TypeError:  # a model that cannot be weakly referenced: learnt for this call only
            self.known = {}
        self.rec, self.sess, self.forward = rec, sess, forward
        rec._watch_all = True

    def run(self, batch: Any) -> None:
        """One pass of ``batch`` (again, while a site kept without a copy was written after its hook)."""
        rec = self.rec
        hooks = rec._live()
        if hooks.layouts is None:  # the sites' layouts kept in the model's profile, from one call to the next
            hooks.layouts = self.sess.profile_for(batch).layouts
        while True:
            rec._alias = frozenset(s for s, written in self.known.items() if not written)
            self.sess.run(batch, functools.partial(rec.forward, batch, self.forward))
            written, lost = rec._settle()
            self.known.update(written)
            if not lost:
                return


def _batch_arrays(rec: Recorder, sites: Sequence[str], dtype: str, rows: int) -> dict[str, np.ndarray]:
    """The batch's activations as numpy arrays (canonical layout), checked to hold ``rows`` samples."""
    arrays = {s: _to_numpy(rec.canonical[s], dtype) for s in sites}
    wrong = {s: a.shape for s, a in arrays.items() if a.ndim == 0 or a.shape[0] != rows}
    if wrong:
        raise DimensionError(
            f"Site(s) {list(wrong)} have shapes {list(wrong.values())}, whose first dim is not the "
            f"batch of {rows} samples. record() needs activations batched on dim 0: use "
            "batch_first=True modules, or a forward= that transposes sequence-first tensors."
        )
    return arrays


class _Recording:
    """What ``record`` builds, batch by batch: the Dataset's dims, planned on the first batch,
    and its arrays, streamed to a zarr store, or kept in memory (filled in place where the
    number of rows is known, ``rows``; one batch kept as it is, without a copy)."""

    def __init__(self, sites: Sequence[str], policy: CallPolicy, reduce: Reduce, to_zarr, rows: int | None):
        self.sites, self.policy, self.reduce, self.rows = list(sites), policy, reduce, rows
        self.store = Path(to_zarr) if to_zarr is not None else None
        self.dims: dict[str, list[str]] | None = None
        self.perms: dict[str, list[int]] = {}
        self.attrs: dict[str, dict[str, Any]] = {}
        self.first_calls: dict[str, int] | None = None
        self.n = 0  # rows stored so far
        self.parts: dict[str, list[np.ndarray]] = {s: [] for s in sites}
        self.filled: dict[str, np.ndarray] | None = None  # arrays of all the rows, filled in place

    def add(self, rec: Recorder, arrays: dict[str, np.ndarray], start: int) -> None:
        """Store one batch's arrays (canonical layout, sample first)."""
        if self.policy.stacked:
            self.first_calls = _same_calls(arrays, self.first_calls, self.policy, start)
        if self.dims is None:
            self._plan(rec, arrays)
        n = next(iter(arrays.values())).shape[0]
        if self.store is not None:
            self._append_zarr(arrays, n)
        else:
            self._keep(arrays, n)
        self.n += n

    def _plan(self, rec: Recorder, arrays: Mapping[str, np.ndarray]) -> None:
        """Dims, axis order and attrs of every site, from the layouts met in the first batch."""
        met = rec.axes
        plan = {r.name: site_dims(r, met[r.name], arrays[r.name].ndim, self.policy.stacked) for r in rec.resolved}
        self.perms = {s: p for s, (_, p) in plan.items()}
        self.attrs = {s: {**a, "axes": str(met[s])} for s, a in _site_attrs(rec.resolved).items()}
        shapes = {s: a.transpose(self.perms[s]).shape[1:] for s, a in arrays.items()}
        self.dims = _unique_dims({s: d for s, (d, _) in plan.items()}, shapes)

    def _dataset(self, arrays: Mapping[str, np.ndarray], first: int, sample_coord=None) -> xr.Dataset:
        """The Dataset of ``arrays`` (canonical layout, sample first, from sample ``first`` on): each
        site in the model's axis order with its attrs, the ``sample`` coordinate (``sample_coord``,
        else the samples' indices), the ``call`` one where calls are stacked, the recording's attrs."""
        assert self.dims is not None
        variables = {
            s: xr.Variable(("sample", *self.dims[s]), a.transpose(self.perms[s]), self.attrs[s])
            for s, a in arrays.items()
        }
        n = next(iter(arrays.values())).shape[0]
        coords: dict[str, Any] = {
            "sample": np.arange(first, first + n) if sample_coord is None else np.asarray(sample_coord)
        }
        calls = next((v.sizes["call"] for v in variables.values() if "call" in v.dims), None)
        if calls is not None:  # the call indices kept (calls=[i, j]) or 0..n-1 (calls="all")
            coords["call"] = list(self.policy.indices) if self.policy.mode == "index" else np.arange(calls)
        return _assembled(variables, coords, _recording_attrs(self.reduce, self.policy))

    def _append_zarr(self, arrays: Mapping[str, np.ndarray], n: int) -> None:
        ds = self._dataset(arrays, self.n)  # with the attrs: appends rewrite them
        if self.n == 0:
            ds.to_zarr(self.store, mode="w", consolidated=False)
        else:
            ds.to_zarr(self.store, append_dim="sample", consolidated=False)

    def _keep(self, arrays: Mapping[str, np.ndarray], n: int) -> None:
        """Keep one batch in memory: written into the arrays of all the rows where their number is
        known (allocated on the first batch, when it is not all of them), else set aside as it is."""
        if self.rows is not None and self.n == 0 and n < self.rows:
            self.filled = {s: np.empty((self.rows, *a.shape[1:]), a.dtype) for s, a in arrays.items()}
        if self.filled is not None:
            fits = (
                self.rows is not None
                and self.n + n <= self.rows
                and all(
                    a.shape[1:] == self.filled[s].shape[1:] and a.dtype == self.filled[s].dtype
                    for s, a in arrays.items()
                )
            )
            if fits:
                for s, a in arrays.items():
                    self.filled[s][self.n : self.n + n] = a
                return
            # another shape or dtype than the first batch's: set aside, refused or joined at the end
            self.parts = {s: [f[: self.n]] for s, f in self.filled.items()}
            self.filled = None
        for s, a in arrays.items():
            self.parts[s].append(a)

    def dataset(self, sample_coord: Sequence | np.ndarray | None) -> xr.Dataset:
        """The recording: the zarr store opened lazily, or the arrays in memory."""
        if self.dims is None:
            raise ValueError("record() got no inputs: the dataset is empty.")
        if self.store is not None:
            ds = xr.open_zarr(self.store, consolidated=False)
            if sample_coord is not None:
                ds = ds.assign_coords(sample=np.asarray(sample_coord))
            return _with_attrs(_call_coord(ds, self.policy), self.attrs, self.reduce, self.policy)
        if self.filled is not None:
            return self._dataset({s: f[: self.n] for s, f in self.filled.items()}, 0, sample_coord)
        _one_size({s: [a.transpose(self.perms[s]) for a in p] for s, p in self.parts.items()})
        arrays = {s: p[0] if len(p) == 1 else np.concatenate(p, axis=0) for s, p in self.parts.items()}
        return self._dataset(arrays, 0, sample_coord)


#: xarray's private direct constructor (what ``xr.Dataset`` itself calls once its inputs are merged), if any
_DIRECT = getattr(xr.Dataset, "_construct_direct", None)


def _assembled(variables: dict[str, xr.Variable], coords: dict[str, Any], attrs: dict[str, Any]) -> xr.Dataset:
    """``xr.Dataset(variables, coords=coords, attrs=attrs)``, where each coordinate is one dimension's
    (indexed, as the constructor indexes it), put together directly: the constructor merges and
    aligns its inputs, about 0.3 ms a call with nothing to align (a sixth of ``record``'s fixed cost
    on a small batch). The constructor itself (its checks and errors) where sizes disagree, a name
    is both a site and a dimension, or xarray has no direct path (or one with another signature)."""
    build = _DIRECT
    sizes: dict[str, int] = {}
    for v in variables.values():
        for d, n in zip(v.dims, v.shape, strict=True):
            if sizes.setdefault(str(d), n) != n:
                build = None
    if build is None or any(name in sizes for name in variables):
        return xr.Dataset(variables, coords=coords, attrs=attrs)
    coord_vars: dict[str, xr.Variable] = {}
    indexes: dict[str, PandasIndex] = {}
    for name, values in coords.items():
        if np.ndim(values) != 1 or sizes.setdefault(name, len(values)) != len(values):
            return xr.Dataset(variables, coords=coords, attrs=attrs)
        var = xr.Variable((name,), values).to_index_variable()  # as the constructor makes a dimension coordinate
        index = PandasIndex.from_variables({name: var}, options={})
        coord_vars.update(index.create_variables({name: var}))
        indexes[name] = index
    try:
        return build({**variables, **coord_vars}, set(coords), sizes, dict(attrs), indexes)
    except TypeError:  # a private constructor whose signature changed in another xarray: the public one
        return xr.Dataset(variables, coords=coords, attrs=attrs)


def _one_size(chunks: Mapping[str, Sequence[np.ndarray]]) -> None:
    """Samples of every batch must share one shape to share one array: refuse, naming the site
    and the fix, where they do not (the edges of graphs the model builds from the data, one graph
    per batch under an ``'edge feature'`` layout)."""
    for site, parts in chunks.items():
        shapes = sorted({tuple(a.shape[1:]) for a in parts})
        if len(shapes) > 1:
            raise DataValidationError(
                f"record: site {site!r} gives samples of shape {shapes[0]} in one batch and {shapes[1]} in another "
                "(as many edges as each graph the model builds from the data, sequences of other lengths): they "
                "cannot share one array. Record each batch in a call of its own, [sm.record(model, b, ...) for b in "
                "batches], or choose a site of one shape per sample (a node-level site)."
            )


def _same_calls(
    arrays: Mapping[str, np.ndarray], first: dict[str, int] | None, policy: CallPolicy, start: int
) -> dict[str, int]:
    """The calls of each site on a stacked call axis: every batch must make as many as the first."""
    n_calls = {s: a.shape[1] for s, a in arrays.items()}
    if first is not None and n_calls != first:
        raise DimensionError(
            f"record(calls={policy}): the sites ran {first} times in the first batch but "
            f"{n_calls} in the batch starting at sample {start} (a number of calls that depends on "
            "the data, e.g. an adaptive solver's steps), so the calls cannot share one 'call' dim. "
            "Use calls='last' or calls=k, a fixed-step solver, or one batch (batch_size >= samples)."
        )
    return n_calls


def _one_sample_per_pass(resolved: Sequence[ResolvedSite], inputs: Any, batch_size: int) -> bool:
    """Whether every site is declared unbatched (``"edge feature"``: one sample per forward pass,
    e.g. the edges of one graph given unbatched): then each pass records one sample, and a batch
    is never cut into parts (its edge_index would not fit them). A mix with batched sites is refused."""
    flags = [r.axes is not None and r.axes.unbatched for r in resolved]
    if not any(flags):
        return False
    if not all(flags):
        raise DimensionError(
            f"record: sites {[r.name for r, f in zip(resolved, flags, strict=True) if f]} are declared unbatched (one "
            f"sample per forward pass) and {[r.name for r, f in zip(resolved, flags, strict=True) if not f]} batched "
            "(a sample per row); they cannot share one 'sample' dim. Record them in two calls."
        )
    if is_one_batch(inputs) and batch_size_of(inputs) > batch_size:
        raise DimensionError(
            f"record: the sites are declared unbatched (one sample per forward pass, e.g. the edges of one graph), "
            f"and the inputs are one batch of {batch_size_of(inputs)} rows, more than batch_size={batch_size}: cutting "
            f"it would split the sample. Pass batch_size={batch_size_of(inputs)}, or the samples as a list of batches."
        )
    return True


def _call_coord(ds: xr.Dataset, policy: CallPolicy) -> xr.Dataset:
    """The ``call`` coordinate: the call indices kept (``calls=[i, j]``) or 0..n-1 (``"all"``)."""
    if "call" not in ds.dims:
        return ds
    n = ds.sizes["call"]
    return ds.assign_coords(call=list(policy.indices) if policy.mode == "index" else np.arange(n))


def _site_attrs(resolved: Sequence[ResolvedSite]) -> dict[str, dict[str, Any]]:
    out = {}
    for r in resolved:
        a: dict[str, Any] = {"module": r.module_path, "port": r.port, "description": f"activation at site {r.name}"}
        if r.heads is not None:
            a["heads"] = list(r.heads)
            a["head_dim"] = r.head_dim
        out[r.name] = a
    return out


def _recording_attrs(reduce: Reduce, calls: CallPolicy) -> dict[str, str]:
    """The attrs of a recording's Dataset."""
    return {
        "reduce": str(reduce),
        "calls": str(calls),
        "description": "activations recorded at named sites of a model (scimech.record)",
    }


def _with_attrs(
    ds: xr.Dataset, site_attrs: Mapping[str, Mapping[str, Any]], reduce: Reduce, calls: CallPolicy
) -> xr.Dataset:
    for name, a in site_attrs.items():
        ds.variables[name].attrs.update(a)  # the variable's own attrs (ds[name] would build a DataArray)
    ds.attrs.update(_recording_attrs(reduce, calls))
    return ds


def stack_sites(
    ds: xr.Dataset, sites: Sequence[str] | None = None, dim: str = "layer", coord: Sequence | None = None
) -> xr.DataArray:
    """Stack same-shaped site variables along a new dim (e.g. one per encoder block).

    Parameters
    ----------
    ds
        A recording from :func:`record`.
    sites
        Which variables (default: all).
    dim
        Name of the new dim (``"layer"``).
    coord
        Its coordinate values (default: the site names).

    Examples
    --------
    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4))
    >>> ds = sm.record(model, torch.randn(6, 3), ["0", "1", "2"])
    >>> layers = sm.stack_sites(ds, dim="layer", coord=[0, 1, 2])
    >>> layers.dims, layers["layer"].values.tolist()
    (('layer', 'sample', 'feature'), [0, 1, 2])
    """
    names: list[Hashable] = list(sites) if sites else list(ds.data_vars)
    arrays = [ds[s] for s in names]
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise ValueError(f"stack_sites needs sites of one shape; got {dict(zip(names, [a.shape for a in arrays]))}.")
    out = xr.concat([a.drop_attrs() if hasattr(a, "drop_attrs") else a for a in arrays], dim=dim)
    out = out.assign_coords({dim: list(coord) if coord is not None else names})
    out = out.assign_coords(site=(dim, names))
    return out.rename("activation")
