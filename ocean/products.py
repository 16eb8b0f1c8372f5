"""Your own data: ORAS5 / NEMO / CMEMS files mapped onto the study's layout.

:func:`from_nemo` renames product variables (:data:`ocean.variables.PRODUCT_NAMES`), converts
units and derives the inputs a product lacks (``sst``, ``mld``, ``t_sub`` from 3-D fields);
:func:`open_store` opens a zarr store or netCDF file, maps it and validates it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import xarray as xr

from scimech.errors import DataValidationError, UnitsError

from . import budget, concepts
from .constants import KAPPA
from .horizontal import regular_grid
from .validation import validate
from .variables import DIMS, TEMPERATURES, VAR_ATTRS, rename_to_study, units_ok

__all__ = ["from_nemo", "open_store"]

_KELVIN = {"K", "kelvin", "Kelvin", "degK", "deg_K", "degree_Kelvin", "degrees_K", "degrees_Kelvin"}
#: variables whose standard_name the study's table would guess wrongly for a product that gives none
_KIND_UNKNOWN = ("t_sub",)


def _origin(name: str, renamed: Mapping[str, str]) -> str:
    """``'thetao' (votemper)``: the study name and the product's own, for messages."""
    old = [k for k, v in renamed.items() if v == name]
    return f"{name!r}" + (f" ({old[0]})" if old else "")


def _positive_down(da: xr.DataArray, what: str, notes: list[str]) -> xr.DataArray:
    """Flip a depth-like variable given positive up (``positive: up`` or no positive value)."""
    vals = np.asarray(da.values, float)
    up = da.attrs.get("positive") == "up" or (np.isfinite(vals).any() and np.nanmax(vals) <= 0 and np.nanmin(vals) < 0)
    if not up:
        return da
    notes.append(f"{what} positive up -> positive down")
    return (-da).assign_attrs({**da.attrs, "positive": "down"})


def _celsius(da: xr.DataArray, name: str, renamed: Mapping[str, str], notes: list[str]) -> xr.DataArray:
    units = da.attrs.get("units")
    if units in _KELVIN:
        notes.append(f"{name} K -> degree_Celsius")
        return (da.where(da > 0) - 273.15).assign_attrs({**da.attrs, "units": "degree_Celsius"})  # 0 K: land fill
    if not units_ok(units, "degree_Celsius"):
        raise UnitsError(f"Temperature {_origin(name, renamed)} has units {units!r}; expected kelvin ('K') or "
                         "degrees Celsius ('degC', 'degree_Celsius'). Fix: convert it and set its units attribute.")
    return da


def _temperature_kind(thetao: xr.DataArray) -> tuple[str, str]:
    """(standard_name, words) of the 3-D temperature: conservative when the product says so, else
    potential (what ``thetao`` / ``votemper`` hold in CMEMS and NEMO output)."""
    if thetao.attrs.get("standard_name") == "sea_water_conservative_temperature":
        return "sea_water_conservative_temperature", "conservative temperature"
    return "sea_water_potential_temperature", "potential temperature"


def _derive_from_3d(ds: xr.Dataset, renamed: Mapping[str, str], notes: list[str]) -> None:
    """``sst``, ``mld`` and ``t_sub`` from 3-D ``thetao`` (and ``so``) when the product lacks them,
    each labelled with what it holds and how it was computed (in place)."""
    src = _origin("thetao", renamed)
    std, words = _temperature_kind(ds["thetao"])
    depth = ds["depth"].values.astype(float)
    if "sst" not in ds:
        sst = ds["thetao"].isel(depth=0, drop=True)
        sst.attrs = {"units": "degree_Celsius", "standard_name": std,
                     "long_name": f"{words} at the shallowest level ({depth[0]:g} m)",
                     "comment": f"ocean.products.from_nemo: {src} at depth {depth[0]:g} m"}
        ds["sst"] = sst
        notes.append(f"sst = thetao at {depth[0]:g} m")
    if "mld" not in ds and "so" in ds:
        mld = budget.mixed_layer_depth(budget.teos10(ds["thetao"], ds["so"])["sigma0"])
        mld.attrs["comment"] += f"; computed by ocean.products.from_nemo from {src} and {_origin('so', renamed)}"
        ds["mld"] = mld
        notes.append("mld = sigma0 threshold depth (0.03 kg m-3 from 10 m, TEOS-10) of thetao, so")
    if "t_sub" not in ds and "mld" in ds:
        t_sub = budget.first_level_below(ds["thetao"], ds["mld"])
        t_sub.attrs = {"units": "degree_Celsius", "standard_name": std,
                       "long_name": f"{words} just below the mixed layer",
                       "comment": f"ocean.products.from_nemo: {src} at the first level deeper than mld (the "
                                  "deepest valid level where the column is mixed to its bottom); not converted"}
        ds["t_sub"] = t_sub
        notes.append(f"t_sub = thetao at the first level below mld ({words})")
    if not {"uo", "vo", "mld"} <= set(ds.variables):
        return
    cur = {c: _on_t_levels(ds[f"{c}o"], ds["depth"]) for c in ("u", "v")}
    if all(v is not None for v in cur.values()):
        for c, da in cur.items():
            m = budget.mixed_layer_mean(da.rename(f"{c}o"), ds["mld"])
            m.attrs.update(long_name=f"mixed-layer mean of {_origin(c + 'o', renamed)}", units="m s-1")
            ds[f"{c}_ml"] = m
        notes.append("u_ml, v_ml = mixed-layer means of uo, vo (taken at the T points)")


def _on_t_levels(da: xr.DataArray, depth: xr.DataArray) -> xr.DataArray | None:
    """A current on the T levels: NEMO's U / V files use ``depthu`` / ``depthv``, the same levels as
    ``deptht``; None when its levels are not the temperature's."""
    if "depth" in da.dims:
        return da
    for d in ("depthu", "depthv"):
        if d in da.dims and da.sizes[d] == depth.size and np.allclose(np.abs(da[d].values), depth.values):
            return da.rename({d: "depth"}).assign_coords(depth=depth)
    return None


def from_nemo(ds: xr.Dataset, names: Mapping[str, str] | None = None, *, kappa: float = KAPPA,
              scheme: str = "centred", advection: str = "centred") -> xr.Dataset:
    """Map an ORAS5 / NEMO / CMEMS dataset onto the study's layout.

    Renames product variables (:data:`ocean.variables.PRODUCT_NAMES`: ``votemper`` / ``thetao``
    3-D temperature, ``vosaline`` / ``so`` salinity, ``somxl010`` / ``mlotst`` mixed-layer
    depth, ``sohefldo`` / ``hfds`` net surface heat flux, ``sossheig`` / ``zos``,
    ``sozotaux`` / ``tauuo``, ``sometauy`` / ``tauvo``, ``nav_lat`` / ``nav_lon``,
    ``time_counter``, ``deptht``) and then:

    - 2-D ``nav_lat`` / ``nav_lon`` of a regular grid become 1-D ``lat`` / ``lon`` dims; a
      curvilinear grid (or any grid given with NEMO's scale factors ``e1t`` / ``e2t``) is kept:
      its ``(y, x)`` dims become ``(lat, lon)`` with 2-D ``nav_lat``, ``nav_lon``, ``e1t``, ``e2t``
      coordinates (scale factors from the T-point positions when absent), vectors along the grid;
    - temperatures in kelvin become degree_Celsius (0 K, a land fill, becomes NaN); depth and
      MLD given positive up become positive down;
    - missing inputs are derived from 3-D fields: ``sst`` = ``thetao`` at the shallowest level,
      ``mld`` = the sigma0 threshold depth from ``thetao`` and ``so`` (TEOS-10,
      :func:`ocean.budget.mixed_layer_depth`), ``t_sub`` = ``thetao`` at the first level
      below the MLD (potential temperature);
    - a ``member`` dim of length 1 is added when absent, and ``mask`` (1 = ocean) is taken
      from ``tmaskutil`` or else from where ``sst`` is finite at the first time step;
    - only the study's 2-D fields ``(member, time, lat, lon)`` and ``mask`` are kept.

    - the budget terms and the target a product lacks are computed from its fields by
      :func:`ocean.concepts.complete` (``q_surf`` from ``qnet``, ``q_ekman`` from the wind stress,
      ``q_geo`` from ``zos``, ``q_entr`` from ``mld``, ``t_sub`` and the mixed-layer currents
      ``u_ml`` / ``v_ml`` (means of ``uo`` / ``vo`` over the mixed layer), ``q_diff`` with
      diffusivity ``kappa``, ``mlhc = rho0 cp0 mld sst`` and ``dmlhc_dt``; ``scheme``: time
      differences, ``"centred"`` for period means or ``"forward"`` for snapshots; ``advection``:
      ``"centred"`` or ``"upwind"``, the synthetic ocean's). Terms given under the study's names
      are kept as given.

    Parameters
    ----------
    ds
        The product's dataset (lazy is fine).
    names
        More ``{your name: study name}`` renames, applied before the product table.

    Returns
    -------
    xr.Dataset
        Not validated (see :func:`open_store`); ``attrs["mapping"]`` lists what was changed
        ("" when ``ds`` was already in the study's layout).

    Raises
    ------
    DataValidationError
        ``ds`` has no data variables or a dimension of length 0.
    MissingVariableError, DimensionError, UnitsError
        No latitude / longitude; a temperature in other units than K or degC; a field with no
        ``units`` attribute (its scale is never assumed).
    """
    empty = [str(d) for d, n in ds.sizes.items() if n == 0]
    if not ds.data_vars or empty:
        raise DataValidationError(
            f"The dataset is empty ({'no data variables' if not ds.data_vars else f'dims {empty} have length 0'}): "
            "nothing to map. Check the file (an interrupted download or an empty time selection?).")
    ds, renamed = rename_to_study(ds, names)
    notes = [f"{a} -> {b}" for a, b in renamed.items()]
    ds = regular_grid(ds, notes)
    if "depth" in ds.variables:
        dunits = ds["depth"].attrs.get("units")
        if dunits is not None and not units_ok(dunits, "m"):
            raise UnitsError(f"Depth {_origin('depth', renamed)} has units {dunits!r}; expected metres ('m').")
        ds = ds.assign_coords(depth=_positive_down(ds["depth"], "depth", notes)).sortby("depth")
    for v in TEMPERATURES:
        if v in ds:
            ds[v] = _celsius(ds[v], v, renamed, notes)
    if "mld" in ds:
        ds["mld"] = _positive_down(ds["mld"], "mld", notes)
    if "thetao" in ds and "depth" in ds["thetao"].dims:
        _derive_from_3d(ds, renamed, notes)
    if "member" not in ds.dims:
        ds = ds.expand_dims(member=[0]) if "time" in ds.dims else ds
        notes.append("member dim of length 1 added")
    keep = {}
    unitless = []
    for v in ds.data_vars:
        if set(ds[v].dims) == set(DIMS):
            keep[v] = ds[v].transpose(*DIMS)
            for k, val in VAR_ATTRS.get(str(v), {}).items():
                if k == "standard_name" and v in _KIND_UNKNOWN:
                    continue  # a product's t_sub without a standard_name: potential or conservative is unknown
                if k == "units" and "units" not in keep[v].attrs:
                    unitless.append(f"{_origin(str(v), renamed)} (expected {val!r})")  # never assumed: cm read as m
                    continue
                keep[v].attrs.setdefault(k, val)
    if unitless:
        one = len(unitless) == 1
        raise UnitsError(f"{', '.join(unitless)} {'has' if one else 'have'} no units attribute, so "
                         f"{'its' if one else 'their'} scale cannot be checked (a mixed-layer depth in cm would be read as 100x too deep). "
                         "Fix: set each one's units, e.g. ds['mld'].attrs['units'] = 'm', converting the values "
                         "first if needed.")
    dropped = sorted(str(v) for v in ds.data_vars if v not in keep and v != "mask")
    if dropped:
        notes.append(f"dropped {dropped} (not (member, time, lat, lon) fields)")
    out = xr.Dataset(keep, attrs=dict(ds.attrs))
    if "mask" in ds:
        m = ds["mask"]
        m = m.isel({d: 0 for d in m.dims if d not in ("lat", "lon")}, drop=True)
        out["mask"] = (m.fillna(0) > 0).astype(np.int8).transpose("lat", "lon")
    elif "sst" in out:
        out["mask"] = np.isfinite(out["sst"].isel(member=0, time=0, drop=True)).astype(np.int8)
        notes.append("mask = where sst is finite at the first time step")
    if "mask" in out:
        out["mask"].attrs = {"long_name": "ocean mask", "flag_values": np.array([0, 1], np.int8),
                             "flag_meanings": "land ocean", "units": "1"}
    if "mask" in out:
        out, made = concepts.complete(out, kappa=kappa, scheme=scheme, advection=advection)
        if made:
            notes.append(f"computed {made} (ocean.concepts; kappa {kappa:g} m2 s-1, {scheme} time "
                         f"differences, {advection} advection)")
    out.attrs["mapping"] = "; ".join(notes)
    return out


def open_store(path: str | os.PathLike, names: Mapping[str, str] | None = None, *, validate_schema: bool = True,
               kappa: float = KAPPA, scheme: str = "centred", advection: str = "centred", **kwargs) -> xr.Dataset:
    """Open a zarr store or netCDF file in the study's layout or with ORAS5 / NEMO / CMEMS names.

    The dataset is opened lazily, mapped by :func:`from_nemo` (``names``: more renames; ``kappa``,
    ``scheme``, ``advection``: how missing budget terms are computed) and
    checked by :func:`validate` (``kwargs``: its ``inputs``, ``concepts``, ``target``,
    ``check_nans``; NaNs are not checked by default, that reads every value).

    Raises
    ------
    DataValidationError
        No file, a file that is not zarr or netCDF, or an empty one.
    MissingVariableError, UnitsError, DimensionError
        From :func:`from_nemo` and :func:`validate`, naming the variable and the fix.
    """
    path = Path(path)
    if not path.exists():
        raise DataValidationError(f"No ocean data at {str(path)!r}: give a zarr store or a netCDF file "
                                  "(or create one with `scimech ocean synth --out ...`).")
    try:
        if path.is_dir():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # no consolidated metadata: read the groups
                ds = xr.open_zarr(path, chunks={})
        else:
            ds = xr.open_dataset(path, chunks={})
    except Exception as err:
        raise DataValidationError(
            f"Cannot open {str(path)!r} ({type(err).__name__}: {str(err)[:200]}): it is not a zarr store or a "
            "netCDF file, or it is truncated. Check the download or rewrite it.") from err
    ds = from_nemo(ds, names, kappa=kappa, scheme=scheme, advection=advection)
    kwargs.setdefault("check_nans", False)
    return validate(ds, **kwargs) if validate_schema else ds

