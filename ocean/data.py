"""Ocean datasets, in one import: the schema, zarr stores, your own products, training samples.

The pieces live by concern; this module gathers their public names (``from ocean import data``
then ``data.open_store(...)``, ``data.WindowDataset(...)``):

- :mod:`ocean.validation`: :func:`validate` (dims ``(member, time, lat, lon)``, a ``mask``
  (lat, lon) with 1 = ocean, CF ``units``; see ``docs/ocean.md`` and :mod:`ocean.variables`);
- :mod:`ocean.stores`: :func:`write_zarr` (zarr v3, atomic), :func:`open_zarr` (lazy);
- :mod:`ocean.products`: :func:`from_nemo`, :func:`open_store` and :func:`inspect` (CMIP6, ORAS5 /
  NEMO, Copernicus Marine, MOM6, CESM variables found by CF standard name, units converted, signs
  and salinity read, onto the study's layout; what was read said back); a product's many files
  (a list of paths, a glob, a folder, a NEMO run with its mesh mask) combined by :mod:`ocean.files`;
- :mod:`ocean.samples`: :func:`chronological_split`, :class:`Normalizer` /
  :func:`fit_normalizer` (training split only), :class:`WindowDataset` (windows of inputs, the
  target and concepts ``lead`` steps later), :func:`make_batches`.
"""

from __future__ import annotations

from .products import from_nemo, inspect, open_store
from .samples import (
    ChunkedReader,
    Normalizer,
    Split,
    WindowDataset,
    chronological_split,
    fit_normalizer,
    make_batches,
)
from .stores import open_zarr, write_zarr
from .validation import validate
from .variables import DIMS, EXPECTED_UNITS

__all__ = [
    "DIMS",
    "EXPECTED_UNITS",
    "validate",
    "write_zarr",
    "open_zarr",
    "from_nemo",
    "open_store",
    "inspect",
    "Split",
    "chronological_split",
    "Normalizer",
    "fit_normalizer",
    "WindowDataset",
    "ChunkedReader",
    "make_batches",
]
