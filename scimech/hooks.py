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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import nn

from .sites import ResolvedSite

__all__ = ["HookSet", "StopForward", "first_tensor", "override_forward", "run_forward", "batch_size_of",
           "slice_batch", "tile_batch", "map_tensors"]

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
    """Context manager attaching ``fn`` at each resolved site; removes only its own handles."""

    def __init__(self, sites: Iterable[ResolvedSite], fn: HookFn):
        self.sites = list(sites)
        self.fn = fn
        self._handles: list[torch.utils.hooks.RemovableHandle] = []

    def __enter__(self) -> HookSet:
        try:
            for site in self.sites:
                self._handles.append(self._attach(site))
        except BaseException:
            self.remove()
            raise
        return self

    def _attach(self, site: ResolvedSite):
        fn = self.fn
        if isinstance(site.module, _FAST_PATH_MODULES):
            return override_forward(site.module, lambda inner, _site=site: self._wrapped(_site, inner))
        if site.port == "input":
            def pre_hook(module, args, kwargs, _site=site):
                return _on_input(fn, _site, args, kwargs)

            return site.module.register_forward_pre_hook(pre_hook, with_kwargs=True)

        def hook(module, args, output, _site=site):
            new = fn(_site, first_tensor(output))
            if new is not None:
                return _replace_first(output, new)
            return None

        return site.module.register_forward_hook(hook)

    def _wrapped(self, site: ResolvedSite, inner: Callable) -> Callable:
        """``inner`` with the hook function applied to its input or output (no torch hook)."""
        fn = self.fn
        if site.port == "input":
            def forward(*args, **kwargs):
                changed = _on_input(fn, site, args, kwargs)
                return inner(*args, **kwargs) if changed is None else inner(*changed[0], **changed[1])
            return forward

        def forward(*args, **kwargs):
            out = inner(*args, **kwargs)
            new = fn(site, first_tensor(out))
            return out if new is None else _replace_first(out, new)
        return forward

    def remove(self) -> None:
        while self._handles:
            self._handles.pop().remove()

    def __exit__(self, *exc) -> bool:
        self.remove()
        return False


def run_forward(model: nn.Module, batch: Any, forward: Callable | None = None) -> Any:
    """Call the model on one batch: ``forward(model, batch)``, or ``model(**batch)`` / ``model(batch)``."""
    if forward is not None:
        return forward(model, batch)
    if isinstance(batch, Mapping):
        return model(**batch)
    if isinstance(batch, tuple):
        return model(*batch)
    return model(batch)


def batch_size_of(batch: Any) -> int:
    if isinstance(batch, torch.Tensor):
        return batch.shape[0]
    if isinstance(batch, Mapping):
        for v in batch.values():
            if isinstance(v, torch.Tensor):
                return v.shape[0]
    if isinstance(batch, (tuple, list)):
        for v in batch:
            if isinstance(v, torch.Tensor):
                return v.shape[0]
    raise TypeError(f"Cannot find a batch dimension in inputs of type {type(batch).__name__}; "
                    "pass a Tensor, a dict of Tensors or a tuple of Tensors batched on dim 0.")


def map_tensors(batch: Any, f: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(batch, torch.Tensor):
        return f(batch)
    if isinstance(batch, Mapping):
        return {k: map_tensors(v, f) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(map_tensors(v, f) for v in batch)
    if isinstance(batch, list):
        return [map_tensors(v, f) for v in batch]
    return batch


def slice_batch(batch: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` of every Tensor in ``batch``."""
    return map_tensors(batch, lambda t: t[start:stop])


def tile_batch(batch: Any, times: int) -> Any:
    """Repeat every Tensor of ``batch`` ``times`` times along dim 0 (block by block)."""
    return map_tensors(batch, lambda t: t.repeat(times, *([1] * (t.dim() - 1))))


def iter_batches(inputs: Any, batch_size: int):
    """Yield ``(start, batch)`` from a Tensor / dict / tuple batched on dim 0, or from an iterable of batches."""
    if isinstance(inputs, (torch.Tensor, Mapping, tuple)):
        n = batch_size_of(inputs)
        for start in range(0, n, batch_size):
            yield start, slice_batch(inputs, start, min(start + batch_size, n))
        return
    start = 0
    for batch in inputs:
        yield start, batch
        start += batch_size_of(batch)
