"""Ocean-side helpers around :mod:`scimech.errors` (the error classes live in the core)."""

from __future__ import annotations

from collections.abc import Iterable

import xarray as xr

from scimech.errors import MissingVariableError

__all__ = ["require_vars"]


def require_vars(ds: xr.Dataset, names: Iterable[str], *, where: str = "") -> None:
    """Raise :class:`~scimech.errors.MissingVariableError` naming every absent variable."""
    missing = [n for n in names if n not in ds.variables]
    if missing:
        raise MissingVariableError(
            f"{where + ': ' if where else ''}missing variable(s) {missing}; the dataset has "
            f"{sorted(map(str, ds.data_vars))}. Rename yours (ocean.data.from_nemo maps ORAS5/NEMO/CMEMS names) "
            "or add them."
        )
