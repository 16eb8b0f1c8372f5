"""The hook engine shared by recording and interventions.

:class:`HookSet` registers forward (pre-)hooks for resolved sites and removes exactly the
handles it created, in a ``finally``, whatever happens in the forward pass. It never
touches hooks it did not add, so users' own hooks survive. Inputs and outputs that are
tuples (``nn.MultiheadAttention``, RNNs) are handled by acting on their first element.

A hook on a torch ``nn.TransformerEncoderLayer`` (or on any module inside it) switches off
the layer's fused inference fast path (``torch._transformer_encoder_layer_fwd``), which
made recording its output about 10% slower than the plain forward pass and recorded the
values of the other code path. For sites on such a layer itself, :class:`HookSet` instead
wraps the layer's ``forward`` (:func:`override_forward`): the layer runs exactly as without
scimech. Sites inside the layer keep real hooks, which is what makes its submodules run.

Hook functions see each activation in its canonical view ``(batch, [window], *positions,
feature)`` (:mod:`scimech.layout`), checked against the batch of the forward pass, and
whatever they return is put back in the model's own layout. Every :class:`HookSet` counts
how often each of its sites ran; :meth:`HookSet.check_fired` raises
:class:`~scimech.errors.SiteNeverRanError` naming a site that never ran, so that no verb
reports "no effect" for an intervention that never happened.

Inputs are any nesting of Tensors in dicts, lists, tuples (named or not) and dataclasses
(a weather model's ``Batch``): :func:`map_tensors` walks them. The batch size is the rows
of the first tensor leaf; a leaf whose first axis has another length (a grid's latitudes,
static fields, a graph's ``edge_index``) is unbatched metadata, kept whole when a batch is
sliced or tiled. A graph batch of PyTorch Geometric (any object with ``to_data_list``,
``num_graphs`` and a ``from_data_list`` class method) is sliced by whole graphs and tiled as
a disjoint union (the library's own ``from_data_list``, which offsets the edge indices).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import nn

from .calls import CallPolicy, current_pass, forward_pass, repeat_message, shortfall
from .errors import SiteCalledTwiceError, SiteNeverRanError
from .layout import batch_rows, current_rows
from .sites import ResolvedSite

__all__ = ["HookSet", "StopForward", "first_tensor", "override_forward", "run_forward", "batch_size_of",
           "slice_batch", "tile_batch", "map_tensors", "check_fired", "is_one_batch"]

#: modules whose fused inference path a hook on them or on a submodule switches off
_FAST_PATH_MODULES: tuple[type[nn.Module], ...] = (nn.TransformerEncoderLayer,)
_MISSING = object()


class StopForward(Exception):
    """Raised inside a hook to end a forward pass early (after the last needed site)."""


def first_tensor(obj: Any) -> torch.Tensor:
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, (tuple, list)) and obj and isinstance(obj[0], torch.Tensor):
        return obj[0]
    raise TypeError(
        f"Cannot hook a value of type {type(obj).__name__}: scimech sites need a Tensor (or a tuple whose "
        "first item is a Tensor). Pick a submodule whose output is a Tensor."
    )


def _replace_first(obj: Any, new: torch.Tensor) -> Any:
    if isinstance(obj, torch.Tensor):
        return new
    return type(obj)([new, *obj[1:]]) if isinstance(obj, list) else (new, *obj[1:])


class _Override:
    """One replacement of ``module.forward`` (an instance attribute, which ``nn.Module.__call__``
    finds before the class's method); removable in any order."""

    def __init__(self, module: nn.Module, make: Callable[[Callable], Callable]):
        self.module = module
        self.prev = module.__dict__.get("forward", _MISSING)
        inner = module.forward
        wrapped = make(inner)
        self.active = True

        def forward(*args, **kwargs):
            return (wrapped if self.active else inner)(*args, **kwargs)

        forward._scimech_override = self
        module.__dict__["forward"] = forward

    def remove(self) -> None:
        self.active = False
        d = self.module.__dict__
        # unwind from the top every override already removed (they may be removed out of order)
        while (ov := getattr(d.get("forward"), "_scimech_override", None)) is not None and not ov.active:
            if ov.prev is _MISSING:
                del d["forward"]
            else:
                d["forward"] = ov.prev


def override_forward(module: nn.Module, make: Callable[[Callable], Callable]) -> _Override:
    """Replace ``module.forward`` by ``make(current_forward)`` until ``.remove()`` is called.

    Unlike a hook, this leaves torch's fused fast paths (which check for hooks) on, and it
    can skip the module's computation altogether (the prefix reuse of the sweeps).
    Overrides nest and may be removed in any order.
    """
    return _Override(module, make)


# A hook function receives (site, tensor) and returns None (leave it) or a new tensor.
HookFn = Callable[[ResolvedSite, torch.Tensor], torch.Tensor | None]


def _on_input(fn: HookFn, site: ResolvedSite, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    """Apply ``fn`` to a module's input: the first positional argument, else (input passed by
    keyword, e.g. ``forward(x=...)``) the first tensor keyword. New ``(args, kwargs)`` or None."""
    if args:
        new = fn(site, first_tensor(args[0]))
        return None if new is None else ((_replace_first(args[0], new), *args[1:]), kwargs)
    for k, v in kwargs.items():
        if isinstance(v, torch.Tensor):
            new = fn(site, v)
            return None if new is None else (args, {**kwargs, k: new})
    return None


class HookSet:
    """Context manager attaching ``fn`` at each resolved site; removes only its own handles.

    ``fn(site, view)`` receives the canonical view of the site's tensor and returns ``None``
    (leave it) or a new tensor in the canonical layout. ``fired[site.name]`` counts the
    calls. With ``model``, a hook on the model reads the batch size of forward passes that
    the user starts directly (``with ablate(...): model(x)``).
    """

    def __init__(self, sites: Iterable[ResolvedSite], fn: HookFn, model: nn.Module | None = None,
                 calls: CallPolicy | None = None, verb: str = "", last: Mapping[str, int] | None = None):
        self.sites = list(sites)
        self.fn = fn
        self.model = model
        self.calls = calls          # None: every call, unchecked (internal plumbing)
        self.verb = verb or "scimech"
        self.last = dict(last or {})  # site -> index of its last call (calls='last', counted beforehand)
        self.fired: dict[str, int] = {s.name: 0 for s in self.sites}
        self.axes: dict = {}  # the layout met at each site
        self.call = 0         # index of the call being handled, within its forward pass
        self.passes: list[dict[str, int]] = []  # calls per site of each finished pass
        self._pass = None
        self._counts: dict[str, int] = {}
        self._handles: list = []

    def __enter__(self) -> HookSet:
        try:
            if self.model is not None:
                self._handles += _root_rows_hooks(self.model)
            for site in self.sites:
                self._handles.append(self._attach(site))
        except BaseException:
            self.remove()
            raise
        return self

    def _count(self, site: ResolvedSite) -> int:
        """Index of this call of ``site`` within the forward pass under way."""
        p = current_pass()
        if p is not self._pass:
            self.end_pass()
            self._pass = p
        k = self._counts.get(site.name, 0)
        self._counts[site.name] = k + 1
        return k

    @property
    def pass_counts(self) -> dict[str, int]:
        """Calls of each site in the forward pass under way (or the last one, until :meth:`end_pass`)."""
        return self._counts

    def end_pass(self) -> None:
        """Close the forward pass under way: its counts join :attr:`passes`."""
        if self._counts:
            self.passes.append(self._counts)
        self._counts = {}
        self._pass = None

    def _apply(self, site: ResolvedSite, t: torch.Tensor) -> torch.Tensor | None:
        """Run ``fn`` on the canonical view of ``t``; the new tensor in ``t``'s layout, or None."""
        self.fired[site.name] = self.fired.get(site.name, 0) + 1
        k = self._count(site)
        pol = self.calls
        if pol is not None:
            if pol.mode == "error" and k >= 1:
                raise SiteCalledTwiceError(repeat_message(site.name, site.module, self.model, self.verb))
            if not pol.acts(k, self.last.get(site.name)):
                return None
        self.call = k
        view, axes = site.view(t, current_rows())
        self.axes[site.name] = axes
        new = self.fn(site, view)
        if new is None:
            return None
        out = axes.restore(new)
        if t.is_contiguous() and not out.is_contiguous():
            out = out.contiguous()
        return out

    def _attach(self, site: ResolvedSite):
        apply = self._apply
        if isinstance(site.module, _FAST_PATH_MODULES):
            return override_forward(site.module, lambda inner, _site=site: self._wrapped(_site, inner))
        if site.port == "input":
            def pre_hook(module, args, kwargs, _site=site):
                return _on_input(apply, _site, args, kwargs)

            return site.module.register_forward_pre_hook(pre_hook, with_kwargs=True)

        def hook(module, args, output, _site=site):
            new = apply(_site, first_tensor(output))
            if new is not None:
                return _replace_first(output, new)
            return None

        return site.module.register_forward_hook(hook)

    def _wrapped(self, site: ResolvedSite, inner: Callable) -> Callable:
        """``inner`` with the hook function applied to its input or output (no torch hook)."""
        apply = self._apply
        if site.port == "input":
            def forward(*args, **kwargs):
                changed = _on_input(apply, site, args, kwargs)
                return inner(*args, **kwargs) if changed is None else inner(*changed[0], **changed[1])
            return forward

        def forward(*args, **kwargs):
            out = inner(*args, **kwargs)
            new = apply(site, first_tensor(out))
            return out if new is None else _replace_first(out, new)
        return forward

    def check_fired(self, what: str) -> None:
        """Raise :class:`SiteNeverRanError` if a site never ran, or never reached a call that
        ``calls=`` asked for (``what``: the verb, for the message)."""
        check_fired(self.fired, what)
        self.end_pass()
        if self.calls is None:
            return
        for counts in self.passes:
            for site in self.sites:
                lack = shortfall(self.calls, counts.get(site.name, 0), self.last.get(site.name))
                if lack:
                    raise SiteNeverRanError(f"{what}: site {site.name!r} {lack}")

    def remove(self) -> None:
        while self._handles:
            self._handles.pop().remove()

    def __exit__(self, *exc) -> bool:
        self.remove()
        return False


def check_fired(fired: Mapping[str, int], what: str) -> None:
    """Raise :class:`SiteNeverRanError` naming the sites of ``fired`` with a count of 0."""
    never = [s for s, n in fired.items() if not n]
    if never:
        raise SiteNeverRanError(
            f"{what}: site(s) {never} never ran during the forward pass, so nothing was recorded or changed there "
            "and no effect can be reported. The module is not on the path this input takes (a branch not taken, "
            "a module whose computation the model does functionally, e.g. dropout in eval or a fused attention "
            "path); choose a site from scimech.list_sites(model) that runs, or check the forward= function.")


def _root_rows_hooks(model: nn.Module) -> list:
    """Hooks on the model that set the batch size (rows of the first tensor input) for its
    forward pass, and open a forward pass for call counting where none is open."""
    tokens: list = []

    def pre(module, args, kwargs):
        rows = current_rows()   # inside a verb's forward (a rollout's later calls): keep its batch
        if rows is None:
            try:
                rows = batch_size_of((args, kwargs))
            except TypeError:
                rows = None
        tokens.append((batch_rows(rows).__enter__(), forward_pass(_root=True).__enter__()))

    def post(module, args, output):
        if tokens:
            rows, pas = tokens.pop()
            pas.__exit__(None, None, None)
            rows.__exit__(None, None, None)

    return [model.register_forward_pre_hook(pre, with_kwargs=True, prepend=True),
            model.register_forward_hook(post, always_call=True)]


def run_forward(model: nn.Module, batch: Any, forward: Callable | None = None) -> Any:
    """Call the model on one batch: ``forward(model, batch)``, or ``model(**batch)`` (a dict) /
    ``model(*batch)`` (a plain tuple) / ``model(batch)`` (a Tensor, a dataclass, anything else).

    The hooks of the pass know the batch size (``batch_size_of(batch)``)."""
    try:
        rows = batch_size_of(batch)
    except TypeError:
        rows = None
    with batch_rows(rows), forward_pass():
        if forward is not None:
            return forward(model, batch)
        if isinstance(batch, Mapping):
            return model(**batch)
        if isinstance(batch, tuple) and not hasattr(batch, "_fields"):
            return model(*batch)
        return model(batch)


def leaf_tensors(obj: Any) -> Iterable[torch.Tensor]:
    """Every Tensor of a nested batch or output (dicts, lists, tuples, dataclasses), in order."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, Mapping):
        for v in obj.values():
            yield from leaf_tensors(v)
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            yield from leaf_tensors(v)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from leaf_tensors(getattr(obj, f.name))


def is_graph_batch(batch: Any) -> bool:
    """A batch of graphs in PyTorch Geometric's form (``Batch``)."""
    return (hasattr(batch, "to_data_list") and hasattr(type(batch), "from_data_list")
            and isinstance(getattr(batch, "num_graphs", None), int))


def n_samples_of(batch: Any) -> int:
    """Samples in ``batch``: graphs of a graph batch, else rows (:func:`batch_size_of`)."""
    return batch.num_graphs if is_graph_batch(batch) else batch_size_of(batch)


def batch_size_of(batch: Any) -> int:
    """Rows of the first Tensor (dim 0) found in ``batch``: a Tensor, or any nesting of dicts,
    lists, tuples and dataclasses holding Tensors (the nodes of a graph batch)."""
    if is_graph_batch(batch):
        return int(batch.num_nodes)
    for t in leaf_tensors(batch):
        if t.dim() > 0:
            return t.shape[0]
    raise TypeError(f"Cannot find a batch dimension in inputs of type {type(batch).__name__}; pass a Tensor, or a "
                    "dict / tuple / list / dataclass of Tensors batched on dim 0.")


def map_tensors(batch: Any, f: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``batch`` with ``f`` applied to every Tensor leaf (dicts, lists, tuples, named tuples and
    dataclasses are rebuilt; other leaves are kept as they are)."""
    if isinstance(batch, torch.Tensor):
        return f(batch)
    if isinstance(batch, Mapping):
        items = {k: map_tensors(v, f) for k, v in batch.items()}
        try:  # keep dict subclasses (Hugging Face's BatchEncoding, OrderedDict)
            return type(batch)(items)
        except TypeError:
            return items
    if isinstance(batch, tuple):
        items = [map_tensors(v, f) for v in batch]
        return type(batch)(*items) if hasattr(batch, "_fields") else tuple(items)
    if isinstance(batch, list):
        return [map_tensors(v, f) for v in batch]
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        changes = {fl.name: map_tensors(getattr(batch, fl.name), f) for fl in dataclasses.fields(batch) if fl.init}
        return dataclasses.replace(batch, **changes)
    return batch


def _batched(batch: Any) -> Callable[[torch.Tensor], bool]:
    """Which leaves of ``batch`` carry the batch on dim 0 (the others are unbatched metadata)."""
    try:
        rows = batch_size_of(batch)
    except TypeError:
        return lambda t: t.dim() > 0
    return lambda t: t.dim() > 0 and t.shape[0] == rows


def slice_batch(batch: Any, start: int, stop: int) -> Any:
    """Samples ``start:stop`` of ``batch``: rows of every batched Tensor (unbatched leaves kept
    whole), or whole graphs of a graph batch."""
    if is_graph_batch(batch):
        return type(batch).from_data_list(batch.to_data_list()[start:stop])
    batched = _batched(batch)
    return map_tensors(batch, lambda t: t[start:stop] if batched(t) else t)


def tile_batch(batch: Any, times: int) -> Any:
    """``times`` copies of ``batch`` one after the other: every batched Tensor repeated along
    dim 0 block by block (unbatched leaves kept whole), a graph batch as a disjoint union."""
    if is_graph_batch(batch):
        return type(batch).from_data_list(batch.to_data_list() * times)
    batched = _batched(batch)
    return map_tensors(batch, lambda t: t.repeat(times, *([1] * (t.dim() - 1))) if batched(t) else t)


def is_one_batch(inputs: Any) -> bool:
    """Whether ``inputs`` is one batch (a Tensor, dict, tuple or dataclass) rather than an iterable of batches."""
    return isinstance(inputs, (torch.Tensor, Mapping, tuple)) or is_graph_batch(inputs) or (
        dataclasses.is_dataclass(inputs) and not isinstance(inputs, type))


def iter_batches(inputs: Any, batch_size: int):
    """Yield ``(start, batch)`` from a Tensor / dict / tuple batched on dim 0, or from an iterable of batches."""
    if is_one_batch(inputs):
        n = n_samples_of(inputs)
        for start in range(0, n, batch_size):
            yield start, slice_batch(inputs, start, min(start + batch_size, n))
        return
    start = 0
    for batch in inputs:
        yield start, batch
        start += n_samples_of(batch)
