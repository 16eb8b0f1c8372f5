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
feature)`` (:mod:`scimech.capture.layout`), checked against the batch of the forward pass, and
whatever they return is put back in the model's own layout. Every :class:`HookSet` counts
how often each of its sites ran; the verb's session (:mod:`scimech.capture.session`) raises
:class:`~scimech.errors.SiteNeverRanError` naming a site that never ran, so that no verb
reports "no effect" for an intervention that never happened.

Inputs are any nesting of Tensors in dicts, lists, tuples and dataclasses; how a batch is
measured, sliced and tiled is :mod:`scimech.capture.batches` (its functions are still importable from
here, as before).
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import nn

from scimech.capture.batches import (  # noqa: F401
    batch_size_of,
    is_one_batch,
    iter_batches,
    map_tensors,
    rewrapped,
    slice_batch,
    tile_batch,
    wrapped_tensor,
)
from scimech.capture.calls import (
    CallPolicy,
    Pass,
    current_pass,
    forward_pass,
    repeat_message,
    shortfall,
)
from scimech.capture.layout import Axes, batch_rows, current_batch, current_rows
from scimech.capture.sites import ResolvedSite
from scimech.errors import DataValidationError, SiteCalledTwiceError, SiteNeverRanError

__all__ = [
    "HookSet",
    "StopForward",
    "first_tensor",
    "override_forward",
    "run_forward",
    "check_fired",
    "to_eval",
    "restore_modes",
    "hooks_aside",
]

#: modules whose fused inference path a hook on them or on a submodule switches off
_FAST_PATH_MODULES: tuple[type[nn.Module], ...] = (nn.TransformerEncoderLayer,)
_MISSING = object()

#: layouts a cache holds before it starts afresh (one per site, activation shape, dtype and batch size met)
LAYOUTS_MAX = 4096


# set while the model profile measures a pass inside a verb's block: scimech's own hooks stand aside
_ASIDE: contextvars.ContextVar[bool] = contextvars.ContextVar("scimech_hooks_aside", default=False)


class hooks_aside:
    """Context manager: the forward passes inside run as if no :class:`HookSet` were attached
    (the model profile measuring a pass of its own inside a verb's block: nothing is recorded,
    changed or counted there)."""

    def __enter__(self):
        self._token = _ASIDE.set(True)
        return self

    def __exit__(self, *exc) -> None:
        _ASIDE.reset(self._token)


class StopForward(Exception):
    """Raised inside a hook to end a forward pass early (after the last needed site)."""


def first_tensor(obj: Any) -> torch.Tensor:
    """The tensor a site acts on: ``obj`` itself, the first item of a tuple or list, or the
    tensor an object wraps in ``.tensor`` (escnn's ``GeometricTensor``)."""
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, (tuple, list)) and obj:
        if isinstance(obj[0], torch.Tensor):
            return obj[0]
        if (w := wrapped_tensor(obj[0])) is not None:
            return w
    if (w := wrapped_tensor(obj)) is not None:
        return w
    raise TypeError(
        f"Cannot hook a value of type {type(obj).__name__}: scimech sites need a Tensor, an object that wraps one "
        "in .tensor (escnn's GeometricTensor), or a tuple whose first item is one. Pick a submodule whose output "
        "is a Tensor."
    )


def _overlapping(t: torch.Tensor) -> bool:
    """Whether elements of ``t`` share memory (a stride of 0 on an axis longer than 1: ``expand``)."""
    return any(st == 0 and n > 1 for st, n in zip(t.stride(), t.shape, strict=True))


def _replace_first(obj: Any, new: torch.Tensor) -> Any:
    if isinstance(obj, torch.Tensor):
        return new
    if wrapped_tensor(obj) is not None:  # the same wrapper (its field type kept) around the new tensor
        return rewrapped(obj, new)
    head = rewrapped(obj[0], new) if wrapped_tensor(obj[0]) is not None else new
    return type(obj)([head, *obj[1:]]) if isinstance(obj, list) else (head, *obj[1:])


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

        forward.__dict__["_scimech_override"] = self  # found by remove() to unwind overrides out of order
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


def _first_parameter(module: nn.Module) -> str | None:
    """The name of the first parameter of ``module.forward`` (its input, however it is passed)."""
    import inspect

    try:
        params = list(inspect.signature(type(module).forward).parameters.values())[1:]  # not scimech's wrapper; no self
    except (TypeError, ValueError):
        return None
    first = params[0] if params else None
    return (
        first.name
        if first is not None and first.kind in (first.POSITIONAL_ONLY, first.POSITIONAL_OR_KEYWORD, first.KEYWORD_ONLY)
        else None
    )


def _on_input(fn: HookFn, site: ResolvedSite, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    """Apply ``fn`` to a module's input: its first positional argument, or, passed by keyword
    (``block(cond=c, x=h)``), the argument of ``forward``'s first parameter, whatever the order
    of the keywords. New ``(args, kwargs)`` or None."""
    if args:
        new = fn(site, first_tensor(args[0]))
        return None if new is None else ((_replace_first(args[0], new), *args[1:]), kwargs)
    name = _first_parameter(site.module)
    if name is None:  # forward(*args, **kwargs): no first parameter to go by, the first tensor keyword
        name = next((k for k, v in kwargs.items() if isinstance(v, torch.Tensor)), None)
        if name is None:
            return None
    if name not in kwargs:
        raise DataValidationError(
            f"Site {site.name!r}: the module was called with keywords only ({', '.join(kwargs) or 'none'}) and none "
            f"is the first parameter of its forward ({name!r}); name the input you mean by a module that takes it "
            "first, or record the module's output instead."
        )
    new = fn(site, first_tensor(kwargs[name]))
    return None if new is None else (args, {**kwargs, name: _replace_first(kwargs[name], new)})


class HookSet:
    """Context manager attaching ``fn`` at each resolved site; removes only its own handles.

    ``fn(site, view)`` receives the canonical view of the site's tensor and returns ``None``
    (leave it) or a new tensor in the canonical layout. ``fired[site.name]`` counts the
    calls. With ``model``, a hook on the model reads the batch size of forward passes that
    the user starts directly (``with ablate(...): model(x)``).

    ``layouts``: where each site's layout is kept once worked out, by site, activation shape, dtype
    and batch size (the model profile's :attr:`~scimech.capture.profile.ModelProfile.layouts`, which
    a changed parameter or swapped module replaces): a later call of the site on the same shapes
    does no layout work. ``None`` (default): worked out at every call.
    """

    def __init__(
        self,
        sites: Iterable[ResolvedSite],
        fn: HookFn,
        model: nn.Module | None = None,
        calls: CallPolicy | None = None,
        verb: str = "",
        last: Mapping[str, int] | None = None,
        layouts: dict | None = None,
    ):
        self.sites = list(sites)
        self.fn = fn
        self.model = model
        self.calls = calls  # None: every call, unchecked (internal plumbing)
        self.verb = verb or "scimech"
        self.last = dict(last or {})  # site -> index of its last call (calls='last', counted beforehand)
        self.fired: dict[str, int] = {s.name: 0 for s in self.sites}
        self.axes: dict = {}  # the layout met at each site
        self.layouts = layouts
        self.call = 0  # index of the call being handled, within its forward pass
        self.passes: list[dict[str, int]] = []  # calls per site of each finished pass
        self._pass: Pass | None = None
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
        if _ASIDE.get():
            return None
        self.fired[site.name] = self.fired.get(site.name, 0) + 1
        k = self._count(site)
        pol = self.calls
        if pol is not None:
            if pol.mode == "error" and k >= 1:
                raise SiteCalledTwiceError(repeat_message(site.name, site.module, self.model, self.verb))
            if not pol.acts(k, self.last.get(site.name)):
                return None
        self.call = k
        view, axes = self._view(site, t)
        self.axes[site.name] = axes
        new = self.fn(site, view)
        if new is None:
            return None
        out = axes.restore(new)
        if (t.is_contiguous() and not out.is_contiguous()) or _overlapping(out):
            # an expanded tensor (a mean broadcast over the batch) is copied: the model may write
            # into the site's output in place (out += x), which memory shared by rows cannot take
            out = out.contiguous()
        return out

    def _view(self, site: ResolvedSite, t: torch.Tensor) -> tuple[torch.Tensor, Axes]:
        """``site.view(t, rows)``, its layout taken from :attr:`layouts` where this site met a tensor
        of ``t``'s shape and dtype on a batch of as many rows before (and kept there the first time)."""
        rows, cache = current_rows(), self.layouts
        if cache is None:
            return site.view(t, rows)
        key = (
            (site.name, site.port, site.module_path, id(site.module), site.axes, site.channels, site.sequence_first),
            t.shape,
            t.dtype,
            rows,
        )
        hit = cache.get(key)
        if hit is not None:
            axes, order = hit
            # the checks of the canonical view passed on this shape and batch size: only its permutation is left
            return (t.permute(order) if order is not None else axes.canonical(t, rows, site.name)), axes
        view, axes = site.view(t, rows)  # refused layouts raise here, and are never kept
        if len(cache) >= LAYOUTS_MAX:
            cache.clear()
        cache[key] = (axes, None if axes.packed or axes.unbatched else axes._order())
        return view, axes

    def _attach(self, site: ResolvedSite):
        apply = self._apply
        if isinstance(site.module, _FAST_PATH_MODULES):
            return override_forward(site.module, functools.partial(self._wrapped, site))
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

            def forward_input(*args, **kwargs):
                changed = _on_input(apply, site, args, kwargs)
                return inner(*args, **kwargs) if changed is None else inner(*changed[0], **changed[1])

            return forward_input

        def forward_output(*args, **kwargs):
            out = inner(*args, **kwargs)
            new = apply(site, first_tensor(out))
            return out if new is None else _replace_first(out, new)

        return forward_output

    def check_calls(self, what: str) -> None:
        """Raise :class:`SiteNeverRanError` if a pass never reached a call of a site that
        ``calls=`` asked for (``what``: the verb, for the message). Whether each site ran at all
        is the session's fired check (:meth:`scimech.capture.session.Session.fired`)."""
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

    def __exit__(self, *exc) -> None:
        self.remove()


def check_fired(fired: Mapping[str, int], what: str) -> None:
    """Raise :class:`SiteNeverRanError` naming the sites of ``fired`` with a count of 0."""
    never = [s for s, n in fired.items() if not n]
    if never:
        raise SiteNeverRanError(
            f"{what}: site(s) {never} never ran during the forward pass, so nothing was recorded or changed there "
            "and no effect can be reported. The module is not on the path this input takes (a branch not taken, "
            "a module whose computation the model does functionally, e.g. dropout in eval or a fused attention "
            "path); choose a site from scimech.list_sites(model) that runs, or check the forward= function."
        )


def _root_rows_hooks(model: nn.Module) -> list:
    """Hooks on the model that set the batch size (rows of the first tensor input) for its
    forward pass, and open a forward pass for call counting where none is open."""
    tokens: list = []

    def pre(module, args, kwargs):
        rows, batch = current_rows(), current_batch()  # inside a verb's forward (a rollout's later calls): its batch
        if rows is None:
            batch = (args, kwargs)
            try:
                rows = batch_size_of(batch)
            except TypeError:
                rows = None
        tokens.append((batch_rows(rows, batch).__enter__(), forward_pass(_root=True).__enter__()))

    def post(module, args, output):
        if tokens:
            rows, pas = tokens.pop()
            pas.__exit__(None, None, None)
            rows.__exit__(None, None, None)

    return [
        model.register_forward_pre_hook(pre, with_kwargs=True, prepend=True),
        model.register_forward_hook(post, always_call=True),
    ]


def modules_of(model: nn.Module) -> list[nn.Module]:
    """Every module of ``model`` once, ``model`` first (the modules of ``model.modules()``, in
    breadth-first order): a walk over the children's dicts, about 2.5x faster than ``modules()``,
    whose generators build every module's path (every verb's session walks the model)."""
    out, seen, i = [model], {id(model)}, 0
    while i < len(out):
        for child in out[i]._modules.values():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                out.append(child)
        i += 1
    return out


def to_eval(model: nn.Module) -> list[tuple[nn.Module, bool]]:
    """Put ``model`` in eval mode, as every verb measures (the verb's session does); returns each module's own mode for
    :func:`restore_modes` (a model training with a frozen batch norm kept in eval gets exactly
    that back, which ``model.train(was)`` would not give). A model already in eval mode throughout is left
    as it is, with nothing to restore (one walk over the modules, stopped at the first in training mode)."""
    mods = modules_of(model)
    if not any(m.training for m in mods):
        return []
    modes = [(m, m.training) for m in mods]
    model.eval()
    return modes


def restore_modes(modes: list[tuple[nn.Module, bool]]) -> None:
    """Give every module the mode :func:`to_eval` found it in."""
    for module, training in modes:
        module.training = training


def run_forward(model: nn.Module, batch: Any, forward: Callable | None = None) -> Any:
    """Call the model on one batch: ``forward(model, batch)``, or ``model(**batch)`` (a dict) /
    ``model(*batch)`` (a plain tuple) / ``model(batch)`` (a Tensor, a dataclass, anything else).

    The hooks of the pass know the batch size (``batch_size_of(batch)``)."""
    try:
        rows = batch_size_of(batch)
    except TypeError:
        rows = None
    with batch_rows(rows, batch), forward_pass():
        if forward is not None:
            return forward(model, batch)
        if isinstance(batch, Mapping):
            return model(**batch)
        if isinstance(batch, tuple) and not hasattr(batch, "_fields"):
            return model(*batch)
        return model(batch)
