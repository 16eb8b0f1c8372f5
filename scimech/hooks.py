"""The hook engine shared by recording and interventions.

:class:`HookSet` registers forward (pre-)hooks for resolved sites and removes exactly the
handles it created, in a ``finally``, whatever happens in the forward pass. It never
touches hooks it did not add, so users' own hooks survive. Inputs and outputs that are
tuples (``nn.MultiheadAttention``, RNNs) are handled by acting on their first element.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import nn

from .sites import ResolvedSite

__all__ = ["HookSet", "StopForward", "first_tensor", "run_forward", "batch_size_of", "slice_batch", "tile_batch"]


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


# A hook function receives (site, tensor) and returns None (leave it) or a new tensor.
HookFn = Callable[[ResolvedSite, torch.Tensor], torch.Tensor | None]


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
        if site.port == "input":
            def pre_hook(module, args, kwargs, _site=site):
                if args:
                    new = fn(_site, first_tensor(args[0]))
                    if new is not None:
                        return (_replace_first(args[0], new), *args[1:]), kwargs
                    return None
                # input passed by keyword (e.g. forward(x=...)): act on the first tensor kwarg
                for k, v in kwargs.items():
                    if isinstance(v, torch.Tensor):
                        new = fn(_site, v)
                        if new is not None:
                            return args, {**kwargs, k: new}
                        return None
                return None

            return site.module.register_forward_pre_hook(pre_hook, with_kwargs=True)

        def hook(module, args, output, _site=site):
            new = fn(_site, first_tensor(output))
            if new is not None:
                return _replace_first(output, new)
            return None

        return site.module.register_forward_hook(hook)

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


def _map_tensors(batch: Any, f: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(batch, torch.Tensor):
        return f(batch)
    if isinstance(batch, Mapping):
        return {k: _map_tensors(v, f) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_map_tensors(v, f) for v in batch)
    if isinstance(batch, list):
        return [_map_tensors(v, f) for v in batch]
    return batch


def slice_batch(batch: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` of every Tensor in ``batch``."""
    return _map_tensors(batch, lambda t: t[start:stop])


def tile_batch(batch: Any, times: int) -> Any:
    """Repeat every Tensor of ``batch`` ``times`` times along dim 0 (block by block)."""
    return _map_tensors(batch, lambda t: t.repeat(times, *([1] * (t.dim() - 1))))


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
