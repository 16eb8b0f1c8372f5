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

import lazy_loader as _lazy

from ..variables import DIMS, EXPECTED_UNITS

#: the data layer's modules, and the public names each defines: imported when first used (scientific
#: Python's SPEC 1, lazy_loader)
__getattr__, _dir, __all__ = _lazy.attach(
    __name__,
    submodules=["files", "gridaxes", "products", "reading", "samples", "splits", "stores", "timeaxis", "validation"],
    submod_attrs={
        "validation": ["validate"],
        "stores": ["write_zarr", "open_zarr"],
        "products": ["from_nemo", "open_store", "inspect"],
        "samples": [
            "Split",
            "chronological_split",
            "Normalizer",
            "fit_normalizer",
            "WindowDataset",
            "ChunkedReader",
            "make_batches",
            "BlockSampler",
        ],
    },
)
__all__ = ["DIMS", "EXPECTED_UNITS", *__all__]


def __dir__() -> list[str]:
    """The data layer's public names and its modules (``dir(data)``, tab completion)."""
    return list(__all__)
