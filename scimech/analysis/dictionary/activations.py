"""Activations in, feature activations out, with the site's positions kept as dims.

A dictionary reads rows of width ``d`` (the site's feature axis); a site's recording has
more axes than that: grid cells, tokens, galaxies, neurons, time. :func:`rows` flattens
everything but the feature axis; :func:`chunks` does it one block at a time for a
recording too large for memory (a dask-backed DataArray, e.g. opened from the zarr store
:func:`scimech.capture.record.record` writes with ``to_zarr=``); :func:`encode` gives the feature
activations back on the recording's own dims, with ``feature`` in place of the feature
axis.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
import xarray as xr

from scimech.errors import DataValidationError

__all__ = ["rows", "chunks", "width", "encode", "feature_dim_of"]


def feature_dim_of(da: xr.DataArray, feature_dim: str | None) -> str:
    """The DataArray's feature axis: ``feature_dim``, else its last dim."""
    if feature_dim is None:
        return str(da.dims[-1])
    if feature_dim not in da.dims:
        raise DataValidationError(
            f"The activations have dims {da.dims}, not {feature_dim!r}; pass feature_dim= "
            "naming the axis the dictionary reads."
        )
    return feature_dim


def _as_array(acts: Any, feature_dim: str | None) -> Any:
    if isinstance(acts, xr.Dataset):
        if len(acts.data_vars) != 1:
            raise DataValidationError(
                f"A recording of {len(acts.data_vars)} sites was given "
                f"({', '.join(map(str, acts.data_vars))}); pass one site: ds[site]."
            )
        acts = next(iter(acts.data_vars.values()))
    if isinstance(acts, xr.DataArray):
        return acts.transpose(..., feature_dim_of(acts, feature_dim))
    return acts


def width(acts: Any, feature_dim: str | None = None) -> int:
    """The width ``d`` of the feature axis."""
    acts = _as_array(acts, feature_dim)
    return int(acts.shape[-1])


def _checked(block: np.ndarray | torch.Tensor, what: str) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(block) if not isinstance(block, torch.Tensor) else block.detach().cpu())
    t = t.to(torch.float32).reshape(-1, t.shape[-1])
    if not torch.isfinite(t).all():
        bad = int((~torch.isfinite(t)).any(1).sum())
        raise DataValidationError(
            f"{what}: {bad} of {t.shape[0]} rows hold NaN or inf (masked cells, land, a "
            "diverged model?). Drop those rows or fill them before training a dictionary."
        )
    return t


def chunks(
    acts: Any, feature_dim: str | None = None, *, rows_per_chunk: int = 65_536, what: str = "activations"
) -> Iterator[torch.Tensor]:
    """``(rows, d)`` float32 blocks of the activations, in order: an in-memory array as one
    block (or ``rows_per_chunk`` rows at a time), a dask-backed DataArray block by block of
    its first dim (only one block in memory at a time)."""
    acts = _as_array(acts, feature_dim)
    if isinstance(acts, xr.DataArray) and acts.chunks is not None:
        lead = acts.dims[0]
        start = 0
        for size in acts.chunks[0]:
            yield _checked(acts.isel({lead: slice(start, start + size)}).values, what)
            start += size
        return
    data = acts.values if isinstance(acts, xr.DataArray) else acts
    flat = _checked(data, what)
    for start in range(0, flat.shape[0], rows_per_chunk):
        yield flat[start : start + rows_per_chunk]


def rows(acts: Any, feature_dim: str | None = None, *, what: str = "activations") -> torch.Tensor:
    """All the activations as one ``(rows, d)`` float32 tensor."""
    return torch.cat(list(chunks(acts, feature_dim, what=what)))


@torch.no_grad()
def encode(dictionary, acts: Any, feature_dim: str | None = None, *, batch_rows: int = 65_536) -> xr.DataArray:
    """Feature activations of ``acts`` on their own dims, ``feature`` in place of the feature
    axis (a DataArray in, its coords kept; an array in, dims ``row`` and ``feature``)."""
    arr = _as_array(acts, feature_dim)
    was = dictionary.training
    dictionary.eval()
    device = next(dictionary.parameters()).device
    try:
        parts = [dictionary.encode(block.to(device)).cpu() for block in chunks(arr, rows_per_chunk=batch_rows)]
    finally:
        dictionary.train(was)
    z = torch.cat(parts).numpy()
    coords = {"feature": np.arange(dictionary.n_features)}
    if isinstance(arr, xr.DataArray):
        lead = arr.dims[:-1]
        z = z.reshape(*(arr.sizes[d] for d in lead), dictionary.n_features)
        keep = {k: v for k, v in arr.coords.items() if arr.dims[-1] not in v.dims}
        return xr.DataArray(
            z,
            dims=(*lead, "feature"),
            coords={**keep, **coords},
            name="feature_activation",
            attrs={"description": "dictionary feature activations", "site_dim": arr.dims[-1]},
        )
    lead_shape = tuple(np.shape(arr)[:-1])
    dims = ("row",) if len(lead_shape) == 1 else tuple(f"axis_{i}" for i in range(len(lead_shape)))
    return xr.DataArray(z.reshape(*lead_shape, -1), dims=(*dims, "feature"), coords=coords, name="feature_activation")
