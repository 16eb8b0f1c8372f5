"""Which rows of a batch are one sample, checked rather than assumed.

Mean and resample ablation average or swap *samples*, and attribution patching gives a
per-sample effect. Where the first axis of a batch holds nodes of graphs, points of point
clouds or rows coupled by the model (an adaptive ODE solver's step-size control, batch
statistics, attention across the batch), rows are not independent samples. So:

- ``samples=`` says which rows belong to which sample: a 1-D integer tensor (one sample
  index per row, like PyTorch Geometric's ``batch`` vector), the name of the input field
  holding it (``"batch"``), or a callable ``batch -> tensor``. For a PyG graph batch it
  defaults to the batch's own ``batch`` vector. ``torch.arange(n)`` declares every row its
  own sample (accepting the coupling of, e.g., an adaptive solver).
- ``samples=FixedMesh(nodes)`` declares that every sample is the same mesh or grid:
  ``nodes`` consecutive rows, row ``k`` of every sample the same node (a weather model's
  icosahedral mesh, an ocean model's grid cells flattened to rows). Mean ablation then
  averages each node over the reference samples, and resampling swaps whole samples node
  for node; with a plain sample index, a sample's rows are nodes with no correspondence
  across samples, so mean pools every reference row and resampling is refused.
- Without it, :func:`rows_interact` checks on one batch that the first half of the rows
  alone gives the outputs it gives within the whole batch; if not, the verb raises a
  :class:`~scimech.errors.DataValidationError` naming ``samples=``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .batches import batch_size_of, is_graph_batch, is_one_batch, leaf_tensors, slice_batch
from .errors import DataValidationError
from .hooks import restore_modes, run_forward, to_eval

__all__ = ["Samples", "FixedMesh", "mesh_nodes", "sample_index", "rows_interact", "require_samples", "per_sample",
           "check_repeatable", "drift_error", "check_batching", "reference_chunk"]


@dataclass(frozen=True)
class FixedMesh:
    """Every sample is the same mesh or grid: ``nodes`` consecutive rows of the first axis,
    row ``k`` of every sample the same node. Mean ablation averages each node over the
    reference samples; resampling replaces a sample by a whole reference sample, node for node."""

    nodes: int

    def __post_init__(self):
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, numbers.Integral) or self.nodes < 1:
            raise ValueError(f"FixedMesh(nodes=...) takes the number of rows of one sample, a whole number >= 1; "
                             f"got {self.nodes!r}.")


Samples = torch.Tensor | str | Callable[[Any], torch.Tensor] | FixedMesh | None


def mesh_nodes(samples: Samples) -> int:
    """Rows per sample when ``samples`` is a :class:`FixedMesh`, else 1 (a row is matched to no other)."""
    return samples.nodes if isinstance(samples, FixedMesh) else 1

#: relative difference (to the output's scale) above which rows are taken to interact; kernel
#: rounding on other batch sizes is ~1e-7, an adaptive solver's shared steps ~1e-4
ROWS_RTOL = 1e-5


def sample_index(batch: Any, samples: Samples) -> torch.Tensor | None:
    """Each row's sample in ``batch`` (``None``: every row is its own sample)."""
    if samples is None:
        return batch.batch if is_graph_batch(batch) else None
    if isinstance(samples, FixedMesh):
        return _mesh_index(batch, samples.nodes)
    if isinstance(samples, torch.Tensor):
        idx = samples
    elif isinstance(samples, str):
        idx = batch.get(samples) if isinstance(batch, Mapping) else getattr(batch, samples, None)
        if idx is None:
            raise DataValidationError(f"samples={samples!r}: the input batch has no field {samples!r}; name the field "
                                      "that holds each row's sample index, or pass the index tensor itself.")
    elif callable(samples):
        idx = samples(batch)
    else:
        raise TypeError(f"samples= must be a tensor, a field name or a callable; got {type(samples).__name__}.")
    if not isinstance(idx, torch.Tensor) or idx.dim() != 1 or idx.is_floating_point():
        raise DataValidationError("samples= must give a 1-D integer tensor: the sample of each row.")
    rows = batch_size_of(batch)
    if idx.shape[0] != rows:
        raise DataValidationError(f"samples= gives {idx.shape[0]} row indices but the batch has {rows} rows.")
    return idx.long()


def _mesh_index(batch: Any, nodes: int) -> torch.Tensor:
    rows = batch_size_of(batch)
    if rows % nodes:
        raise DataValidationError(f"samples=FixedMesh(nodes={nodes}): the batch has {rows} rows, not a whole number of "
                                  f"samples of {nodes} rows; give the rows of one sample as nodes=.")
    idx = torch.arange(rows) // nodes
    if is_graph_batch(batch) and not torch.equal(batch.batch.cpu(), idx):
        raise DataValidationError(f"samples=FixedMesh(nodes={nodes}): the graphs of this batch are not all {nodes} "
                                  "nodes; FixedMesh is for samples that are the same mesh (pass samples=None to pool "
                                  "every reference node in mean ablation).")
    return idx


def check_batching(inputs: Any, samples: Samples, batch_size: int, verb: str, what: str = "inputs") -> None:
    """Batches are cut by rows. Where ``samples=`` says a sample is several rows (and the
    inputs are not a graph batch, which is cut by whole graphs), a cut inside a sample would
    split it, and an index or connectivity field of the whole batch would not fit the part:
    one batch of more rows than ``batch_size`` is refused, except a fixed mesh cut at whole
    meshes (``batch_size`` a multiple of its nodes)."""
    if samples is None or not is_one_batch(inputs) or is_graph_batch(inputs):
        return
    if isinstance(samples, torch.Tensor) and samples.unique().numel() == samples.numel():
        return   # every row its own sample
    rows = batch_size_of(inputs)
    if rows <= batch_size:
        return
    if isinstance(samples, FixedMesh) and batch_size % samples.nodes == 0 and not _has_unbatched(inputs):
        return
    raise DataValidationError(
        f"{verb}: the {what} are one batch of {rows} rows with samples of several rows (samples=), and batches of "
        f"batch_size={batch_size} rows would cut samples apart (and the parts would not fit a sample index or an "
        f"edge_index of the whole batch). Pass batch_size={rows} (one batch)"
        + (f" or a multiple of FixedMesh's {samples.nodes} nodes" if isinstance(samples, FixedMesh)
           and not _has_unbatched(inputs) else "")
        + ", or give the inputs as a list of batches of whole samples.")


def reference_chunk(reference: Any, samples: Samples, default: int = 256) -> int:
    """Rows per forward pass when recording reference activations: ``default``, except where a
    sample is several rows (``samples=``): the whole reference in one pass, or whole meshes."""
    if samples is None or not is_one_batch(reference) or is_graph_batch(reference):
        return default
    if isinstance(samples, torch.Tensor) and samples.unique().numel() == samples.numel():
        return default   # every row its own sample
    if isinstance(samples, FixedMesh) and not _has_unbatched(reference):
        return max(1, default // samples.nodes) * samples.nodes
    return max(default, batch_size_of(reference))


def _has_unbatched(batch: Any) -> bool:
    """Whether a leaf of ``batch`` is not batched on dim 0 (metadata kept whole when the batch
    is cut: an ``edge_index`` over every row would not fit a part)."""
    rows = batch_size_of(batch)
    return any(t.dim() == 0 or t.shape[0] != rows for t in leaf_tensors(batch))


def per_sample(values: torch.Tensor, index: torch.Tensor | None, n: int | None = None) -> torch.Tensor:
    """Per-row values summed per sample (``index``: each row's sample); values that are
    already one per sample pass through."""
    if index is None or values.shape[0] != index.shape[0]:
        return values
    n = int(index.max()) + 1 if n is None else n
    out = torch.zeros(n, *values.shape[1:], dtype=values.dtype, device=values.device)
    return out.index_add_(0, index.to(values.device), values)


def rows_interact(model: nn.Module, batch: Any, forward: Callable | None = None) -> str | None:
    """Why the rows of ``batch`` are not independent samples, or ``None`` if the first half of
    its rows alone gives the outputs it gives within the whole batch (one extra forward pass,
    in eval mode like the verbs; the model's mode is restored)."""
    try:
        b = batch_size_of(batch)
    except TypeError:
        return None
    if b < 2 or is_graph_batch(batch):
        return None
    h = b // 2
    # in eval mode, as the verbs record and sweep (a train-mode check would update batch-norm
    # running statistics and find the rows coupled by batch statistics the verbs never use)
    was = to_eval(model)
    try:
        with torch.no_grad():
            full = list(leaf_tensors(run_forward(model, batch, forward)))
            try:
                half = list(leaf_tensors(run_forward(model, slice_batch(batch, 0, h), forward)))
            except Exception as err:  # noqa: BLE001 - the rows cannot even run apart
                return (f"the first {h} of {b} rows cannot run without the others ({type(err).__name__}: "
                        f"{str(err)[:120]})")
    finally:
        restore_modes(was)
    pairs = [(f, s) for f, s in zip(full, half, strict=False) if f.dim() and f.shape[0] == b]
    if not pairs or len(full) != len(half):
        return f"the output is not batched on its first axis like the {b} input rows"
    for f, s in pairs:
        if s.shape != f[:h].shape:
            return f"the first {h} rows alone give an output of shape {tuple(s.shape)}, not {tuple(f[:h].shape)}"
        f, s = f[:h].detach(), s.detach()
        if f.is_floating_point() or f.is_complex():
            if not _same_run(f, s):   # NaN where the other has NaN (land points) is the same output
                fin = torch.isfinite(f) & torch.isfinite(s)
                scale = max(1.0, float(f[fin].abs().max())) if fin.any() else 1.0
                diff = float((f[fin] - s[fin]).abs().max()) if fin.any() else float("nan")
                return (f"the first {h} of {b} rows alone give outputs that differ by {diff / scale:.1e} of their scale "
                        "from the same rows within the whole batch")
        elif not torch.equal(f, s):
            return f"the first {h} of {b} rows alone give other outputs than within the whole batch"
    return None


def check_repeatable(model: nn.Module, batch: Any, forward: Callable | None, verb: str) -> None:
    """Two unchanged passes on ``batch`` (eval mode) must give the same outputs: a model that
    keeps state across calls (a counter, a cache, a running normaliser) or draws random numbers
    would add its drift to every effect, and would look like rows that interact."""
    was = to_eval(model)
    try:
        with torch.no_grad():
            one = list(leaf_tensors(run_forward(model, batch, forward)))
            two = list(leaf_tensors(run_forward(model, batch, forward)))
    finally:
        restore_modes(was)
    for a, b in zip(one, two, strict=False):
        if a.is_floating_point() or a.is_complex():
            ok = a.shape == b.shape and _same_run(a, b)
        else:
            ok = a.shape == b.shape and torch.equal(a, b)
        if not ok:
            raise drift_error(verb, "other outputs")


def repeat_rtol(dtype: torch.dtype) -> float:
    """How far two unchanged passes may differ, relative to the output's scale: kernels that
    sum in another order (GPU atomics, scatter) move float32 by ~1e-7 and bfloat16 / float16 by
    ~1e-2; a state kept across calls moves it by the state's effect."""
    return 5e-2 if dtype in (torch.bfloat16, torch.float16) else ROWS_RTOL


def _same_run(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Two passes' outputs agree: NaN where the other has NaN (land points), else within :func:`repeat_rtol`."""
    rtol = repeat_rtol(a.dtype)
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    if not torch.equal(nan_a, nan_b):
        return False
    a, b = a[~nan_a], b[~nan_b]
    finite = torch.isfinite(a) & torch.isfinite(b)
    if not torch.equal(a[~finite], b[~finite]):
        return False
    a, b = a[finite].double(), b[finite].double()
    if not a.numel():
        return True
    scale = max(1.0, float(a.abs().max()))
    return float((a - b).abs().max()) <= rtol * scale


def drift_error(verb: str, what: str) -> DataValidationError:
    """The one message for a model whose unchanged output drifts between passes."""
    return DataValidationError(
        f"{verb}: the unchanged model gave {what} on the same batch in a second forward pass: it keeps state across "
        "calls (a counter, a cache, a running normaliser) or draws random numbers, so every effect would include "
        "that drift. Pass a forward= that resets the state and seeds any randomness before each pass "
        "(forward=lambda m, x: (m.reset(), m(x))[1]), or make the model's forward deterministic.")


def require_samples(model: nn.Module, batch: Any, forward: Callable | None, samples: Samples, verb: str,
                    why: str) -> None:
    """Raise a :class:`DataValidationError` naming ``samples=`` when rows interact and no
    ``samples=`` says what a sample is."""
    if samples is not None or is_graph_batch(batch):
        return
    reason = rows_interact(model, batch, forward)
    if reason is not None:
        raise DataValidationError(
            f"{verb}: the rows of the first axis are not independent samples: {reason} (message passing over a "
            "graph, an adaptive solver's step-size control, batch statistics or attention across the batch). "
            f"{why} would mix them. Pass samples= (each row's sample index, e.g. a graph batch's `batch` vector, "
            "or torch.arange(n) to declare every row its own sample and accept the coupling).")
