"""Zarr v3 stores in the study's layout: written atomically, opened lazily and validated."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import xarray as xr

from scimech.errors import DataValidationError

from .validation import validate

__all__ = ["write_zarr", "open_zarr"]


def write_zarr(ds: xr.Dataset, path: str | os.PathLike, *, time_chunk: int = 12) -> Path:
    """Write a dataset to a zarr v3 store atomically, chunked ``(1, time_chunk, lat, lon)``.

    The store is built in a temporary sibling and moved into place, so a crash never leaves
    a partial store under ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds = ds.copy()
    enc = {}
    for v in ds.data_vars:
        chunks = tuple({"member": 1, "time": time_chunk}.get(d, ds.sizes[d]) for d in ds[v].dims)
        enc[v] = {"chunks": tuple(min(c, ds.sizes[d]) for c, d in zip(chunks, ds[v].dims))}
        ds[v].encoding = {}
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        store = tmp / "store.zarr"
        ds.to_zarr(store, mode="w", zarr_format=3, consolidated=False, encoding=enc)
        if path.exists():  # swap: the old store is removed only after the new one is in place
            old = tmp / "old.zarr"
            os.replace(path, old)
            os.replace(store, path)
        else:
            os.replace(store, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def open_zarr(path: str | os.PathLike, *, validate_schema: bool = True, **kwargs) -> xr.Dataset:
    """Open a zarr store lazily (dask chunks as stored); validated unless told otherwise."""
    path = Path(path)
    if not path.exists():
        raise DataValidationError(f"No zarr store at {str(path)!r}. Create one with `scimech ocean synth --out ...`.")
    try:
        ds = xr.open_zarr(path, consolidated=False, chunks={})
    except Exception as err:
        raise DataValidationError(
            f"Cannot open the zarr store {str(path)!r} ({type(err).__name__}: {err}). It is truncated "
            "or not a zarr v3 store: rewrite it (e.g. `scimech ocean synth --out ...`) or restore a copy."
        ) from err
    return validate(ds, check_nans=False, **kwargs) if validate_schema else ds
