"""Ocean datasets, in one import: the schema, zarr stores, your own products, training samples.

The pieces live by concern; this module gathers their public names (``from ocean import data``
then ``data.open_store(...)``, ``data.WindowDataset(...)``):

- :mod:`ocean.validation`: :func:`validate` (dims ``(member, time, lat, lon)``, a ``mask``
  (lat, lon) with 1 = ocean, CF ``units``; see ``docs/ocean.md`` and :mod:`ocean.variables`);
- :mod:`ocean.stores`: :func:`write_zarr` (zarr v3, atomic), :func:`open_zarr` (lazy);
- :mod:`ocean.products`: :func:`from_nemo` and :func:`open_store` (ORAS5 / NEMO / CMEMS names
  and units mapped onto the study's layout);
- :mod:`ocean.samples`: :func:`chronological_split`, :class:`Normalizer` /
  :func:`fit_normalizer` (training split only), :class:`WindowDataset` (windows of inputs, the
  target and concepts ``lead`` steps later), :func:`make_batches`.
"""

from __future__ import annotations

from .products import from_nemo, open_store
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

__all__ = ["DIMS", "EXPECTED_UNITS", "validate", "write_zarr", "open_zarr", "from_nemo", "open_store", "Split",
           "chronological_split",
           "Normalizer", "fit_normalizer", "WindowDataset", "ChunkedReader", "make_batches"]
