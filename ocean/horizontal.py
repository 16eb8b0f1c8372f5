"""A product's horizontal grid as the study reads it: 1-D ``lat`` / ``lon`` dims for a regular
grid (from 1-D coordinates, or 2-D ``nav_lat`` / ``nav_lon`` that are regular), or a
curvilinear grid kept as it is with its scale factors (:mod:`ocean.curvilinear`)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from scimech.errors import DimensionError, MissingVariableError, UnitsError

from . import curvilinear

__all__ = ["regular_grid", "curvilinear_grid"]

_LATLON_ATOL = 1e-4  # degrees (~10 m): float32 nav_lat / nav_lon of a regular grid vary by ~1e-5


def regular_grid(ds: xr.Dataset, notes: list[str]) -> xr.Dataset:
    """1-D ``lat`` / ``lon`` dims from 1-D coordinates or 2-D ``nav_lat`` / ``nav_lon`` of a regular grid."""
    if "lat" not in ds.variables or "lon" not in ds.variables:
        raise MissingVariableError(
            f"No latitude / longitude in the dataset (variables {sorted(map(str, ds.variables))}). Expected "
            "'lat'/'lon', 'latitude'/'longitude' or NEMO's 'nav_lat'/'nav_lon'; pass names={'yours': 'lat', ...}.")
    lat, lon = ds["lat"], ds["lon"]
    if lat.ndim == 1 and lon.ndim == 1:
        return ds.swap_dims({d: n for d, n in ((lat.dims[0], "lat"), (lon.dims[0], "lon")) if d != n})
    if lat.ndim != 2 or lon.ndim != 2 or set(lat.dims) != set(lon.dims):
        raise DimensionError(f"lat {lat.dims} and lon {lon.dims} must both be 1-D, or both 2-D on the same "
                             "(y, x) dims (NEMO nav_lat / nav_lon).")
    if "e1t" in ds.variables and "e2t" in ds.variables:
        return curvilinear_grid(ds, notes)  # the model's own scale factors: its grid, however regular
    la, lo = lat.values.astype(float), lon.transpose(*lat.dims).values.astype(float)
    if np.allclose(la, la[:, :1], atol=_LATLON_ATOL) and np.allclose(lo, lo[:1, :], atol=_LATLON_ATOL):
        ydim, xdim = lat.dims
        lat1, lon1 = la[:, 0], lo[0, :]
    elif np.allclose(la, la[:1, :], atol=_LATLON_ATOL) and np.allclose(lo, lo[:, :1], atol=_LATLON_ATOL):
        xdim, ydim = lat.dims
        lat1, lon1 = la[0, :], lo[:, 0]
    else:
        return curvilinear_grid(ds, notes)
    notes.append(f"2-D lat/lon on ({ydim}, {xdim}) -> 1-D lat, lon")
    out = ds.drop_vars(["lat", "lon"]).rename({ydim: "lat", xdim: "lon"})
    return out.assign_coords(lat=("lat", lat1, {"units": "degrees_north", "standard_name": "latitude"}),
                             lon=("lon", lon1, {"units": "degrees_east", "standard_name": "longitude"}))


def curvilinear_grid(ds: xr.Dataset, notes: list[str]) -> xr.Dataset:
    """A curvilinear grid kept as it is: its ``(y, x)`` dims become the study's ``(lat, lon)`` dims (grid
    indices), 2-D ``nav_lat`` / ``nav_lon`` and the scale factors ``e1t`` / ``e2t`` (m; NEMO's mesh mask,
    or great-circle distances between the T points when absent) become coordinates, and vectors are
    taken along the grid's axes (NEMO's convention)."""
    ydim, xdim = ds["lat"].dims
    factors = {}
    for k in ("e1t", "e2t"):
        if k in ds.variables:
            e = ds[k]
            e = e.isel({d: 0 for d in e.dims if d not in (ydim, xdim)}, drop=True).transpose(ydim, xdim)
            if e.attrs.get("units", "m") not in ("m", "meter", "metre", "meters", "metres"):
                raise UnitsError(f"Scale factor {k!r} has units {e.attrs['units']!r}; expected metres ('m').")
            factors[k] = e.values.astype(float)
    la, lo = ds["lat"].transpose(ydim, xdim).values.astype(float), ds["lon"].transpose(ydim, xdim).values.astype(float)
    if len(factors) < 2:
        factors = dict(zip(("e1t", "e2t"), curvilinear.scale_factors(la, lo)))
        notes.append("e1t, e2t = great-circle distances between T points (no scale factors in the product)")
    out = ds.drop_vars([v for v in ("lat", "lon", "e1t", "e2t") if v in ds.variables]).rename({ydim: "lat", xdim: "lon"})
    dims = ("lat", "lon")
    out = out.assign_coords(
        nav_lat=(dims, la, {"units": "degrees_north", "standard_name": "latitude"}),
        nav_lon=(dims, lo, {"units": "degrees_east", "standard_name": "longitude"}),
        e1t=(dims, factors["e1t"], {"units": "m", "long_name": "scale factor along i (T point)"}),
        e2t=(dims, factors["e2t"], {"units": "m", "long_name": "scale factor along j (T point)"}))
    notes.append(f"curvilinear grid: ({ydim}, {xdim}) -> (lat, lon) grid indices with 2-D nav_lat, nav_lon, e1t, "
                 "e2t; vectors (tauu, tauv, uo, vo) along the grid's i, j axes")
    return out
