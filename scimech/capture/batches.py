"""Batches of inputs: how many samples a batch holds, and how it is sliced and tiled.

Inputs are any nesting of Tensors in dicts, lists, tuples (named or not) and dataclasses
(a weather model's ``Batch``): :func:`map_tensors` walks them. The batch size is the rows
of the first tensor leaf; a leaf whose first axis has another length (a grid's latitudes,
static fields, a graph's ``edge_index``) is unbatched metadata, kept whole when a batch is
sliced or tiled. A graph batch of PyTorch Geometric (an instance of its ``Batch`` class,
recognised by class) is sliced by whole graphs and tiled as a disjoint union (the library's
own ``from_data_list``, which offsets the edge indices).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import torch

__all__ = [
    "leaf_tensors",
    "gives_dict",
    "wrapped_tensor",
    "rewrapped",
    "is_graph_batch",
    "n_samples_of",
    "batch_size_of",
    "map_tensors",
    "slice_batch",
    "tile_batch",
    "is_one_batch",
    "iter_batches",
]


def wrapped_tensor(obj: Any) -> torch.Tensor | None:
    """The tensor an object wraps in a ``.tensor`` attribute (escnn's ``GeometricTensor``: a tensor
    with its field type), or ``None`` (a Tensor itself, anything else)."""
    if isinstance(obj, torch.Tensor):
        return None
    try:
        t = getattr(obj, "tensor", None)
    except Exception:  # noqa: BLE001 - an attribute that fails to read is not a tensor
        return None
    return t if isinstance(t, torch.Tensor) else None


def rewrapped(obj: Any, new: torch.Tensor) -> Any:
    """A shallow copy of ``obj`` (a wrapped tensor, :func:`wrapped_tensor`) holding ``new``: its
    field type and every other attribute kept."""
    out = copy.copy(obj)
    try:
        out.tensor = new
    except AttributeError:
        from scimech.errors import DataValidationError

        raise DataValidationError(
            f"A {type(obj).__name__} wraps its tensor in a read-only .tensor, so scimech cannot put a changed "
            "tensor back. Choose the module inside it whose output is a plain Tensor, or record it only."
        ) from None
    return out


def gives_dict(obj: Any) -> bool:
    """Whether ``obj`` is a batch object that gives its tensors as a dict through a ``to_dict()``
    method and is none of the nestings read directly (MACE's ``AtomicData`` batch, a PyTorch
    Geometric ``Data`` of another library's copy): its tensors are those of ``obj.to_dict()``.
    Such an object iterates over ``(key, value)`` pairs, so it is one batch, never an iterable of batches."""
    if isinstance(obj, (torch.Tensor, Mapping, tuple, list, str, type)) or dataclasses.is_dataclass(obj):
        return False
    try:
        return callable(getattr(obj, "to_dict", None))
    except Exception:  # noqa: BLE001 - an object whose __getattr__ raises another error has no to_dict
        return False


def leaf_tensors(obj: Any) -> Iterable[torch.Tensor]:
    """Every Tensor of a nested batch or output (dicts, lists, tuples, dataclasses, an object read
    through its ``to_dict()``), in order."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif (w := wrapped_tensor(obj)) is not None:
        yield w
    elif gives_dict(obj):
        yield from leaf_tensors(obj.to_dict())
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
    """A batch of graphs of PyTorch Geometric (an instance of ``torch_geometric.data.Batch``),
    recognised by its class, not by a method name: another library's batch with a
    ``to_data_list`` (MACE's, DGL's) is cut and tiled as any other nesting of tensors."""
    return any(c.__name__ == "Batch" and c.__module__.startswith("torch_geometric.") for c in type(batch).__mro__)


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
    raise TypeError(
        f"Cannot find a batch dimension in inputs of type {type(batch).__name__}; pass a Tensor, or a "
        "dict / tuple / list / dataclass of Tensors batched on dim 0."
    )


def edge_counts(batch: Any) -> frozenset[int]:
    """The edge counts of the graphs in ``batch``: ``E`` of each ``edge_index``-like leaf (an
    integer tensor of shape ``(2, E)`` that is not batched on dim 0), so that an activation of
    ``E`` rows can be named for what it is (the graph's edges, not its samples)."""
    try:
        if is_graph_batch(batch):
            ei = getattr(batch, "edge_index", None)
            return frozenset({int(ei.shape[1])}) if isinstance(ei, torch.Tensor) and ei.dim() == 2 else frozenset()
        rows = batch_size_of(batch)
    except TypeError:
        return frozenset()
    return frozenset(
        int(t.shape[1])
        for t in leaf_tensors(batch)
        if t.dim() == 2 and t.shape[0] == 2 and rows != 2 and not (t.is_floating_point() or t.is_complex())
    )


def map_tensors(batch: Any, f: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``batch`` with ``f`` applied to every Tensor leaf (dicts, lists, tuples, named tuples and
    dataclasses are rebuilt; other leaves are kept as they are)."""
    if isinstance(batch, torch.Tensor):
        return f(batch)
    if isinstance(batch, Mapping):
        mapped = {k: map_tensors(v, f) for k, v in batch.items()}
        # the abstract Mapping takes no arguments, but a concrete mapping class is rebuilt from a dict
        # (dict itself, OrderedDict, Hugging Face's BatchEncoding); one that is not falls back to a dict
        rebuild = cast(Callable[[dict[Any, Any]], Any], type(batch))
        try:  # keep dict subclasses (Hugging Face's BatchEncoding, OrderedDict)
            return rebuild(mapped)
        except TypeError:
            return mapped
    if isinstance(batch, tuple):
        items = [map_tensors(v, f) for v in batch]
        return type(batch)(*items) if hasattr(batch, "_fields") else tuple(items)
    if isinstance(batch, list):
        return [map_tensors(v, f) for v in batch]
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        changes = {fl.name: map_tensors(getattr(batch, fl.name), f) for fl in dataclasses.fields(batch) if fl.init}
        return dataclasses.replace(batch, **changes)
    if (w := wrapped_tensor(batch)) is not None:
        return rewrapped(batch, f(w))
    if gives_dict(batch):
        return _rebuilt(batch, map_tensors(batch.to_dict(), f))
    return batch


def _rebuilt(batch: Any, mapped: dict) -> Any:
    """An object of ``batch``'s class from the dict ``mapped`` (its ``from_dict``), or a refusal
    naming the dict itself as the fix: cutting or tiling it must not hand back the whole batch."""
    from_dict = getattr(type(batch), "from_dict", None)
    if callable(from_dict):
        return from_dict(mapped)
    from scimech.errors import DataValidationError

    raise DataValidationError(
        f"A batch of type {type(batch).__name__} gives its tensors through .to_dict() but its class has no "
        "from_dict to be rebuilt from cut or tiled tensors. Pass the dict itself as the inputs, "
        "inputs=batch.to_dict(), with forward=lambda m, d: m(d, ...) in place of forward=lambda m, b: "
        "m(b.to_dict(), ...)."
    )


def _batched(batch: Any) -> Callable[[torch.Tensor], bool]:
    """Which leaves of ``batch`` carry the batch on dim 0 (the others are unbatched metadata)."""
    try:
        rows = batch_size_of(batch)
    except TypeError:
        return lambda t: t.dim() > 0
    return lambda t: t.dim() > 0 and t.shape[0] == rows


def slice_batch(batch: Any, start: int, stop: int) -> Any:
    """Samples ``start:stop`` of ``batch``: rows of every batched Tensor (unbatched leaves kept
    whole), or whole graphs of a graph batch (an object read through ``to_dict()`` whole is
    itself)."""
    if gives_dict(batch) and start == 0 and stop >= n_samples_of(batch):
        return batch
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
    return (
        isinstance(inputs, (torch.Tensor, Mapping, tuple))
        or is_graph_batch(inputs)
        or gives_dict(inputs)
        or (dataclasses.is_dataclass(inputs) and not isinstance(inputs, type))
    )


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
