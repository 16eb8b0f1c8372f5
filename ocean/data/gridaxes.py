"""The horizontal grid of an ocean product as it comes, read with xgcm and xnemogcm and said back.

:func:`read_grid` takes a product's dataset as opened (before the study renames its variables) and
returns it on the study's horizontal dims ``(lat, lon)``:

- **axes**: latitude and longitude found by name (``lat`` / ``latitude`` / NEMO's ``nav_lat`` and
  ``gphit`` / MOM's ``geolat`` and ``yh`` ...) or else by CF ``standard_name`` / ``units`` (cf_xarray);
  2-D positions of a regular grid become 1-D ``lat`` / ``lon``; a curvilinear grid is kept with its
  scale factors (:func:`curvilinear_grid`);
- **longitudes unwrapped** (``numpy.unwrap`` with period 360): a box crossing Greenwich on 0..360 or
  the dateline on -180..180 gets monotonic longitudes, so no difference spans the jump;
- **periodic longitude** detected: a grid whose columns go once round the globe (the gap across the
  seam is one grid spacing) is periodic in ``X``; xgcm's ``padding="periodic"`` then makes the seam
  an ordinary neighbour in every operator (:mod:`ocean.horizontal`, which reads it from the coordinates'
  values: :func:`periodic_in_longitude`) and in the interpolation of staggered fields; columns that repeat
  the first ones (+360: one, 0 and 360, or a halo of several, -1 .. 361) and NEMO's ORCA halo are dropped first;
- **north fold** of a tripolar ORCA grid (:func:`north_fold`: the last row a mirrored copy of the row two or
  one below, NEMO's ``lbc_nfd``): on a grid that goes once round the globe NEMO's north-fold boundary is applied
  (the last row, NEMO's halo, masked as a duplicate and refilled by every operator from the row folded onto it,
  a vector's components with their sign reversed: :mod:`ocean.horizontal`); otherwise the last two rows are
  masked (fields NaN, mask 0); the reading says which;
- **positions** a product could not give: NEMO writes (0, 0) at the land processors it eliminated; such
  points (and NaN ones) are mended from the mesh mask's ``glamt`` / ``gphit``, else from the rows and
  columns of a regular grid, else left unknown where ``e1t`` / ``e2t`` are given, and refused otherwise
  (a spacing measured to (0, 0) put q_geo 36 % off next to land);
- **vectors on a curvilinear grid** along its ``i`` / ``j`` axes, the components the operators take: a
  pair given east / north (CF ``surface_downward_eastward_stress`` / ``..._northward_...``,
  ``eastward_sea_water_velocity`` / ``northward_...``) is turned by the local angles of the grid's axes
  (:func:`axis_angles`, from the positions); a grid whose rows run north to south (``j`` clockwise
  from ``i``) has its rows reversed, since the Ekman and geostrophic cross products need right-handed axes;
- **staggered fields** (MOM's ``xq`` / ``yq``, MOM5's ``xu_ocean`` / ``yu_ocean``, NEMO's U / V points
  on ``x_u`` / ``y_v`` or xnemogcm's ``x_f`` / ``y_f``) brought to the T points by xgcm's ``interp``
  (the mean of the two neighbouring faces; a face that is NaN counts as no flow), never dropped; a
  variable on the T points' own dims is placed by its own CF ``coordinates`` attribute where it has one
  (:func:`declared_coordinates`: POP's ``TEMP`` names ``TLONG TLAT``, its ``TAUX`` ``ULONG ULAT``; once a
  file is decoded every variable carries every position on its dims), else by the positions attached to it;
- **metrics** from a NEMO mesh mask when one is given (``e1t`` / ``e2t`` in m, ``e3t_0`` / ``e3t``,
  the 3-D ``tmask`` whose surface level is the 2-D ocean mask, or ``tmaskutil``), placed by xnemogcm's
  table of Arakawa points;
- **mask**: ``mask`` (lat, lon), 1 = ocean, from the mesh mask, else from the product's ``tmaskutil`` /
  ``tmask`` / ``mask``; absent when the product has none (the reader then takes it from the data).

What the study's operators need travels with the data as coordinate attributes, so it survives
``xr.Dataset.isel``, arithmetic and a zarr or netCDF write and read (:data:`PERIODIC_ATTR`): on a
regular grid the 1-D ``lon`` coordinate (degrees east, monotonic) carries ``periodic = 1`` when the grid
wraps; on a curvilinear grid the 2-D ``nav_lon`` does, beside the ``e1t`` / ``e2t`` coordinates.
On a regular grid latitudes are kept in the product's order: the operators use signed spacings, so a
grid stored north to south is differenced (and upwinded) the right way.
"""

from __future__ import annotations

import warnings

import cf_xarray  # noqa: F401  (registers the ds.cf accessor)
import numpy as np
import xarray as xr
import xgcm
from xnemogcm.tools import get_domcfg_points

from scimech.errors import DimensionError, MissingVariableError, UnitsError
from scimech.studies.reading import Reading

from .. import curvilinear

__all__ = [
    "PERIODIC_ATTR",
    "FACE_FACTORS",
    "read_grid",
    "regular_grid",
    "curvilinear_grid",
    "is_periodic",
    "declared_coordinates",
    "north_fold",
    "fold_source",
    "periodic_in_longitude",
    "mark_periodic",
    "axis_angles",
]

#: attribute of the longitude coordinate (``lon``, or ``nav_lon`` on a curvilinear grid): 1 when the grid is
#: periodic in longitude (an integer, so that netCDF and zarr keep it)
PERIODIC_ATTR = "periodic"

_LATLON_ATOL = 1e-4  # degrees (~10 m): float32 nav_lat / nav_lon of a regular grid vary by ~1e-5
_LAT_NAMES = ("lat", "latitude", "nav_lat", "gphit", "geolat", "yh", "yt_ocean", "TLAT", "y_c")
_LON_NAMES = ("lon", "longitude", "nav_lon", "glamt", "geolon", "xh", "xt_ocean", "TLONG", "x_c")
#: staggered horizontal dims by name and the side of the T point they sit on when their coordinate
#: does not say (NEMO and xnemogcm: U / V / F points are east / north of T, ``right``; MOM6's
#: non-symmetric ``xq`` / ``yq`` too; MOM5's ``xu_ocean`` / ``yu_ocean`` are the north-east corners)
_STAGGERED = {
    "xq": ("X", "right"),
    "yq": ("Y", "right"),
    "x_u": ("X", "right"),
    "x_f": ("X", "right"),
    "y_v": ("Y", "right"),
    "y_f": ("Y", "right"),
    "xu_ocean": ("X", "right"),
    "yu_ocean": ("Y", "right"),
    "x_grid_U": ("X", "right"),
    "y_grid_V": ("Y", "right"),
}
#: 2-D positions of staggered points: dropped once their fields are at T points
_STAGGERED_POSITIONS = {
    "glamu",
    "glamv",
    "glamf",
    "gphiu",
    "gphiv",
    "gphif",
    "geolon_u",
    "geolat_u",
    "geolon_v",
    "geolat_v",
    "geolon_c",
    "geolat_c",
    "ULAT",
    "ULONG",
    "nav_lat_grid_U",
    "nav_lon_grid_U",
    "nav_lat_grid_V",
    "nav_lon_grid_V",
}
#: NEMO's scale factors at the U points (east faces) and V points (north faces), on the T points' index
FACE_FACTORS = ("e1u", "e2u", "e1v", "e2v")
#: the vertical dims of T-point fields (NEMO, CMIP6, MOM6, POP): the mesh mask's levels take the product's name
_LEVEL_DIMS = ("deptht", "depth", "lev", "olevel", "z_l", "z_t", "nav_lev", "z")
_METRES = ("m", "meter", "metre", "meters", "metres")
#: the mesh mask's glamt / gphit beside a product's own positions (read by :func:`_mend_positions`, then dropped)
_MESH_SUFFIX = "_of_mesh_mask"
_MESH_POS = ("gphit" + _MESH_SUFFIX, "glamt" + _MESH_SUFFIX)


def _first(ds: xr.Dataset, names: tuple[str, ...], cf_key: str, exclude: set[str]) -> str | None:
    for n in names:
        if n in ds.variables:
            return n
    try:
        found = [str(n) for n in ds.cf.coordinates.get(cf_key, []) if str(n) not in exclude]
    except Exception:  # a dataset cf_xarray cannot parse has no CF axes to give
        found = []
    return found[0] if found else None


def _find_axes(ds: xr.Dataset) -> tuple[str, str]:
    lat = _first(ds, _LAT_NAMES, "latitude", _STAGGERED_POSITIONS | set(_STAGGERED))
    lon = _first(ds, _LON_NAMES, "longitude", _STAGGERED_POSITIONS | set(_STAGGERED))
    if lat is None or lon is None:
        raise MissingVariableError(
            f"No latitude / longitude in the dataset (variables {sorted(map(str, ds.variables))}). Expected "
            "'lat'/'lon', 'latitude'/'longitude', NEMO's 'nav_lat'/'nav_lon' or a coordinate with standard_name "
            "latitude / longitude; pass names={'yours': 'lat', ...} or set the standard_name attributes."
        )
    return lat, lon


def _squeeze_mesh(mm: xr.Dataset) -> xr.Dataset:
    """A mesh mask as NEMO writes it, its time dim of length 1 (``t``, ``time_counter``) dropped."""
    for d in ("t", "time", "time_counter"):
        if d in mm.dims and mm.sizes[d] == 1:
            mm = mm.isel({d: 0}, drop=True)
    return mm


def _merge_mesh_mask(ds: xr.Dataset, mm: xr.Dataset, ydim: str, xdim: str, facts: dict) -> xr.Dataset:
    """The mesh mask's T-point metrics and mask on the product's (y, x) dims (xnemogcm's table of points)."""
    mm = _squeeze_mesh(mm)
    points = get_domcfg_points()
    my, mx = "y", "x"
    if my not in mm.dims or mx not in mm.dims:
        raise DimensionError(
            f"The mesh mask has dims {dict(mm.sizes)}; expected NEMO's (y, x) (and z or nav_lev). "
            "Fix: pass the mesh_mask.nc (or domain_cfg.nc) written by NEMO for this grid."
        )
    if (mm.sizes[my], mm.sizes[mx]) != (ds.sizes[ydim], ds.sizes[xdim]):
        raise DimensionError(
            f"The mesh mask's grid is {mm.sizes[my]} x {mm.sizes[mx]} (y, x) but the product's is "
            f"{ds.sizes[ydim]} x {ds.sizes[xdim]} ({ydim}, {xdim}). Fix: pass the mesh mask of this product's grid "
            "(the same configuration and any sub-region cut the same way)."
        )
    zdim = next((d for d in ("z", "nav_lev") if d in mm.dims), None)
    taken = []
    out = ds.copy()
    for name in ("e1t", "e2t") + FACE_FACTORS:
        if name in mm.variables and points.get(name) == ("T" if name.endswith("t") else name[-1].upper()):
            e = mm[name]
            units = e.attrs.get("units", "m")
            if units not in _METRES:
                raise UnitsError(f"Mesh mask scale factor {name!r} has units {units!r}; expected metres ('m').")
            out[name] = e.rename({my: ydim, mx: xdim}).reset_coords(drop=True).astype(float)
            taken.append(name)
    if {"e1t", "e2t"} <= set(taken):
        facts["metrics"] = "e1t, e2t from the mesh mask (m); " + (
            "e1u, e2u, e1v, e2v at the faces"
            if set(FACE_FACTORS) <= set(taken)
            else "at U / V faces the mean of the two T points'"
        )
    levels = next((str(d) for d in ds.dims if str(d) in _LEVEL_DIMS and zdim and ds.sizes[d] == mm.sizes[zdim]), zdim)
    for name in ("e3t_0", "e3t"):
        if name in mm.variables and zdim and zdim in mm[name].dims:
            e3 = mm[name].rename({my: ydim, mx: xdim, zdim: levels}).reset_coords(drop=True).astype(float)
            out["e3t"] = e3.assign_attrs(units="m", long_name=f"cell thickness at T points ({name} of the mesh mask)")
            taken.append(name)
            break
    mask = None
    if "tmaskutil" in mm.variables:
        mask, how = mm["tmaskutil"], "tmaskutil of the mesh mask"
    elif "tmask" in mm.variables:
        mask = mm["tmask"]
        if zdim and zdim in mask.dims:
            mask, how = mask.isel({zdim: 0}, drop=True), "the surface level of the mesh mask's 3-D tmask"
        else:
            how = "tmask of the mesh mask"
    if mask is not None:
        out["mask"] = mask.rename({my: ydim, mx: xdim}).reset_coords(drop=True)
        facts["mask from"] = how
        taken.append("tmaskutil" if "utility" in how or how.startswith("tmaskutil") else "tmask")
    for pos in ("glamt", "gphit"):
        if pos not in mm.variables:
            continue
        given = any(n in ds.variables for n in (_LON_NAMES if "glam" in pos else _LAT_NAMES))
        # the product's own positions first; the mesh mask's kept aside to mend the (0, 0) of eliminated land
        out = out.assign_coords(
            {f"{pos}{_MESH_SUFFIX}" if given else pos: mm[pos].rename({my: ydim, mx: xdim}).reset_coords(drop=True)}
        )
        if not given:
            taken.append(pos)
    facts["mesh mask"] = ", ".join(taken) if taken else "given, but it has none of e1t, e2t, e3t_0, tmask"
    return out


def _t_dims(ds: xr.Dataset, lat: str, lon: str) -> tuple[str, str]:
    la, lo = ds[lat], ds[lon]
    if la.ndim == 1 and lo.ndim == 1 and la.dims == lo.dims:
        raise DimensionError(
            f"{lat} and {lon} share the one dim {la.dims[0]!r}: an unstructured mesh or a list of "
            "points, not a (lat, lon) grid. Fix: regrid onto a latitude-longitude grid first "
            "(e.g. with xesmf or cdo remapbil)."
        )
    if la.ndim == 1 and lo.ndim == 1:
        return la.dims[0], lo.dims[0]
    if la.ndim != 2 or lo.ndim != 2 or set(la.dims) != set(lo.dims):
        raise DimensionError(
            f"{lat} {la.dims} and {lon} {lo.dims} must both be 1-D, or both 2-D on the same "
            "(y, x) dims (NEMO nav_lat / nav_lon)."
        )
    return la.dims[0], la.dims[1]


def _position(ds: xr.Dataset, dim: str, centre: str, default: str) -> str:
    """Where a staggered dim's points sit relative to the T points: from its coordinate's values when it
    has one (``outer``: one more point; ``left`` / ``right``: half a cell before / after), else by name."""
    n, m = ds.sizes[dim], ds.sizes[centre]
    if n == m + 1:
        return "outer"
    if n != m:
        raise DimensionError(
            f"Staggered dim {dim!r} has {n} points but the T points' {centre!r} have {m}; "
            f"expected {m} or {m + 1}. Fix: select the same region on both grids."
        )
    shift = ds[dim].attrs.get("c_grid_axis_shift") if dim in ds.coords else None
    if shift is not None:  # the COMODO attribute xgcm and xnemogcm write: +0.5 right of the centre, -0.5 left
        return "right" if float(shift) > 0 else "left"
    if dim in ds.coords and centre in ds.coords and ds[dim].ndim == 1 and ds[centre].ndim == 1:
        s, c = np.asarray(ds[dim].values, float), np.asarray(ds[centre].values, float)
        if np.all(np.isfinite(s)) and np.all(np.isfinite(c)) and not np.allclose(s, c):
            step = np.sign(np.nanmean(np.diff(c))) if m > 1 else 1.0
            return "right" if np.nanmedian((s - c) * step) > 0 else "left"
    return default


#: 2-D positions that put a variable on the T points' own (y, x) dims at U (east face) or V (north face)
#: points: NEMO's mesh-mask names and those of its grid_U / grid_V files
_U_POSITIONS = {"glamu", "gphiu", "nav_lon_grid_U", "nav_lat_grid_U"}
_V_POSITIONS = {"glamv", "gphiv", "nav_lon_grid_V", "nav_lat_grid_V"}
#: ... and at the north-east corners: NEMO's F points, POP's B-grid U points (ULAT / ULONG), MOM's corners
_CORNER_POSITIONS = {"glamf", "gphif", "ULAT", "ULONG", "geolon_c", "geolat_c"}


def declared_coordinates(da: xr.DataArray) -> set[str] | None:
    """The names in a variable's own CF ``coordinates`` attribute (CF 5: where the variable lives; xarray moves
    it into ``encoding`` when it decodes a file), None when it declares none. A file's variables all get every
    coordinate that shares their dims once decoded (POP's tracers get ``ULAT`` / ``ULONG`` too), so only this
    attribute tells a tracer from a velocity on the same ``(nlat, nlon)`` dims."""
    text = da.encoding.get("coordinates", da.attrs.get("coordinates"))
    return set(str(text).split()) if text else None


def _faces_on_t_dims(
    ds: xr.Dataset, ydim: str, xdim: str, facts: dict | None = None
) -> tuple[xr.Dataset, dict[str, tuple[str, str]]]:
    """A variable on the T points' dims whose coordinates are U (V) positions is on the east (north) faces,
    one with corner positions on both: its x (y) dim renamed ``<x>_U`` (``<y>_V``) so that it is interpolated
    like any staggered dim. Its coordinates are those its own CF ``coordinates`` attribute names
    (:func:`declared_coordinates`), else those attached to it."""
    extra: dict[str, tuple[str, str]] = {}
    declared_by: list[str] = []
    staggered = _U_POSITIONS | _V_POSITIONS | _CORNER_POSITIONS
    for name, da in list(ds.data_vars.items()):
        declared = declared_coordinates(da)
        coords = declared if declared is not None else set(map(str, da.coords))
        if declared is not None and set(map(str, da.coords)) & staggered:
            declared_by.append(f"{name}: {' '.join(sorted(declared & set(map(str, ds.variables))))}")
        faces = []
        if coords & (_U_POSITIONS | _CORNER_POSITIONS):
            faces.append((xdim, "X", "U"))
        if coords & (_V_POSITIONS | _CORNER_POSITIONS):
            faces.append((ydim, "Y", "V"))
        faces = [f for f in faces if f[0] in da.dims]
        if faces:
            ds = ds.drop_vars(name).assign(
                {name: da.reset_coords(drop=True).rename({dim: f"{dim}_{tag}" for dim, _, tag in faces})}
            )
            extra.update({f"{dim}_{tag}": (axis, "right") for dim, axis, tag in faces})
    if declared_by and facts is not None:
        facts["variable positions"] = (
            "each variable's own CF coordinates attribute (a decoded file attaches every position to every "
            "variable on the same dims): " + "; ".join(declared_by)
        )
    return ds, extra


def _staggered_dims(
    ds: xr.Dataset, ydim: str, xdim: str, extra: dict[str, tuple[str, str]] | None = None
) -> dict[str, tuple[str, str, str]]:
    """``{dim: (axis, centre dim, position)}`` for each staggered horizontal dim a data variable uses."""
    found = {}
    used = {d for v in ds.data_vars.values() for d in v.dims}
    for d in used:
        d = str(d)
        if d in (ydim, xdim):
            continue
        known = {**_STAGGERED, **(extra or {})}
        if d in known:
            axis, default = known[d]
        elif (
            d in ds.coords
            and ds[d].ndim == 1
            and ds[d].attrs.get("axis") in ("X", "Y")
            and d not in ds[d].attrs.get("bounds", "")
        ):
            axis, default = ds[d].attrs["axis"], "right"
        else:
            continue
        centre = xdim if axis == "X" else ydim
        found[d] = (axis, centre, _position(ds, d, centre, default))
    return found


def _to_t_points(
    ds: xr.Dataset, stag: dict[str, tuple[str, str, str]], periodic: bool, reading: Reading | None, facts: dict
) -> xr.Dataset:
    """Each variable on a staggered dim interpolated to the T points with xgcm (NaN faces count as no flow)."""
    if not stag:
        return ds
    coords: dict[str, dict[str, str]] = {}
    sizes = {}
    for d, (axis, centre, pos) in stag.items():
        coords.setdefault(axis, {"center": centre})[pos] = d
        sizes[d], sizes[centre] = ds.sizes[d], ds.sizes[centre]
    gds = xr.Dataset(coords={d: (d, np.arange(n)) for d, n in sizes.items()})
    padding = {a: ("periodic" if a == "X" and periodic else "extend") for a in coords}
    grid = xgcm.Grid(gds, coords=coords, padding=padding, autoparse_metadata=False)
    out = ds
    said = []
    for name, da in ds.data_vars.items():
        dims = [d for d in da.dims if d in stag]
        if not dims:
            continue
        value = xr.DataArray(da.data, dims=da.dims)
        for d in dims:  # one axis at a time (a corner field: both)
            value = _interp_to_centre(grid, value, d, *stag[d], periodic=periodic)
        keep = {k: c for k, c in da.coords.items() if not set(c.dims) & set(dims)}
        value = xr.DataArray(value.data, dims=value.dims).assign_coords(keep).assign_attrs(da.attrs)
        where = ", ".join(f"{d} ({stag[d][2]} of {stag[d][1]})" for d in dims)
        value.attrs["grid_position"] = f"interpolated to T points from {where} by xgcm"
        out = out.drop_vars(name).assign({name: value})
        said.append(f"{name} on {where}")
        if reading is not None:
            reading.add(
                str(name),
                f"{name} on {', '.join(dims)}",
                "grid position",
                da.attrs.get("units", ""),
                da.attrs.get("units", ""),
                f"interpolated to T points by xgcm ({where})",
            )
    drop = [v for v in out.variables if set(out[v].dims) & set(stag) or v in _STAGGERED_POSITIONS]
    out = out.drop_vars(drop)
    facts["staggered"] = (
        "; ".join(said) + " -> T points (xgcm interp: mean of the two neighbouring faces, NaN "
        "faces as no flow; "
        + ("periodic" if periodic else "at an edge cell with one face, extrapolated linearly from the two nearest")
        + ")"
    )
    return out


def _interp_to_centre(
    grid: xgcm.Grid, da: xr.DataArray, dim: str, axis: str, centre: str, position: str, *, periodic: bool
) -> xr.DataArray:
    """``da`` from its staggered ``dim`` to the T points: xgcm's mean of the two faces of each cell (a NaN face
    counts as no flow); the edge cell of a grid with one face fewer than it needs gets the face values
    extrapolated linearly from the two nearest (second order, as the mean is)."""
    flow = da.fillna(0.0)
    value = grid.interp(flow, axis, to="center")
    count = grid.interp(xr.ones_like(da).where(np.isfinite(da), 0.0), axis, to="center")
    value = value.where(count > 0)
    n = da.sizes[dim]
    if position in ("left", "right") and not (periodic and axis == "X") and n > 1:
        first, second, edge = (0, 1, 0) if position == "right" else (n - 1, n - 2, n - 1)
        outer = 1.5 * da.isel({dim: first}, drop=True) - 0.5 * da.isel({dim: second}, drop=True)
        outer = outer.fillna(da.isel({dim: first}, drop=True))
        at_edge = xr.DataArray(np.arange(value.sizes[centre]) == edge, dims=centre)
        value = xr.where(at_edge, outer, value).transpose(*value.dims)
    return xr.DataArray(value.data, dims=value.dims)


def _unwrap(lon: np.ndarray) -> np.ndarray:
    """Longitudes (degrees) without jumps of 360 along the last axis."""
    return np.unwrap(np.asarray(lon, float), period=360.0, axis=-1)


def is_periodic(lon: np.ndarray) -> bool:
    """Whether 1-D monotonic longitudes (degrees) go once round the globe: the gap from the last
    column back to the first (plus or minus 360) is a grid spacing (within half a spacing)."""
    lon = np.asarray(lon, float)
    if lon.size < 3:
        return False
    d = np.diff(lon)
    step = np.median(np.abs(d))
    seam = abs(lon[0] + np.sign(d.mean()) * 360.0 - lon[-1])
    return bool(step > 0 and abs(seam - step) <= 0.5 * step)


def _regular_axes(lat1: np.ndarray, lon1: np.ndarray, facts: dict, notes: list[str]) -> tuple[np.ndarray, bool, slice]:
    """Unwrapped longitudes, whether periodic, and the columns to keep (a duplicated halo dropped)."""
    raw = np.asarray(lon1, float)
    lon = _unwrap(raw)
    keep = slice(None)
    # columns a full turn or more from the first repeat earlier ones (a cyclic halo: one column, 0 and 360, or
    # two, -1 .. 361 on a 1-degree grid): dropped, so that no longitude is read twice and the grid wraps
    over = np.abs(lon - lon[0]) >= 360.0 - _LATLON_ATOL
    n_rep = int(over.sum())
    if lon.size > 2 and 0 < n_rep < lon.size // 2 and over[lon.size - n_rep :].all():
        keep = slice(0, lon.size - n_rep)
        notes.append(
            f"last {n_rep} longitude column(s) repeat the first (+360): dropped"
            if n_rep > 1
            else "last longitude column repeats the first (+360): dropped"
        )
        lon = lon[keep]
    if not np.allclose(lon, raw[keep]):
        jump = "Greenwich on 0..360" if raw.min() >= 0 else "the dateline on -180..180"
        facts["longitude"] = (
            f"{raw[0]:g}..{raw[-1]:g} crosses {jump}: unwrapped to {lon[0]:g}..{lon[-1]:g} (numpy.unwrap, period 360)"
        )
        notes.append(f"longitudes unwrapped to {lon[0]:g}..{lon[-1]:g} (they crossed {jump})")
    else:
        facts["longitude"] = f"{lon[0]:g}..{lon[-1]:g}, monotonic as given"
    for name, values in (("longitude", lon), ("latitude", np.asarray(lat1, float))):
        steps = np.diff(values)
        if values.size > 1 and not (np.all(steps > 0) or np.all(steps < 0)):
            raise DimensionError(
                f"The {name}s are not monotonic{' after unwrapping' if name == 'longitude' else ''} "
                f"({values[:4].round(3).tolist()} ...): differences between neighbours would span the globe. "
                f"Fix: sort them first, e.g. ds.sortby('{name[:3]}'), or give one region."
            )
    periodic = is_periodic(lon)
    facts["periodic in longitude"] = (
        f"yes: {lon.size} columns go round the globe, the seam is a neighbour (xgcm padding='periodic')"
        if periodic
        else "no: the first and last columns are edges"
    )
    lat = np.asarray(lat1, float)
    facts["latitude order"] = (
        "descending (north to south): kept, operators use signed spacings"
        if lat.size > 1 and lat[-1] < lat[0]
        else "ascending"
    )
    return lon, periodic, keep


def _bad_positions(la: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Points of a 2-D grid whose position is no grid position: NaN, or (0, 0) where a neighbour is (0, 0) too
    (two cells cannot share a position) or where every neighbour is more than 3 grid spacings away. NEMO writes
    0 at the positions of the land processors it eliminated (``jpni x jpnj`` domains with no ocean); a true
    grid point at (0, 0) has its neighbours a spacing away."""
    bad = ~(np.isfinite(la) & np.isfinite(lo))
    zero = (la == 0) & (lo == 0) & ~bad
    if not zero.any():
        return bad
    pla = np.pad(np.where(bad, np.nan, la), 1, constant_values=np.nan)
    plo = np.pad(np.where(bad, np.nan, lo), 1, constant_values=np.nan)
    pz = np.pad(zero, 1)
    ny, nx = la.shape
    shared = np.zeros_like(zero)
    near = np.full(la.shape, np.inf)
    spacing = []
    with np.errstate(invalid="ignore"):
        for dy, dx in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            sl = (slice(1 + dy, 1 + dy + ny), slice(1 + dx, 1 + dx + nx))
            shared |= pz[sl] & zero
            d = curvilinear._distance(la, lo, pla[sl], plo[sl])
            ok = np.isfinite(d) & ~pz[sl]
            near = np.where(ok, np.minimum(near, d), near)
            spacing.append(d[ok & ~zero & ~bad])
    step = np.median(np.concatenate(spacing)) if sum(a.size for a in spacing) else np.inf
    return bad | (zero & (shared | (near > 3 * step)))


def _mend_positions(ds: xr.Dataset, notes: list[str], facts: dict) -> xr.Dataset:
    """2-D ``lat`` / ``lon`` with their (0, 0) or NaN points (:func:`_bad_positions`) mended: from the mesh mask's
    ``gphit`` / ``glamt``, else from the rows and columns of a regular grid, else left NaN where the scale factors
    ``e1t`` / ``e2t`` are given (the positions then only set ``f`` on land); refused otherwise, since the distances
    next to them, and every derivative there, would be wrong."""
    dims = ds["lat"].dims
    la = ds["lat"].values.astype(float)
    lo = ds["lon"].transpose(*dims).values.astype(float)
    mesh = {k: ds[k].transpose(*dims).values.astype(float) for k in _MESH_POS if k in ds.variables}
    ds = ds.drop_vars([k for k in _MESH_POS if k in ds.variables])
    bad = _bad_positions(la, lo)
    if not bad.any():
        return ds
    n = int(bad.sum())
    good = ~bad
    la_g, lo_g = np.where(good, la, np.nan), np.where(good, lo, np.nan)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: checked below
        rows, cols = np.nanmedian(la_g, axis=1), np.nanmedian(lo_g, axis=0)
    regular = bool(
        np.all(np.isfinite(rows))
        and np.all(np.isfinite(cols))
        and np.allclose(la[good], np.broadcast_to(rows[:, None], la.shape)[good], atol=_LATLON_ATOL)
        and np.allclose((lo - cols[None, :] + 180.0)[good] % 360.0 - 180.0, 0.0, atol=_LATLON_ATOL)
    )
    if len(mesh) == 2 and not _bad_positions(mesh[_MESH_POS[0]], mesh[_MESH_POS[1]])[bad].any():
        la[bad], lo[bad] = mesh[_MESH_POS[0]][bad], mesh[_MESH_POS[1]][bad]
        how = "taken from the mesh mask's gphit, glamt"
    elif regular:
        la = np.broadcast_to(rows[:, None], la.shape).copy()
        lo = np.where(bad, np.broadcast_to(cols[None, :], lo.shape), lo)
        how = "taken from their row's latitude and column's longitude (the other points form a regular grid)"
    elif "e1t" in ds.variables and "e2t" in ds.variables:
        la[bad], lo[bad] = np.nan, np.nan
        how = "left unknown (NaN): the scale factors e1t, e2t are given, so no distance depends on them"
    else:
        raise DimensionError(
            f"{n} point(s) of the 2-D latitude / longitude are (0, 0) or NaN (NEMO writes 0 where it eliminated land "
            "processors), so the grid spacing next to them cannot be read and every derivative there would be wrong. "
            "Fix: give the grid's mesh mask (--mesh-mask mesh_mask.nc; open_store(..., mesh_mask=...)): its e1t, e2t "
            "and glamt, gphit are complete."
        )
    facts["positions"] = f"{n} point(s) at (0, 0) or NaN (NEMO's eliminated land processors): {how}"
    notes.append(f"{n} latitude / longitude point(s) at (0, 0) or NaN {how}")
    return ds.assign_coords(lat=(dims, la, ds["lat"].attrs), lon=(dims, lo, ds["lon"].attrs))


def regular_grid(ds: xr.Dataset, notes: list[str], facts: dict | None = None) -> xr.Dataset:
    """1-D ``lat`` / ``lon`` dims from 1-D coordinates or 2-D ``nav_lat`` / ``nav_lon`` of a regular grid, with
    longitudes unwrapped and periodicity detected; a curvilinear grid goes to :func:`curvilinear_grid`.

    ``ds`` has its latitude and longitude named ``lat`` and ``lon``; ``notes`` gets a line per change.
    """
    facts = {} if facts is None else facts
    if "lat" not in ds.variables or "lon" not in ds.variables:
        _find_axes(ds)  # raises the one-line error naming what was looked for
        raise MissingVariableError("No 'lat' / 'lon' in the dataset: pass names={'yours': 'lat', ...}.")
    lat, lon = ds["lat"], ds["lon"]
    if lat.ndim == 1 and lon.ndim == 1:
        ds = ds.drop_vars([k for k in _MESH_POS if k in ds.variables])  # 1-D positions have no (0, 0) to mend
        ds = ds.swap_dims({d: n for d, n in ((lat.dims[0], "lat"), (lon.dims[0], "lon")) if d != n})
        lat1, lon1 = ds["lat"].values, ds["lon"].values
    else:
        _t_dims(ds, "lat", "lon")
        ds = _mend_positions(ds, notes, facts)
        lat, lon = ds["lat"], ds["lon"]
        if "e1t" in ds.variables and "e2t" in ds.variables:
            return curvilinear_grid(ds, notes, facts)  # the model's own scale factors: its grid, however regular
        la, lo = lat.values.astype(float), _unwrap(lon.transpose(*lat.dims).values.astype(float))
        if np.allclose(la, la[:, :1], atol=_LATLON_ATOL) and np.allclose(lo, lo[:1, :], atol=_LATLON_ATOL):
            ydim, xdim = lat.dims
            lat1, lon1 = la[:, 0], lo[0, :]
        elif np.allclose(la, la[:1, :], atol=_LATLON_ATOL) and np.allclose(lo, lo[:, :1], atol=_LATLON_ATOL):
            xdim, ydim = lat.dims
            lat1, lon1 = la[0, :], lo[:, 0]
        else:
            return curvilinear_grid(ds, notes, facts)
        notes.append(f"2-D lat/lon on ({ydim}, {xdim}) -> 1-D lat, lon")
        ds = ds.drop_vars(["lat", "lon"]).rename({ydim: "lat", xdim: "lon"})
        ds = ds.assign_coords(lat=("lat", lat1), lon=("lon", lon1))
    lon_u, periodic, keep = _regular_axes(lat1, lon1, facts, notes)
    ds = ds.isel(lon=keep)
    facts.setdefault("type", "regular latitude-longitude (1-D lat, lon)")
    facts.setdefault("metrics", "spherical, from the coordinates: dx = R cos(lat) dlon, dy = R dlat (R = 6371 km)")
    lat_attrs = {**ds["lat"].attrs, "units": "degrees_north", "standard_name": "latitude", "axis": "Y"}
    lon_attrs = {
        **{k: v for k, v in ds["lon"].attrs.items() if k != "valid_range"},
        "units": "degrees_east",
        "standard_name": "longitude",
        "axis": "X",
        PERIODIC_ATTR: int(periodic),
    }
    return ds.assign_coords(lat=("lat", np.asarray(ds["lat"].values, float), lat_attrs), lon=("lon", lon_u, lon_attrs))


def _curvilinear_periodic(la: np.ndarray, lo: np.ndarray, e1t: np.ndarray) -> bool:
    """Whether a (y, x) grid's last column neighbours its first: their great-circle distance is one
    scale factor ``e1t`` (within half of it) on every row."""
    if la.shape[1] < 3:
        return False
    d = curvilinear._distance(la[:, -1], lo[:, -1], la[:, 0], lo[:, 0])
    e = 0.5 * (e1t[:, -1] + e1t[:, 0])
    return bool(np.all(np.abs(d - e) <= 0.5 * e))


def periodic_in_longitude(like: xr.DataArray | xr.Dataset) -> bool:
    """Whether the grid of ``like`` (as :func:`read_grid` leaves it) wraps in longitude, read from its coordinates'
    values, never from an attribute alone (attributes are lost by gsw, ``apply_ufunc`` and a coordinate merged from
    another array, and kept by an ``isel`` that cuts a box out of a global grid): on a regular grid the 1-D ``lon``
    (unwrapped) goes once round the globe (:func:`is_periodic`); on a curvilinear one the last column of
    ``nav_lat`` / ``nav_lon`` is one scale factor ``e1t`` from the first on every row."""
    coords = like.coords
    if "e1t" in coords and "e2t" in coords:
        if "nav_lat" not in coords or "nav_lon" not in coords or "lat" not in like.dims or "lon" not in like.dims:
            return False
        la, lo, e1 = (
            np.asarray(coords[k].transpose("lat", "lon").values, float) for k in ("nav_lat", "nav_lon", "e1t")
        )
        return _curvilinear_periodic(la, lo, e1)
    if "lon" not in coords or coords["lon"].ndim != 1:
        return False
    return is_periodic(_unwrap(coords["lon"].values))


def mark_periodic(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with its longitude coordinate (``lon``, or ``nav_lon`` on a curvilinear grid) saying whether the grid
    wraps (``attrs['periodic']``: 1 or 0, from :func:`periodic_in_longitude`), so that a store written from it says
    so; the attribute is a record, the operators read the coordinates' values."""
    name = "nav_lon" if "e1t" in ds.coords and "nav_lon" in ds.coords else "lon"
    if name not in ds.coords:
        return ds
    var = ds[name].variable.copy(deep=False)
    var.attrs = {**var.attrs, PERIODIC_ATTR: int(periodic_in_longitude(ds))}
    return ds.assign_coords({name: var})


#: the rows masked where a north fold is found but NEMO's boundary cannot be applied (the grid does not go once round
#: the globe): the last (a mirrored copy of the row two or one below it) and the one before it (its northern
#: neighbour lies across the fold)
FOLD_ROWS = 2


def fold_source(pivot: str, ny: int, nx: int) -> tuple[int, np.ndarray]:
    """The row and the column order NEMO's ``lbc_nfd`` copies into the last row of a tripolar grid of ``ny`` x ``nx``
    points (halo columns dropped, indices from 0): about a T-point pivot the row two below, ``(nx - i) mod nx``;
    about an F-point pivot the row just below, ``nx - 1 - i`` (lbcnfd.F90: ``ptab(ji,jpj) = ptab(jpiglo-ji+2,jpj-2)``
    and ``ptab(jpiglo-ji+1,jpj-1)``, 1-based with the two halo columns)."""
    i = np.arange(nx)
    if pivot == "T":
        return ny - 3, (nx - i) % nx
    if pivot == "F":
        return ny - 2, nx - 1 - i
    raise ValueError(f"pivot must be 'T' or 'F' (NEMO's north-fold pivots); got {pivot!r}.")


def north_fold(la: np.ndarray, lo: np.ndarray) -> str | None:
    """``"T"`` or ``"F"`` where the last row of a (y, x) grid (halo columns dropped) is NEMO's north fold of a
    tripolar ORCA grid, None otherwise. NEMO's ``lbc_nfd`` fills that row with the row folded onto it, its
    columns in reverse order (:func:`fold_source`): about a T-point pivot (ORCA2, ORCA025: ``jperio`` 3 / 4) the
    row two below, ``row[-1][i] = row[-3][(n - i) mod n]``; about an F-point pivot (ORCA1, ORCA12: ``jperio``
    5 / 6) the row just below, ``row[-1][i] = row[-2][n - 1 - i]``. Read from the positions: the last row's
    points are the mirrored row's."""
    ny, nx = la.shape
    if ny < 4 or nx < 4:
        return None
    for pivot in ("T", "F"):
        row, mirror = fold_source(pivot, ny, nx)
        same_lat = np.allclose(la[-1], la[row, mirror], atol=_LATLON_ATOL)
        if same_lat and np.allclose((lo[-1] - lo[row, mirror] + 180.0) % 360.0 - 180.0, 0.0, atol=_LATLON_ATOL):
            return pivot
    return None


def _north_fold(
    ds: xr.Dataset, la: np.ndarray, lo: np.ndarray, ydim: str, periodic: bool, notes: list[str], facts: dict
) -> xr.Dataset:
    """A tripolar grid's north fold (:func:`north_fold`), read as NEMO defines it where the grid goes once round the
    globe: the last row is NEMO's halo, a copy of the row folded onto it, so it is masked as a duplicate (fields
    NaN, mask 0) and every operator refills it from that row before differencing (:mod:`ocean.horizontal`, NEMO's
    ``lbc_lnk``: a scalar as it is, a vector's grid components with their sign reversed), so the row before it has
    its northern neighbour. Where the grid does not wrap, the fold's mirrored columns are not the grid's: the last
    :data:`FOLD_ROWS` rows are masked instead, so that no difference is taken across the fold. Positions and scale
    factors are kept either way."""
    pivot = north_fold(la, lo)
    if pivot is None:
        return ds
    ny = la.shape[0]
    rows = 1 if periodic else FOLD_ROWS
    keep = xr.DataArray(np.arange(ny) < ny - rows, dims=ydim)
    metrics = {"e1t", "e2t", "e3t", *FACE_FACTORS}
    masked = [str(v) for v, da in ds.data_vars.items() if ydim in da.dims and v not in metrics]
    ds = ds.assign({v: ds[v].where(keep) if v != "mask" else ds[v].where(keep, 0) for v in masked})
    mirrored = "two below" if pivot == "T" else "just below"
    found = f"(tripolar ORCA: the last row repeats the row {mirrored}, mirrored, as NEMO's lbc_nfd fills it)"
    if periodic:
        facts["north fold"] = (
            f"{pivot}-point pivot: NEMO's north-fold boundary applied {found}; a difference across the fold takes "
            "that row, a vector's grid components (currents, wind stress, gradients) with their sign reversed and a "
            f"scalar's as they are (lbc_lnk); the last row (j = {ny - 1}), NEMO's copy, masked as a duplicate"
        )
        notes.append(f"north fold ({pivot}-point pivot): NEMO's north-fold boundary applied")
    else:
        facts["north fold"] = (
            f"{pivot}-point pivot: last {FOLD_ROWS} rows masked (j = {ny - FOLD_ROWS}..{ny - 1}: fields NaN, mask 0) "
            f"{found}; the columns do not go once round the globe, so NEMO's north-fold boundary cannot be applied "
            "and no difference is taken across the fold"
        )
        notes.append(f"north fold ({pivot}-point pivot): last {FOLD_ROWS} rows masked")
    return ds


def curvilinear_grid(ds: xr.Dataset, notes: list[str], facts: dict | None = None) -> xr.Dataset:
    """A curvilinear grid kept as it is: its ``(y, x)`` dims become the study's ``(lat, lon)`` dims (grid
    indices), 2-D ``nav_lat`` / ``nav_lon`` and the scale factors ``e1t`` / ``e2t`` (m; NEMO's mesh mask,
    or great-circle distances between the T points when absent) become coordinates, and vectors are
    taken along the grid's axes (NEMO's convention). A grid whose last column neighbours its first is
    periodic (``nav_lon.attrs['periodic'] = 1``); NEMO's ORCA halo (columns 0 and -1 repeating -2 and 1)
    is dropped first. A tripolar grid's north fold is read as NEMO defines it, or its last rows masked where the
    grid does not wrap (:func:`_north_fold`)."""
    facts = {} if facts is None else facts
    ydim, xdim = ds["lat"].dims
    la, lo = ds["lat"].transpose(ydim, xdim).values.astype(float), ds["lon"].transpose(ydim, xdim).values.astype(float)
    nx = la.shape[1]
    if (
        nx > 4
        and np.allclose(la[:, 0], la[:, -2])
        and np.allclose((lo[:, 0] - lo[:, -2] + 180) % 360 - 180, 0)
        and np.allclose(la[:, -1], la[:, 1])
        and np.allclose((lo[:, -1] - lo[:, 1] + 180) % 360 - 180, 0)
    ):
        ds = ds.isel({xdim: slice(1, nx - 1)})
        la, lo = la[:, 1:-1], lo[:, 1:-1]
        notes.append("ORCA halo columns (0 and -1 repeat -2 and 1) dropped")
    ai, aj = axis_angles(la, lo)
    if np.nanmedian(np.sin(aj - ai)) < 0:  # j turns clockwise from i: rows north to south, a left-handed grid
        ds = ds.isel({ydim: slice(None, None, -1)})
        ds = ds.drop_vars([k for k in FACE_FACTORS if k in ds.variables])  # U / V faces would sit on the wrong side
        la, lo = la[::-1], lo[::-1]
        facts["j axis"] = (
            "the rows ran north to south (j clockwise from i): reversed, so that i, j are right-handed "
            "as the operators' cross products (Ekman, geostrophic) need; vectors kept as given"
        )
        notes.append("rows reversed (they ran north to south on a curvilinear grid)")
    factors = {}
    for k in ("e1t", "e2t") + FACE_FACTORS:
        if k in ds.variables:
            e = ds[k]
            e = e.isel({d: 0 for d in e.dims if d not in (ydim, xdim)}, drop=True).transpose(ydim, xdim)
            if e.attrs.get("units", "m") not in _METRES:
                raise UnitsError(f"Scale factor {k!r} has units {e.attrs['units']!r}; expected metres ('m').")
            factors[k] = e.values.astype(float)
    faces = {k: factors.pop(k) for k in FACE_FACTORS if k in factors}
    faces = faces if len(faces) == len(FACE_FACTORS) else {}
    if len(factors) < 2:
        factors = dict(zip(("e1t", "e2t"), curvilinear.scale_factors(la, lo)))
        notes.append("e1t, e2t = great-circle distances between T points (no scale factors in the product)")
        facts.setdefault("metrics", "e1t, e2t: great-circle distances between the T points (no scale factors given)")
    else:
        facts.setdefault("metrics", "e1t, e2t as given (m); at U / V faces the mean of the two T points'")
    if faces:
        facts["metrics"] = facts["metrics"].split("; at U / V faces")[0] + "; e1u, e2u, e1v, e2v at the faces"
    periodic = _curvilinear_periodic(la, lo, factors["e1t"])
    ds = _north_fold(ds, la, lo, ydim, periodic, notes, facts)
    facts["type"] = "curvilinear (y, x) -> (lat, lon) grid indices, vectors along the grid's i, j axes"
    facts["periodic in longitude"] = (
        "yes: the last column neighbours the first (xgcm padding='periodic')"
        if periodic
        else "no: the first and last columns are edges"
    )
    out = ds.drop_vars([v for v in ("lat", "lon", "e1t", "e2t") + FACE_FACTORS if v in ds.variables]).rename(
        {ydim: "lat", xdim: "lon"}
    )
    dims = ("lat", "lon")
    out = out.assign_coords(
        nav_lat=(dims, la, {"units": "degrees_north", "standard_name": "latitude"}),
        nav_lon=(dims, lo, {"units": "degrees_east", "standard_name": "longitude", PERIODIC_ATTR: int(periodic)}),
        e1t=(dims, factors["e1t"], {"units": "m", "long_name": "scale factor along i (T point)"}),
        e2t=(dims, factors["e2t"], {"units": "m", "long_name": "scale factor along j (T point)"}),
    )
    out = out.assign_coords(
        {
            k: (
                dims,
                v,
                {
                    "units": "m",
                    "long_name": f"scale factor {k} at the {k[-1].upper()} point "
                    "(U: the cell's east face, V: its north face)",
                },
            )
            for k, v in faces.items()
        }
    )
    notes.append(
        f"curvilinear grid: ({ydim}, {xdim}) -> (lat, lon) grid indices with 2-D nav_lat, nav_lon, e1t, "
        "e2t; vectors (tauu, tauv, uo, vo) along the grid's i, j axes"
    )
    return out


def axis_angles(la: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Angles (radians, counter-clockwise from east) of a 2-D grid's i axis (along the last dim) and j axis
    (along the first) at each point, from its positions in degrees: ``atan2(dlat, cos(lat) dlon)`` of centred
    differences (one-sided at the edges; longitudes unwrapped along each axis); 0 along an axis of one point."""
    la, lo = np.asarray(la, float), np.asarray(lo, float)
    coslat = np.cos(np.deg2rad(la))
    out = []
    for axis in (1, 0):
        if la.shape[axis] < 2:
            out.append(np.full(la.shape, np.pi / 2 * (axis == 0)))
            continue
        dlat = np.gradient(la, axis=axis)
        dlon = np.gradient(np.unwrap(lo, period=360.0, axis=axis), axis=axis)
        out.append(np.arctan2(dlat, coslat * dlon))
    return out[0], out[1]


#: east / north vector pairs by CF standard name -> the names of the same vectors along a grid's x / y axes
_EAST_NORTH = {
    ("surface_downward_eastward_stress", "surface_downward_northward_stress"): (
        "surface_downward_x_stress",
        "surface_downward_y_stress",
    ),
    ("surface_upward_eastward_stress", "surface_upward_northward_stress"): (
        "surface_upward_x_stress",
        "surface_upward_y_stress",
    ),
    ("eastward_sea_water_velocity", "northward_sea_water_velocity"): ("sea_water_x_velocity", "sea_water_y_velocity"),
}


def _vectors_to_grid(ds: xr.Dataset, facts: dict) -> xr.Dataset:
    """On a curvilinear grid, vectors given east / north (their CF standard names) turned to the grid's i / j axes,
    the components its operators take (:func:`axis_angles`); a pair without its partner is refused."""
    ai, aj = axis_angles(ds["nav_lat"].values, ds["nav_lon"].values)
    cos_i, sin_i, cos_j, sin_j = (xr.DataArray(f(a), dims=("lat", "lon")) for a in (ai, aj) for f in (np.cos, np.sin))
    said = []
    for (east_std, north_std), (x_std, y_std) in _EAST_NORTH.items():
        east = [str(v) for v in ds.data_vars if ds[v].attrs.get("standard_name") == east_std]
        north = [str(v) for v in ds.data_vars if ds[v].attrs.get("standard_name") == north_std]
        if not east and not north:
            continue
        if len(east) != 1 or len(north) != 1:
            raise DimensionError(
                f"On this curvilinear grid the east / north vectors must be turned to the grid's axes, which needs one "
                f"{east_std!r} and one {north_std!r}; got {east or 'none'} and {north or 'none'}. Fix: give both "
                "components of the vector (and drop any duplicate), or give them along the grid (x / y names)."
            )
        u, v = ds[east[0]], ds[north[0]]
        turned = "turned from east / north to the grid's i / j axes (angles from nav_lat / nav_lon)"
        ds = ds.assign(
            {
                east[0]: (u * cos_i + v * sin_i).assign_attrs(
                    {**u.attrs, "standard_name": x_std, "grid_rotation": turned}
                ),
                north[0]: (u * cos_j + v * sin_j).assign_attrs(
                    {**v.attrs, "standard_name": y_std, "grid_rotation": turned}
                ),
            }
        )
        said.append(f"{east[0]}, {north[0]}")
    if said:
        deg = np.rad2deg(ai[np.isfinite(ai)])
        facts["vectors"] = (
            f"{'; '.join(said)} given east / north: turned to the grid's i / j axes (the i axis "
            f"{deg.min():.1f}..{deg.max():.1f} degrees from east, from nav_lat / nav_lon)"
        )
    return ds


def _mask(ds: xr.Dataset, facts: dict) -> xr.Dataset:
    """``mask`` (lat, lon), 1 = ocean, int8, from the mesh mask or the product's own mask variable."""
    if "mask" not in ds:
        for name in ("tmaskutil", "tmask", "mask", "sftof"):
            if name in ds.data_vars and {"lat", "lon"} <= set(ds[name].dims):
                m = ds[name]
                extra = [d for d in m.dims if d not in ("lat", "lon")]
                how = name
                if extra:
                    how = f"{name} at its first {', '.join(map(str, extra))} (the surface level)"
                    m = m.isel({d: 0 for d in extra}, drop=True)
                if name == "sftof":  # CMIP6 sea area percentage
                    m = m >= 50
                ds = ds.drop_vars(name).assign(mask=m.reset_coords(drop=True))
                facts["mask from"] = f"the product's {how}"
                break
    if "mask" not in ds:
        facts.setdefault("mask from", "none in the product or a mesh mask: taken from where the data are finite")
        return ds
    m = ds["mask"].transpose("lat", "lon")
    m = (m.fillna(0) > 0).astype(np.int8)
    ocean = int(m.sum())
    facts["ocean cells"] = str(ocean)
    facts["land cells"] = str(int(m.size - ocean))
    return ds.assign(
        mask=m.assign_attrs(
            long_name="ocean mask", flag_values=np.array([0, 1], np.int8), flag_meanings="land ocean", units="1"
        )
    )


def _wraps(ds: xr.Dataset, lat: str, lon: str, ydim: str, xdim: str) -> bool:
    """Whether the product's grid, as given, wraps in longitude: the rule of :func:`periodic_in_longitude`, on 1-D
    longitudes or on 2-D positions (with the scale factors ``e1t`` when given, else great-circle distances), so
    that staggered fields are brought to the T points across the seam as every concept differences across it."""
    if ds[lon].ndim == 1:
        return is_periodic(_unwrap(ds[lon].values))
    la = np.asarray(ds[lat].transpose(ydim, xdim).values, float)
    lo = np.asarray(ds[lon].transpose(ydim, xdim).values, float)
    if "e1t" in ds.variables and set(ds["e1t"].dims) == {ydim, xdim}:
        e1 = np.asarray(ds["e1t"].transpose(ydim, xdim).values, float)
    else:
        e1 = curvilinear.scale_factors(la, lo)[0]
    return _curvilinear_periodic(la, lo, e1)


def read_grid(ds: xr.Dataset, reading: Reading | None = None, *, mesh_mask: xr.Dataset | None = None) -> xr.Dataset:
    """A product's dataset on the study's horizontal grid (see the module docstring), said back in ``reading``.

    Parameters
    ----------
    ds : xr.Dataset
        The product as opened (lazy is fine), its variables under their own names; the time axis
        already read.
    reading : scimech.studies.reading.Reading, optional
        Filled with the ``grid`` facts (type, longitude range and unwrapping, periodic, latitude
        order, staggered variables and where they were brought, metrics and where from), the
        ``mask`` facts (from where, ocean and land cells) and a row per interpolated variable.
    mesh_mask : xr.Dataset, optional
        NEMO's ``mesh_mask.nc`` / ``domain_cfg.nc`` for this grid: ``e1t``, ``e2t`` (m), ``e3t_0``,
        ``tmask`` (3-D; its surface level is the ocean mask) or ``tmaskutil``.

    Returns
    -------
    xr.Dataset
        Horizontal dims ``(lat, lon)``: 1-D ``lat`` (degrees north) and unwrapped ``lon`` (degrees east,
        ``attrs['periodic']`` 1 or 0) on a regular grid; grid indices with 2-D ``nav_lat``, ``nav_lon``,
        ``e1t``, ``e2t`` coordinates on a curvilinear one. Every field at T points; ``mask`` (lat, lon)
        when the product or the mesh mask has one; ``e3t`` (m) from the mesh mask.

    Raises
    ------
    MissingVariableError
        No latitude / longitude.
    DimensionError
        Latitude and longitude on different dims; a mesh mask of another grid; a staggered dim whose
        length is not the T points' (or one more).
    UnitsError
        Scale factors not in metres.
    """
    facts: dict[str, str] = {}
    notes: list[str] = []
    if mesh_mask is not None and _first(ds, _LAT_NAMES, "latitude", set()) is None and {"y", "x"} <= set(ds.dims):
        ds = _merge_mesh_mask(ds, mesh_mask, "y", "x", facts)  # the positions from the mesh mask's glamt / gphit
        mesh_mask = None
    lat, lon = _find_axes(ds)
    ydim, xdim = _t_dims(ds, lat, lon)
    if mesh_mask is not None:
        ds = _merge_mesh_mask(ds, mesh_mask, ydim, xdim, facts)
    facts["latitude, longitude"] = f"{lat}, {lon}"
    ds, same_dims = _faces_on_t_dims(ds, ydim, xdim, facts)
    stag = _staggered_dims(ds, ydim, xdim, same_dims)
    if stag:
        ds = _to_t_points(ds, stag, _wraps(ds, lat, lon, ydim, xdim), reading, facts)
    else:
        facts["staggered"] = "none: every field at the T points"
    ds = ds.rename({v: k for k, v in (("lat", lat), ("lon", lon)) if v != k})
    ds = regular_grid(ds, notes, facts)
    if "e1t" in ds.coords and "nav_lat" in ds.coords:
        ds = _vectors_to_grid(ds, facts)
    ds = _mask(ds, facts)
    if "e3t" in ds:
        facts["vertical metrics"] = "e3t (m) from the mesh mask"
    if reading is not None:
        for k in (
            "type",
            "latitude, longitude",
            "positions",
            "j axis",
            "north fold",
            "variable positions",
            "longitude",
            "periodic in longitude",
            "latitude order",
            "vectors",
            "staggered",
            "metrics",
            "mesh mask",
            "vertical metrics",
        ):
            if k in facts:
                reading.fact("grid", k, facts[k])
        for k in ("mask from", "ocean cells", "land cells"):
            if k in facts:
                reading.fact("mask", k.replace("mask from", "from"), facts[k])
    ds.attrs["grid"] = "; ".join(notes) if notes else "as given"
    return ds
