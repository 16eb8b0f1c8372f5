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
- Without it, the model's profile (:mod:`scimech.capture.profile`, the one home of the check)
  finds on one batch whether the first half of the rows alone gives the outputs it gives
  within the whole batch; if not, the verb raises a
  :class:`~scimech.errors.DataValidationError` naming ``samples=``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from scimech.capture.batches import batch_size_of, is_graph_batch, is_one_batch, leaf_tensors
from scimech.capture.profiling import rows_interact  # noqa: F401 - its old home; the check lives in the profile
from scimech.errors import DataValidationError

__all__ = [
    "Samples",
    "FixedMesh",
    "mesh_nodes",
    "sample_index",
    "per_sample",
    "check_batching",
    "check_mesh",
    "mesh_mismatch",
    "reference_chunk",
]


@dataclass(frozen=True)
class FixedMesh:
    """Every sample is the same mesh or grid: ``nodes`` consecutive rows of the first axis,
    row ``k`` of every sample the same node. Mean ablation averages each node over the
    reference samples; resampling replaces a sample by a whole reference sample, node for node.

    Examples
    --------
    Two reference samples of a mesh of 3 nodes (rows 0-2 are the first, rows 3-5 the second):
    mean ablation gives each node its own mean over the samples, not the mean of all rows:

    >>> model = torch.nn.Sequential(torch.nn.Identity())
    >>> reference = torch.tensor([[0.0], [10.0], [20.0], [2.0], [12.0], [22.0]])
    >>> with sm.ablate(model, "0", method="mean", reference=reference, samples=FixedMesh(nodes=3)):
    ...     model(torch.zeros(6, 1)).flatten().tolist()
    [1.0, 11.0, 21.0, 1.0, 11.0, 21.0]
    >>> with sm.ablate(model, "0", method="mean", reference=reference):  # every row its own sample
    ...     model(torch.zeros(6, 1)).flatten().tolist()
    [11.0, 11.0, 11.0, 11.0, 11.0, 11.0]
    """

    nodes: int

    def __post_init__(self):
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, numbers.Integral) or self.nodes < 1:
            raise ValueError(
                f"FixedMesh(nodes=...) takes the number of rows of one sample, a whole number >= 1; got {self.nodes!r}."
            )


Samples = torch.Tensor | str | Callable[[Any], torch.Tensor] | FixedMesh | None


def mesh_nodes(samples: Samples) -> int:
    """Rows per sample when ``samples`` is a :class:`FixedMesh`, else 1 (a row is matched to no other)."""
    return samples.nodes if isinstance(samples, FixedMesh) else 1


def sample_index(batch: Any, samples: Samples) -> torch.Tensor | None:
    """Each row's sample in ``batch`` (``None``: every row is its own sample)."""
    if samples is None:
        return batch.batch if is_graph_batch(batch) else None
    if isinstance(samples, FixedMesh):
        return _mesh_index(batch, samples.nodes)
    idx: object  # checked to be a 1-D integer tensor below, whatever gave it
    if isinstance(samples, torch.Tensor):
        idx = samples
    elif isinstance(samples, str):
        idx = batch.get(samples) if isinstance(batch, Mapping) else getattr(batch, samples, None)
        if idx is None:
            raise DataValidationError(
                f"samples={samples!r}: the input batch has no field {samples!r}; name the field "
                "that holds each row's sample index, or pass the index tensor itself."
            )
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


def mesh_mismatch(nodes: int, rows: int, what: str, verb: str = "") -> DataValidationError:
    """The one message for rows that are not whole meshes under ``samples=FixedMesh(nodes)``."""
    return DataValidationError(
        f"{verb + ': ' if verb else ''}samples=FixedMesh(nodes={nodes}) says each sample is {nodes} consecutive rows "
        f"of the first axis, but the {what} has {rows} rows, not a whole number of meshes. Where the rows of the "
        f"inputs are samples already (a gridded field per row) and the model builds the mesh itself (a grid-to-mesh "
        f"encoder: its sites hold samples x {nodes} rows), drop samples= and declare those sites' rows packed sample "
        "by sample, axes={'<site>': 'batch*window feature'}: mean ablation then averages each node over the "
        "reference samples and resampling swaps whole samples node for node. Where the rows are mesh nodes, give "
        "the rows of one sample as nodes=."
    )


def check_mesh(batch: Any, samples: Samples, verb: str, what: str = "inputs") -> None:
    """A batch under ``samples=FixedMesh(nodes)`` is whole meshes (a graph batch is checked by its graphs)."""
    if isinstance(samples, FixedMesh) and is_one_batch(batch) and not is_graph_batch(batch):
        rows = batch_size_of(batch)
        if rows % samples.nodes:
            raise mesh_mismatch(samples.nodes, rows, f"batch of {what}", verb)


def _mesh_index(batch: Any, nodes: int) -> torch.Tensor:
    rows = batch_size_of(batch)
    if rows % nodes:
        raise mesh_mismatch(nodes, rows, "batch")
    idx = torch.arange(rows) // nodes
    if is_graph_batch(batch) and not torch.equal(batch.batch.cpu(), idx):
        raise DataValidationError(
            f"samples=FixedMesh(nodes={nodes}): the graphs of this batch are not all {nodes} "
            "nodes; FixedMesh is for samples that are the same mesh (pass samples=None to pool "
            "every reference node in mean ablation)."
        )
    return idx


def check_batching(inputs: Any, samples: Samples, batch_size: int, verb: str, what: str = "inputs") -> None:
    """Batches are cut by rows. Where ``samples=`` says a sample is several rows (and the
    inputs are not a graph batch, which is cut by whole graphs), a cut inside a sample would
    split it, and an index or connectivity field of the whole batch would not fit the part:
    one batch of more rows than ``batch_size`` is refused, except a fixed mesh cut at whole
    meshes (``batch_size`` a multiple of its nodes)."""
    check_mesh(inputs, samples, verb, what)
    if samples is None or not is_one_batch(inputs) or is_graph_batch(inputs):
        return
    if isinstance(samples, torch.Tensor) and samples.unique().numel() == samples.numel():
        return  # every row its own sample
    rows = batch_size_of(inputs)
    if rows <= batch_size:
        return
    if isinstance(samples, FixedMesh) and batch_size % samples.nodes == 0 and not _has_unbatched(inputs):
        return
    raise DataValidationError(
        f"{verb}: the {what} are one batch of {rows} rows with samples of several rows (samples=), and batches of "
        f"batch_size={batch_size} rows would cut samples apart (and the parts would not fit a sample index or an "
        f"edge_index of the whole batch). Pass batch_size={rows} (one batch)"
        + (
            f" or a multiple of FixedMesh's {samples.nodes} nodes"
            if isinstance(samples, FixedMesh) and not _has_unbatched(inputs)
            else ""
        )
        + ", or give the inputs as a list of batches of whole samples."
    )


def reference_chunk(reference: Any, samples: Samples, default: int = 256) -> int:
    """Rows per forward pass when recording reference activations: ``default``, except where a
    sample is several rows (``samples=``): the whole reference in one pass, or whole meshes."""
    if samples is None or not is_one_batch(reference) or is_graph_batch(reference):
        return default
    if isinstance(samples, torch.Tensor) and samples.unique().numel() == samples.numel():
        return default  # every row its own sample
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
