"""Ocean datasets, in one import: the schema, zarr stores, your own products, training samples.

The data layer is a subpackage, one module per concern; this package gathers their public names
(``from ocean import data`` then ``data.open_store(...)``, ``data.WindowDataset(...)``), each
imported when first used, so that reading a product (``scimech ocean inspect``) never imports torch:

- :mod:`ocean.data.validation`: :func:`validate` (dims ``(member, time, lat, lon)``, a ``mask``
  (lat, lon) with 1 = ocean, CF ``units``; see ``docs/ocean.md`` and :mod:`ocean.variables`);
- :mod:`ocean.data.stores`: :func:`write_zarr` (zarr v3, atomic), :func:`open_zarr` (lazy);
- :mod:`ocean.data.products`: :func:`from_nemo`, :func:`open_store` and :func:`inspect` (CMIP6, ORAS5 /
  NEMO, Copernicus Marine, MOM6, CESM variables found by CF standard name, units converted, signs
  and salinity read, onto the study's layout; what was read said back by :mod:`ocean.data.reading`);
  a product's many files (a list of paths, a glob, a folder, a NEMO run with its mesh mask)
  combined by :mod:`ocean.data.files`, its time axis read by :mod:`ocean.data.timeaxis` and its
  horizontal grid by :mod:`ocean.data.gridaxes`;
- :mod:`ocean.data.samples`: :func:`chronological_split`, :class:`Normalizer` /
  :func:`fit_normalizer` (training split only), :class:`WindowDataset` (windows of inputs, the
  target and concepts ``lead`` steps later), :func:`make_batches` (a product larger than memory in
  the block order of :class:`BlockSampler`, through a cache bounded in bytes); the split's
  arithmetic without torch in :mod:`ocean.data.splits`.

The old flat paths (``ocean.stores``, ``ocean.products``, ...) give these modules,
with a DeprecationWarning, until scimech 0.3.0 (:mod:`scimech._moved`).
"""

from __future__ import annotations

import importlib

from ..variables import DIMS, EXPECTED_UNITS

#: ``{name: the module that defines it}``, relative to this package
_LAZY = {
    "validate": ".validation",
    "write_zarr": ".stores",
    "open_zarr": ".stores",
    "from_nemo": ".products",
    "open_store": ".products",
    "inspect": ".products",
    "Split": ".samples",
    "chronological_split": ".samples",
    "Normalizer": ".samples",
    "fit_normalizer": ".samples",
    "WindowDataset": ".samples",
    "ChunkedReader": ".samples",
    "make_batches": ".samples",
    "BlockSampler": ".samples",
}

#: the modules of the data layer
_MODULES = ("files", "gridaxes", "products", "reading", "samples", "splits", "stores", "timeaxis", "validation")

__all__ = ["DIMS", "EXPECTED_UNITS", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # resolved once; later look-ups skip __getattr__
        return value
    if name in _MODULES:  # `ocean.data.products` without importing it first
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The data layer's public names and its modules (``dir(data)``, tab completion)."""
    return sorted({*__all__, *_MODULES})
