"""Your own data: CMIP6, ORAS5 / NEMO, Copernicus Marine, MOM6 and CESM files mapped onto the study's layout.

:func:`from_nemo` finds each quantity by its CF ``standard_name`` (cf_xarray; the product names of
:data:`ocean.variables.PRODUCT_NAMES` as fall-backs), picks or refuses extra dims (an ensemble dim
becomes the study's ``member``), converts units with pint-xarray and cf-xarray's unit registry
(a missing unit is refused unless CF defines the quantity as dimensionless), turns upward fluxes and
depths given positive up into the study's conventions, tells practical from Absolute Salinity and
mass fractions, and derives the inputs a product lacks (``sst``, ``mld``, ``t_sub`` from 3-D
fields); every choice is said back in a :class:`scimech.studies.reading.Reading` (:mod:`ocean.data.reading`).
:func:`open_store` opens a zarr store or netCDF file, reads its time axis (:mod:`ocean.data.timeaxis`)
and grid (:mod:`ocean.data.gridaxes`) first, maps it and validates it.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path

import dask
import numpy as np
import xarray as xr

from scimech.errors import ConfigError, DataValidationError, DimensionError, UnitsError
from scimech.studies.reading import Reading, ReadRow
from scimech.studies.units import parse_units, registry

from .. import budget, concepts
from ..constants import KAPPA
from ..variables import (
    DIMS,
    DOWNWARD,
    ENSEMBLE_DIMS,
    EXPECTED_UNITS,
    FIELD_UNITS,
    INPUTS,
    PRESCRIBED,
    PRODUCT_NAMES,
    STANDARD_NAMES,
    UNIT_ALIASES,
    UPWARD,
    VAR_ATTRS,
    rename_to_study,
)
from .files import Source, is_many, open_files, product_files, source_text
from .reading import describe_product, say_back
from .validation import validate

__all__ = ["from_nemo", "open_store", "open_source", "open_product", "inspect", "find_variables", "read_axes"]

#: spellings pint (cf-xarray's registry) does not read, as it reads them; salinity scales are handled apart
_PINT_SPELLING = {
    "degrees_C": "degC",
    "degree_C": "degC",
    "deg C": "degC",
    "°C": "degC",
    "degrees_K": "K",
    "degree_Kelvin": "K",
    "degrees_Kelvin": "K",
    "Kelvin": "K",
    "meters": "m",
    "metres": "m",
}
#: salinity units: practical salinity (PSS-78, CF canonical "1" / "1e-3"), absolute (g/kg), mass fraction (kg/kg)
_PRACTICAL = {
    "psu",
    "pss",
    "pss-78",
    "pss78",
    "1e-3",
    "0.001",
    "10-3",
    "1.e-3",
    "practical_salinity_unit",
    "practical salinity unit",
    "1",
}
_ABSOLUTE = {"g/kg", "g kg-1", "g kg**-1", "gram/kilogram", "g.kg-1", "g kg^-1", "gram kilogram-1"}
_FRACTION = {"kg/kg", "kg kg-1", "kg kg**-1", "kg.kg-1", "kilogram/kilogram"}
#: the fields whose dims must be the study's (an extra dim is chosen by ``select`` or refused, never dropped)
_QUANTITIES_WITH_DIMS_CHECKED = ("sst", "zos", "tauu", "tauv", "qnet", "mld", "t_sub", "thetao", "so")
#: variables whose standard_name the study's table would guess wrongly for a product that gives none
_KIND_UNKNOWN = ("t_sub",)


def find_variables(
    ds: xr.Dataset, names: Mapping[str, str] | None = None, reading: Reading | None = None
) -> dict[str, str]:
    """``{product variable: study name}`` for each quantity the study reads, and how each was found.

    In order: ``names`` (yours, ``found by: option``); the study's own name; the CF ``standard_name``
    (:data:`ocean.variables.STANDARD_NAMES`, read through cf_xarray, in the table's order of preference);
    the product's name (:data:`ocean.variables.PRODUCT_NAMES`: ``votemper``, ``tos``, ``TEMP``, ...).
    ``reading`` gets one row per quantity found (its units as found).
    """
    import cf_xarray  # noqa: F401  (the .cf accessor)

    table: dict[str, str] = {}
    how: dict[str, str] = {}
    for old, new in (names or {}).items():
        if old in ds.variables:
            table[old], how[new] = new, "option"
    by_std = ds.cf.standard_names
    study = {*VAR_ATTRS, *FIELD_UNITS, *STANDARD_NAMES, "u_ml", "v_ml"}  # a variable under a study name serves it
    for q, stds in STANDARD_NAMES.items():
        if q in how or (q in ds.data_vars and q not in table):
            std = ds[q].attrs.get("standard_name") if q in ds.data_vars else None
            how.setdefault(q, f"name and standard_name ({std})" if std in stds else "name")
            continue
        for std in stds:
            cands = [v for v in by_std.get(std, []) if v in ds.data_vars and v not in table and v not in study]
            if cands:
                ranked = sorted(cands, key=lambda v: list(PRODUCT_NAMES).index(v) if v in PRODUCT_NAMES else 999)
                table[ranked[0]], how[q] = q, f"standard_name ({std})"
                break
    for old, new in PRODUCT_NAMES.items():
        if old in ds.variables and old not in table and new not in how and new not in ds.variables:
            table[old], how[new] = new, "name"
    if reading is not None:
        for old, new in table.items():
            if new in STANDARD_NAMES or new in FIELD_UNITS:
                reading.add(new, old, how[new], ds[old].attrs.get("units", "(none)"))
        for q in how:
            if how[q].startswith("name") and q in ds.data_vars and q in FIELD_UNITS:
                reading.add(q, q, how[q], ds[q].attrs.get("units", "(none)"))
    return table


def _choose_dims(ds: xr.Dataset, select: Mapping[str, int] | None, member: int | None, reading: Reading) -> xr.Dataset:
    """Extra dims picked by ``select`` (``{dim: index}``) and the ensemble dim read as ``member`` (one of them
    when ``member`` is given); a second ensemble dim is refused naming the option."""
    select = dict(select or {})
    for d, i in select.items():
        if d not in ds.dims:
            raise ConfigError(
                f"--select {d}={i}: the product has no dim {d!r}; its dims are {sorted(map(str, ds.dims))}."
            )
        if not -ds.sizes[d] <= int(i) < ds.sizes[d]:
            raise ConfigError(f"--select {d}={i}: {d!r} has {ds.sizes[d]} values (indices 0..{ds.sizes[d] - 1}).")
    if select:
        ds = ds.isel({d: int(i) for d, i in select.items()}, drop=True)
        reading.fact("dims", "selected", ", ".join(f"{d} = index {i}" for d, i in select.items()))
    ens = [
        str(d)
        for d in ds.dims
        if d in ENSEMBLE_DIMS or (d in ds.coords and ds[d].attrs.get("standard_name") == "realization")
    ]
    if len(ens) > 1:
        raise DimensionError(
            f"The product has two ensemble dims {ens}; the study reads one as its 'member'. Fix: "
            f"keep one index of the first with --select {ens[0]}=INDEX (open_store(..., "
            f"select={{{ens[0]!r}: INDEX}})); the other becomes the study's member."
        )
    if not ens:
        if member is not None:
            raise ConfigError(
                f"--member {member}: the product has no ensemble dim (one of {list(ENSEMBLE_DIMS)} or "
                "standard_name 'realization'); leave --member out."
            )
        return ds
    d = ens[0]
    if member is not None:
        if not -ds.sizes[d] <= member < ds.sizes[d]:
            raise ConfigError(f"--member {member}: {d!r} has {ds.sizes[d]} members (indices 0..{ds.sizes[d] - 1}).")
        ds = ds.isel({d: [member]})
    if d != "member":
        ds = ds.drop_vars([d]).rename({d: "member"}) if d in ds.coords else ds.rename({d: "member"})
        ds = ds.assign_coords(member=np.arange(ds.sizes["member"]))
    reading.fact(
        "dims",
        "ensemble",
        f"{d!r} ({ds.sizes['member']} member(s)"
        + (f": index {member} chosen by --member" if member is not None else "")
        + ") read as the study's member",
    )
    return ds


def _unit_text(units) -> str:
    """A units attribute as pint reads it (CF spellings of :data:`ocean.variables.UNIT_ALIASES` included)."""
    u = str(units).strip()
    for cf, spellings in UNIT_ALIASES.items():
        if u in spellings:
            u = cf
    return _PINT_SPELLING.get(u, u)


def _to_units(da: xr.DataArray, target: str, what: str) -> tuple[xr.DataArray, str]:
    """``da`` in ``target`` units (pint-xarray, cf-xarray's registry) and the conversion in words ("" if none).

    A missing or unreadable unit, or one of another dimension, is refused naming ``what`` and ``target``."""
    units = da.attrs.get("units")
    if units is None or str(units).strip() == "":
        raise UnitsError(
            f"{what} has no units attribute, so its scale cannot be checked (a depth in cm would be read "
            f"as 100x too deep); expected {target!r}. Fix: set ds[...].attrs['units'] to the units its "
            "values are in (e.g. 'm' or 'cm'); it is converted from there."
        )
    ureg = registry()
    src = parse_units(
        _unit_text(units),
        what,
        repr(target),
        "set its units attribute to a UDUNITS spelling (e.g. 'degC', 'K', 'm', 'cm', 'W m-2', 'N m-2').",
    )
    dst = ureg.parse_units(target)
    if src == dst:
        return da.assign_attrs(
            units=EXPECTED_UNITS.get(target, target) if target != "degree_Celsius" else "degree_Celsius"
        ), ""
    if src.dimensionality != dst.dimensionality:
        raise UnitsError(
            f"{what} has units {units!r}, which are not {target!r} or convertible to them "
            f"({src.dimensionality} vs {dst.dimensionality}). Fix: check which variable this is, or set "
            "its units attribute to what its values are in."
        )
    attrs = {**da.attrs, "units": target}
    if src == ureg.kelvin:
        da = da.where(da > 0)  # 0 K: a land fill
    out = da.pint.quantify(src, unit_registry=ureg).pint.to(dst).pint.dequantify()
    return out.assign_attrs(attrs), f"{units} -> {target} (pint)"


def _direction(da: xr.DataArray, what: str) -> tuple[xr.DataArray, str]:
    """A flux or stress made positive downward into the sea, the study's convention, from its
    ``standard_name`` (``surface_upward_...``) and ``positive`` attribute; a contradiction is refused."""
    std, pos = da.attrs.get("standard_name", ""), da.attrs.get("positive")
    by_name = "up" if std in UPWARD else "down" if std in DOWNWARD else None
    if by_name and pos and pos.lower() != by_name:
        raise UnitsError(
            f"{what}: its standard_name {std!r} says {by_name}ward but its positive attribute says "
            f"{pos!r}, so its sign cannot be read. Fix: correct the one that is wrong (CF: the "
            "standard_name's direction decides)."
        )
    way = by_name or (pos.lower() if pos else None)
    if way != "up":
        return da, ""
    attrs = {**da.attrs, "positive": "down"}
    if std in UPWARD:
        attrs["standard_name"] = std.replace("_upward_", "_downward_").replace("_in_air", "_in_sea_water")
    why = f"standard_name {std}" if by_name else "positive: up"
    return (-da).assign_attrs(attrs), f"{why}: sign flipped to downward into the sea"


def _salinity(da: xr.DataArray, what: str) -> tuple[xr.DataArray, str, str]:
    """Salinity as the study reads it: practical (as given, "1") or Absolute (g kg-1, a mass fraction times
    1000 by pint); returns (salinity, units as used, conversion). CF's ``standard_name`` decides first
    (practical salinity is dimensionless in CF: no units needed), then the units; ``"1"`` with values
    below 1 is a mass fraction (CF's ``sea_water_salinity`` in kg kg-1), with values near 35 practical."""
    std, units = da.attrs.get("standard_name", ""), da.attrs.get("units")
    u = str(units).strip().lower() if units is not None else ""
    if std == "sea_water_practical_salinity" and not u:
        u = "1"
    if not u:
        raise UnitsError(
            f"{what} has no units attribute, so practical salinity (PSU, '1e-3'), Absolute Salinity "
            "('g kg-1') and a mass fraction ('kg kg-1') cannot be told apart. Fix: set its units, or "
            "standard_name 'sea_water_practical_salinity' / 'sea_water_absolute_salinity'."
        )
    kind = None
    if u in _FRACTION or (u == "1" and std != "sea_water_practical_salinity" and _below_one(da)):
        kind = "fraction"
    elif std == "sea_water_absolute_salinity" or u in _ABSOLUTE:
        kind = "absolute"
    elif std in ("sea_water_practical_salinity", "sea_water_salinity", "") and u in _PRACTICAL:
        kind = "practical"
    if kind is None:
        raise UnitsError(
            f"{what} (standard_name {std or '(none)'!r}) has units {units!r}: not practical salinity "
            "(PSU, '1e-3', '1'), Absolute Salinity ('g kg-1') or a mass fraction ('kg kg-1'). Fix: set "
            "its units attribute to one of these."
        )
    if kind == "practical":
        return (
            da.assign_attrs(units="1", standard_name="sea_water_practical_salinity"),
            "1",
            "practical salinity (PSS-78): gsw.SA_from_SP",
        )
    if kind == "absolute":
        return (
            da.assign_attrs(units="g kg-1", standard_name="sea_water_absolute_salinity"),
            "g kg-1",
            "Absolute Salinity: used as SA",
        )
    ureg = registry()
    out = da.assign_attrs(units="kg/kg").pint.quantify(unit_registry=ureg).pint.to("g/kg").pint.dequantify()
    return (
        out.assign_attrs({**da.attrs, "units": "g kg-1", "standard_name": "sea_water_absolute_salinity"}),
        "g kg-1",
        "mass fraction kg/kg -> g kg-1 (pint, x1000): Absolute Salinity",
    )


def _below_one(da: xr.DataArray) -> bool:
    """Whether the salinity's values (first time step) are all below 1: a mass fraction, not PSU."""
    first = da.isel({d: 0 for d in da.dims if d in ("time", "time_counter")})
    top = float(np.nanmax(np.asarray(first.values, float))) if np.isfinite(first.values).any() else 0.0
    return top < 1.0


def _read_units(ds: xr.Dataset, renamed: Mapping[str, str], reading: Reading, notes: list[str]) -> xr.Dataset:
    """Every field the study reads in its units (:data:`ocean.variables.FIELD_UNITS`, the budget terms' W m-2),
    fluxes and stresses positive downward, salinity told apart; each step in ``reading`` and ``notes``."""
    unitless = []
    targets = {
        **{k: v for k, v in FIELD_UNITS.items() if k != "depth"},
        **{k: EXPECTED_UNITS[k] for k in (*VAR_ATTRS,) if k not in FIELD_UNITS},
    }
    for v, target in targets.items():
        if v not in ds.data_vars:
            continue
        what = _origin(v, renamed)
        found = ds[v].attrs.get("units")
        if found is None:
            unitless.append(f"{what} (expected {target!r})")
            continue
        da, said = _to_units(ds[v], target, what)
        steps = [said] if said else []
        if v in ("qnet", "tauu", "tauv"):
            da, flip = _direction(da, what)
            steps += [flip] if flip else []
        if v == "mld":
            da = _positive_down(da, "mld", steps)
        ds[v] = da.assign_attrs(units=VAR_ATTRS[v]["units"] if v in VAR_ATTRS else target)
        notes += [f"{v}: {s}" for s in steps]
        if v in STANDARD_NAMES or v in FIELD_UNITS:
            row = _row(reading, v, renamed, found)
            row.units_used, row.conversion = ds[v].attrs["units"], "; ".join(steps)
    if unitless:
        one = len(unitless) == 1
        raise UnitsError(
            f"{', '.join(unitless)} {'has' if one else 'have'} no units attribute, so "
            f"{'its' if one else 'their'} scale cannot be checked (a mixed-layer depth in cm would be "
            "read as 100x too deep). Fix: set each one's units, e.g. ds['mld'].attrs['units'] = 'm' "
            "(or 'cm': it is converted)."
        )
    if "so" in ds.data_vars:
        found = ds["so"].attrs.get("units")
        ds["so"], used, said = _salinity(ds["so"], _origin("so", renamed))
        row = _row(reading, "so", renamed, found)
        row.units_used, row.conversion = used, said
        notes.append(f"so: {said}")
    return ds


def _row(reading: Reading, q: str, renamed: Mapping[str, str], found) -> ReadRow:
    """The reading's row of ``q`` (added when the quantity was found by the study's own name)."""
    try:
        return reading.row(q)
    except KeyError:
        old = [k for k, v in renamed.items() if v == q]
        return reading.add(q, old[0] if old else q, "name", found if found is not None else "(none)")


def _depth_axis(ds: xr.Dataset, renamed: Mapping[str, str], reading: Reading, notes: list[str]) -> xr.Dataset:
    """The depth coordinate in metres, positive down, increasing: its units converted by pint (refused when
    absent: a depth in cm is never read as metres), positive up flipped."""
    what = f"Depth {_origin('depth', renamed)}"
    found = ds["depth"].attrs.get("units")
    da, said = _to_units(ds["depth"], "m", what)
    steps = [said] if said else []
    da = _positive_down(da, "depth", steps)
    ds = ds.assign_coords(depth=da.assign_attrs(units="m", positive="down")).sortby("depth")
    old = [k for k, v in renamed.items() if v == "depth"]
    reading.add(
        "depth",
        old[0] if old else "depth",
        "axis Z" if ds["depth"].attrs.get("axis") == "Z" else "name",
        found,
        "m",
        "; ".join(steps),
    )
    notes += [f"depth: {s}" for s in steps]
    return ds


def _origin(name: str, renamed: Mapping[str, str]) -> str:
    """``'thetao' (votemper)``: the study name and the product's own, for messages."""
    old = [k for k, v in renamed.items() if v == name]
    return f"{name!r}" + (f" ({old[0]})" if old else "")


def _positive_down(da: xr.DataArray, what: str, notes: list[str]) -> xr.DataArray:
    """Flip a depth-like variable given positive up (``positive: up`` or no positive value)."""
    # the extremes streamed chunk by chunk (a product's many files are never loaded whole to read a sign)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN field: no sign to read
        lo, hi = (float(x) for x in dask.compute(da.min(skipna=True), da.max(skipna=True)))
    up = da.attrs.get("positive") == "up" or (np.isfinite(hi) and hi <= 0 and lo < 0)
    if not up:
        return da
    notes.append(f"{what} positive up -> positive down")
    return (-da).assign_attrs({**da.attrs, "positive": "down"})


def _temperature_kind(thetao: xr.DataArray) -> tuple[str, str]:
    """(standard_name, words) of the 3-D temperature, read from its CF ``standard_name``
    (:func:`ocean.budget.temperature_kind`): conservative or in-situ (``sea_water_temperature``, HYCOM's
    ``water_temp``) when the product says so, else potential (what ``thetao`` / ``votemper`` hold in CMIP6,
    CMEMS and NEMO output)."""
    kind = budget.temperature_kind(thetao)
    if kind == "conservative":
        return "sea_water_conservative_temperature", "conservative temperature"
    if kind == "in-situ":
        return "sea_water_temperature", "in-situ temperature"
    return "sea_water_potential_temperature", "potential temperature"


def _derive_from_3d(
    ds: xr.Dataset, renamed: Mapping[str, str], notes: list[str], reading: Reading | None = None
) -> None:
    """``sst``, ``mld`` and ``t_sub`` from 3-D ``thetao`` (and ``so``) when the product lacks them,
    each labelled with what it holds and how it was computed (in place). In-situ temperature is first
    converted to potential temperature (:func:`ocean.budget.potential_from_insitu`: ``gsw.pt0_from_t`` at each
    level's pressure), so that the MLD's sigma0 and the temperatures the study reads are potential ones; the
    conversion is said in ``notes`` and in the ``thetao`` row of ``reading``."""
    src = _origin("thetao", renamed)
    std, words = _temperature_kind(ds["thetao"])
    if std == "sea_water_temperature":
        found = ds["thetao"].attrs.get("units")
        ds["thetao"] = budget.potential_from_insitu(ds["thetao"], ds["so"] if "so" in ds else None)
        said = (
            f"in-situ temperature (standard_name sea_water_temperature) -> potential: {ds['thetao'].attrs['comment']}"
        )
        notes.append(f"thetao: {said}")
        if reading is not None:
            row = _row(reading, "thetao", renamed, found)
            row.conversion = "; ".join(c for c in (row.conversion, said) if c)
        std, words = _temperature_kind(ds["thetao"])
    depth = ds["depth"].values.astype(float)
    if "sst" not in ds:
        sst = ds["thetao"].isel(depth=0, drop=True)
        sst.attrs = {
            "units": "degree_Celsius",
            "standard_name": std,
            "long_name": f"{words} at the shallowest level ({depth[0]:g} m)",
            "comment": f"ocean.products.from_nemo: {src} at depth {depth[0]:g} m",
        }
        ds["sst"] = sst
        notes.append(f"sst = thetao at {depth[0]:g} m")
    if "mld" not in ds and "so" in ds:
        mld = budget.mixed_layer_depth(budget.teos10(ds["thetao"], ds["so"])["sigma0"])
        mld.attrs["comment"] += f"; computed by ocean.products.from_nemo from {src} and {_origin('so', renamed)}"
        ds["mld"] = mld
        notes.append("mld = sigma0 threshold depth (0.03 kg m-3 from 10 m, TEOS-10) of thetao, so")
    if "t_sub" not in ds and "mld" in ds:
        t_sub = budget.first_level_below(ds["thetao"], ds["mld"])
        t_sub.attrs = {
            "units": "degree_Celsius",
            "standard_name": std,
            "long_name": f"{words} just below the mixed layer",
            "comment": f"ocean.products.from_nemo: {src} at the first level deeper than mld (the "
            "deepest valid level where the column is mixed to its bottom); not converted",
        }
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


def from_nemo(
    ds: xr.Dataset,
    names: Mapping[str, str] | None = None,
    *,
    kappa: float = KAPPA,
    scheme: str = "centred",
    advection: str = "centred",
    select: Mapping[str, int] | None = None,
    member: int | None = None,
    reading: Reading | None = None,
    mesh_mask: xr.Dataset | None = None,
    problems: list[str] | None = None,
) -> xr.Dataset:
    """Map a CMIP6, ORAS5 / NEMO, Copernicus Marine, MOM6 or CESM dataset onto the study's layout.

    Finds each quantity by its CF ``standard_name`` (cf_xarray; :data:`ocean.variables.STANDARD_NAMES`),
    else by the product's name (:data:`ocean.variables.PRODUCT_NAMES`: ``votemper`` / ``thetao`` / ``TEMP``
    3-D temperature, ``vosaline`` / ``so`` salinity, ``somxl010`` / ``mlotst`` / ``HMXL`` mixed-layer
    depth, ``sohefldo`` / ``hfds`` / ``SHF`` net surface heat flux, ``sossheig`` / ``zos``,
    ``sozotaux`` / ``tauuo``, ``sometauy`` / ``tauvo``, ``nav_lat`` / ``nav_lon``,
    ``time_counter``, ``deptht`` / ``lev`` / ``z_l`` / ``z_t`` or the coordinate with ``axis: Z``) and then:

    - an ensemble dim (``realization``, ``member_id``, ``number``; CF ``standard_name: realization``)
      becomes the study's ``member`` (``member``: keep only that index); other extra dims are chosen by
      ``select`` (``{dim: index}``) or refused naming the dim and ``--select``;
    - units are converted by pint-xarray with cf-xarray's registry (K -> degree_Celsius, cm -> m,
      mN m-2 / dyn cm-2 -> N m-2, ...); a missing units attribute is refused (salinity whose
      standard_name is ``sea_water_practical_salinity`` excepted: CF defines it dimensionless);
    - heat fluxes and stresses positive up (``positive: up``, ``surface_upward_heat_flux_in_air``)
      are negated to the study's downward into the sea; depth and MLD positive up become positive down;
    - salinity is read as practical (PSU, ``1e-3``, ``1``), Absolute (g/kg,
      ``sea_water_absolute_salinity``) or a mass fraction (kg/kg, times 1000 into Absolute Salinity);

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
    reading
        Filled with what was read (:class:`scimech.studies.reading.Reading`); it is also kept, as JSON,
        in the result's ``attrs["reading"]``.

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
        No latitude / longitude; units that are not the quantity's (degF is read, a length is not a
        temperature); a field with no ``units`` attribute (its scale is never assumed); an extra dim
        not chosen; a mask that counts land as ocean.
    ConfigError
        ``select`` or ``member`` names a dim or an index the product does not have.

    Examples
    --------
    Three months of NEMO output on a 3 x 4 regular grid: SST in kelvin, the mixed-layer depth in cm:

    >>> lat, lon = np.meshgrid([-1.0, 0.0, 1.0], [10.0, 11.0, 12.0, 13.0], indexing="ij")
    >>> field = ("time_counter", "y", "x")
    >>> ds = xr.Dataset(
    ...     {
    ...         "sosstsst": (field, np.full((3, 3, 4), 293.15), {"units": "K"}),
    ...         "somxl010": (field, np.full((3, 3, 4), 5000.0), {"units": "cm"}),
    ...     },
    ...     coords={
    ...         "time_counter": np.array(["2000-01", "2000-02", "2000-03"], dtype="datetime64[ns]"),
    ...         "nav_lat": (("y", "x"), lat),
    ...         "nav_lon": (("y", "x"), lon),
    ...     },
    ... )
    >>> out = from_nemo(ds)
    >>> out["sst"].dims, out["lat"].values.tolist(), out["lon"].values.tolist()
    (('member', 'time', 'lat', 'lon'), [-1.0, 0.0, 1.0], [10.0, 11.0, 12.0, 13.0])
    >>> round(float(out["sst"].max()), 6), out["sst"].attrs["units"]  # 293.15 K
    (20.0, 'degree_Celsius')
    >>> float(out["mld"].max()), out["mld"].attrs["units"]  # 5000 cm
    (50.0, 'm')
    >>> out.attrs["mapping"].split("; ")[:3]
    ['somxl010 -> mld', 'sosstsst -> sst', 'time_counter -> time']
    """
    _refuse_empty(ds)
    reading = reading if reading is not None else Reading(describe_product(ds))
    if not reading.product:
        reading.product = describe_product(ds)
    ds = read_axes(ds, reading, mesh_mask=mesh_mask, problems=problems)  # the time axis and the grid first
    ds = _choose_dims(ds, select, member, reading)
    table = find_variables(ds, names, reading)
    ds, renamed = rename_to_study(ds, {**table, **_z_axis(ds, table)}, cf_units=False)
    notes = [f"{a} -> {b}" for a, b in renamed.items()]
    if ds.attrs.get("grid") not in (None, "as given"):
        notes.append(str(ds.attrs["grid"]))
    if "depth" in ds.variables:
        ds = _depth_axis(ds, renamed, reading, notes)
    ds = _read_units(ds, renamed, reading, notes)
    _refuse_extra_dims(ds, renamed)
    given = set(map(str, ds.data_vars))
    if "thetao" in ds and "depth" in ds["thetao"].dims:
        _derive_from_3d(ds, renamed, notes, reading)
    if "member" not in ds.dims:
        ds = ds.expand_dims(member=[0]) if "time" in ds.dims else ds
        notes.append("member dim of length 1 added")
    keep = {}
    for v in ds.data_vars:
        if set(ds[v].dims) == set(DIMS):
            keep[v] = ds[v].transpose(*DIMS)
            for k, val in VAR_ATTRS.get(str(v), {}).items():
                if k == "standard_name" and v in _KIND_UNKNOWN:
                    continue  # a product's t_sub without a standard_name: potential or conservative is unknown
                keep[v].attrs.setdefault(k, val)
    dropped = sorted(str(v) for v in ds.data_vars if v not in keep and v != "mask")
    if dropped:
        notes.append(f"dropped {dropped} (not (member, time, lat, lon) fields)")
        unread = [
            v
            for v in dropped
            if v not in ("thetao", "so", "uo", "vo", "e3t")
            and "bnds" not in v
            and "bound" not in v
            and "vertices" not in v
        ]
        if unread:
            reading.fact("rows", "variables not read", ", ".join(f"{v} {tuple(map(str, ds[v].dims))}" for v in unread))
    out = xr.Dataset(keep, attrs=dict(ds.attrs))
    if "mask" not in ds and "tmask" in ds:
        ds["mask"] = ds["tmask"]
        notes.append("mask = tmask at the surface level")
    if "mask" in ds:
        m = ds["mask"]
        m = m.isel({d: 0 for d in m.dims if d not in ("lat", "lon")}, drop=True)
        out["mask"] = (m.fillna(0) > 0).astype(np.int8).transpose("lat", "lon")
        _mask_against_fields(out, _origin("mask", renamed) if "tmask" not in renamed.values() else "'tmask'")
    elif "sst" in out:
        out["mask"] = np.isfinite(out["sst"].isel(member=0, time=0, drop=True)).astype(np.int8)
        notes.append("mask = where sst is finite at the first time step")
    if "mask" in out:
        out["mask"].attrs = {
            "long_name": "ocean mask",
            "flag_values": np.array([0, 1], np.int8),
            "flag_meanings": "land ocean",
            "units": "1",
        }
    made = []
    timeless = problems is not None and any(p.startswith("the time axis") for p in problems)
    if "mask" in out and not timeless:  # (inspect: without a time axis no tendency can be computed, nor said)
        try:
            out, made = concepts.complete(out, kappa=kappa, scheme=scheme, advection=advection)
        except (DataValidationError, ValueError) as err:
            if problems is None:
                raise
            problems.append(f"the budget terms cannot be computed: {err}")
        if made:
            notes.append(
                f"computed {made} (ocean.concepts; kappa {kappa:g} m2 s-1, {scheme} time "
                f"differences, {advection} advection)"
            )
    out.attrs["mapping"] = "; ".join(notes)
    say_back(out, reading, notes, given=given - set(made))
    out.attrs["reading"] = json.dumps(reading.to_dict())
    return out


def _refuse_empty(ds: xr.Dataset) -> None:
    empty = [str(d) for d, n in ds.sizes.items() if n == 0]
    if not ds.data_vars or empty:
        raise DataValidationError(
            f"The dataset is empty ({'no data variables' if not ds.data_vars else f'dims {empty} have length 0'}): "
            "nothing to map. Check the file (an interrupted download or an empty time selection?)."
        )


def _z_axis(ds: xr.Dataset, table: Mapping[str, str]) -> dict[str, str]:
    """``{name: 'depth'}`` for the vertical axis of a product that names it otherwise (CMIP6 ``lev``, MOM6
    ``z_l``, POP ``z_t``): the 1-D coordinate with CF ``axis: Z`` or a ``positive`` attribute (cf_xarray)."""
    import cf_xarray  # noqa: F401

    if "depth" in ds.variables or "depth" in table.values():
        return {}
    known = [k for k, v in PRODUCT_NAMES.items() if v == "depth" and k in ds.dims]
    if known:
        return {}
    cands = [c for c in ds.cf.axes.get("Z", []) if c in ds.dims]
    cands += [
        str(c)
        for c in ds.coords
        if c in ds.dims and ds[c].attrs.get("positive") in ("up", "down") and str(c) not in cands
    ]
    return {cands[0]: "depth"} if cands else {}


def _refuse_extra_dims(ds: xr.Dataset, renamed: Mapping[str, str]) -> None:
    """A field the study reads with a dim beyond ``(member, time, [depth,] lat, lon)`` is refused naming the dim and
    the option that chooses an index along it (it was dropped, and the study then said it "lacks" the field)."""
    allowed = {*DIMS, "depth"}
    for v in _QUANTITIES_WITH_DIMS_CHECKED:
        if v not in ds.data_vars:
            continue
        extra = [str(d) for d in ds[v].dims if d not in allowed]
        if extra:
            d = extra[0]
            raise DimensionError(
                f"{_origin(v, renamed)} has the dim {d!r} ({ds.sizes[d]} values) beyond the study's (member, time, "
                f"[depth,] lat, lon). Fix: choose one with --select {d}=INDEX (Python: open_store(path, "
                f"select={{{d!r}: INDEX}}))."
            )


def _mask_against_fields(out: xr.Dataset, source: str) -> None:
    """Refuse a mask that counts as ocean points where the product's fields are NaN at every time step of the
    first member (land: a 3-D tmask read at a level below the surface, or a mask of another grid)."""
    for v in ("sst", "mld", "zos", "qnet"):
        if v not in out:
            continue
        first = out[v].isel(member=0)
        dry = (~np.isfinite(first)).all("time") & (out["mask"] == 1)
        n = int(dry.sum())
        if n:
            raise DataValidationError(
                f"The mask ({source}) counts {n} point(s) as ocean where {v} is NaN at every time step: land read as "
                "ocean. Fix: give the surface level of NEMO's 3-D tmask (tmask.isel(z=0)) or the product's own "
                "tmaskutil (mesh_mask=...), or set those points to 0 in the mask."
            )
        return


def open_store(
    path: Source,
    names: Mapping[str, str] | None = None,
    *,
    validate_schema: bool = True,
    kappa: float = KAPPA,
    scheme: str = "centred",
    advection: str = "centred",
    select: Mapping[str, int] | None = None,
    member: int | None = None,
    mesh_mask: xr.Dataset | str | os.PathLike | None = None,
    reading: Reading | None = None,
    problems: list[str] | None = None,
    **kwargs,
) -> xr.Dataset:
    """Open a product in the study's layout or as it is distributed: one zarr store or netCDF file, or many
    files (a list of paths, a glob such as ``"cmip6/*_Omon_*.nc"``, or a folder of netCDF files).

    Many files are combined lazily by :func:`ocean.data.files.open_files` (by variable and time chunk with
    :func:`xarray.open_mfdataset`; a NEMO run's grid_T / grid_U / grid_V files on their points with
    xnemogcm and the ``mesh_mask.nc`` / ``domain_cfg.nc`` found among them); files that do not belong
    together, overlapping or missing time chunks are refused naming the files. The dataset's time axis is
    read (:func:`ocean.data.timeaxis.read_time`: calendar, frequency, gaps), then its grid
    (:func:`ocean.data.gridaxes.read_grid`: periodic longitude, staggered currents, the mesh mask's metrics and
    ``tmask``), then its variables, units and signs (:func:`from_nemo`; ``names``: more renames;
    ``select``, ``member``: extra dims; ``kappa``, ``scheme``, ``advection``: how missing budget terms are
    computed); then it is checked by :func:`validate` (``kwargs``: its ``inputs``, ``concepts``,
    ``target``, ``check_nans``; NaNs are not checked by default, that reads every value). ``mesh_mask``:
    NEMO's ``mesh_mask.nc`` (a path or a dataset). ``reading``: filled with what was read
    (:mod:`ocean.data.reading`), the files and how they were combined first. ``problems``: given a list, what
    would stop a study but not the reading (a time axis that cannot be read, budget terms that cannot be
    computed) is added to it in words instead of raised, so that the rest is still read (``inspect``).

    Raises
    ------
    DataValidationError
        No file, a file that is not zarr or netCDF, or an empty one; a gap in time; files that do not
        belong together.
    MissingVariableError, UnitsError, DimensionError, ConfigError
        From :func:`from_nemo` and :func:`validate`, naming the variable and the fix.

    Examples
    --------
    A netCDF file of three months of NEMO output on a 3 x 4 grid (SST in kelvin, mixed-layer depth
    in cm), read onto the study's layout:

    >>> lat, lon = np.meshgrid([-1.0, 0.0, 1.0], [10.0, 11.0, 12.0, 13.0], indexing="ij")
    >>> field = ("time_counter", "y", "x")
    >>> xr.Dataset(
    ...     {
    ...         "sosstsst": (field, np.full((3, 3, 4), 293.15), {"units": "K"}),
    ...         "somxl010": (field, np.full((3, 3, 4), 5000.0), {"units": "cm"}),
    ...     },
    ...     coords={
    ...         "time_counter": np.array(["2000-01", "2000-02", "2000-03"], dtype="datetime64[ns]"),
    ...         "nav_lat": (("y", "x"), lat),
    ...         "nav_lon": (("y", "x"), lon),
    ...     },
    ... ).to_netcdf("nemo.nc")
    >>> ds = open_store("nemo.nc", validate_schema=False)
    >>> dict(ds["sst"].sizes)
    {'member': 1, 'time': 3, 'lat': 3, 'lon': 4}
    >>> round(float(ds["sst"].max()), 6), float(ds["mld"].max())  # 293.15 K in degC, 5000 cm in m
    (20.0, 50.0)

    Checked for a study, it lacks the fields the heat budget needs, and says which:

    >>> open_store("nemo.nc")
    Traceback (most recent call last):
    ...
    scimech.errors.MissingVariableError: The ocean dataset lacks zos (sossheig/SSH), tauu ...
    """
    reading = reading if reading is not None else Reading("", source_text(path))
    reading.source = reading.source or source_text(path)
    given = open_product(Path(mesh_mask)) if isinstance(mesh_mask, (str, os.PathLike)) else mesh_mask
    ds, found = open_source(path, reading, mesh_mask=mesh_mask)
    _refuse_empty(ds)
    ds = from_nemo(
        ds,
        names,
        kappa=kappa,
        scheme=scheme,
        advection=advection,
        select=select,
        member=member,
        reading=reading,
        mesh_mask=given if given is not None else found,
        problems=problems,
    )
    kwargs.setdefault("check_nans", False)
    return validate(ds, **kwargs) if validate_schema else ds


def open_source(
    path: Source, reading: Reading | None = None, *, mesh_mask: xr.Dataset | str | os.PathLike | None = None
) -> tuple[xr.Dataset, xr.Dataset | None]:
    """The product ``path`` names, lazily, and the mesh mask found among its files (``None`` if none): one
    zarr store or netCDF file as it is, many files combined by :func:`ocean.data.files.open_files`."""
    if not is_many(path):
        return open_product(product_files(path)[0]), None
    return open_files(product_files(path), reading, mesh_mask=mesh_mask)


def open_product(path: Source) -> xr.Dataset:
    """A zarr store or netCDF file (or a product's many files, combined), lazily; refused in one line when
    absent or unreadable."""
    if is_many(path):
        return open_source(path)[0]
    path = Path(os.fspath(path if isinstance(path, (str, os.PathLike)) else path[0]))
    if not path.exists():
        raise DataValidationError(
            f"No ocean data at {str(path)!r}: give a zarr store, a netCDF file, a folder of netCDF files or a glob "
            "(or create one with `scimech ocean synth --out ...`)."
        )

    def opened(**kw) -> xr.Dataset:
        if path.is_dir():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # no consolidated metadata: read the groups
                return xr.open_zarr(path, chunks={}, **kw)
        return xr.open_dataset(path, chunks={}, **kw)

    try:
        try:
            return opened()
        except ValueError as err:  # a time xarray cannot decode ("months since" in a standard calendar):
            if "decode time" not in str(err):  # read it raw; ocean.data.timeaxis.read_time decodes it or refuses it
                raise  # naming CF's rule and the fix
            return opened(decode_times=False)
    except Exception as err:
        raise DataValidationError(
            f"Cannot open {str(path)!r} ({type(err).__name__}: {err}): it is not a zarr store or a "
            "netCDF file, or it is truncated. Check the download or rewrite it."
        ) from err


def read_axes(
    ds: xr.Dataset, reading: Reading, *, mesh_mask: xr.Dataset | None = None, problems: list[str] | None = None
) -> xr.Dataset:
    """The product's time axis and grid read before its variables (:mod:`ocean.data.timeaxis`, :mod:`ocean.data.gridaxes`),
    each filling its sections of ``reading``; a product with no time axis (a mesh mask) is passed as it is.
    ``problems``: a time axis that cannot be read is said there (and in ``reading``) instead of raised."""
    from .timeaxis import read_time, time_name

    if time_name(ds) is not None:
        try:
            ds = read_time(ds, reading)
        except DataValidationError as err:
            if problems is None:
                raise
            problems.append(f"the time axis: {err}")
            reading.fact("time", "read", f"no: {str(err).split('. ')[0]}")
    from .gridaxes import read_grid

    return read_grid(ds, reading, mesh_mask=mesh_mask)


def inspect(
    path: Source,
    names: Mapping[str, str] | None = None,
    *,
    select: Mapping[str, int] | None = None,
    member: int | None = None,
    mesh_mask: str | os.PathLike | None = None,
    size: str = "quick",
) -> Reading:
    """Read the product at ``path`` (one file or store, or many files: a list, a glob, a folder) as
    ``scimech ocean study --data`` would, and say what was read, then what prevents a study.

    Nothing is trained or computed beyond what the reader needs (no torch). The table holds whatever
    could be read (quantities the product lacks are rows marked ``missing``); what would stop the study
    on it is said in words in the section ``study`` (``can run``: ``yes``, or ``no`` and one line per
    problem: a record too short for the ``size``'s window and split, a time axis that cannot be read, a
    missing variable, files that do not belong together), never raised. Only the options' own errors
    (``select`` or ``member`` naming what the product does not have) are raised, as
    :class:`scimech.errors.ConfigError`.
    """
    reading = Reading("", source_text(path))
    problems: list[str] = []
    out = None
    try:
        out = open_store(
            path,
            names,
            validate_schema=False,
            select=select,
            member=member,
            mesh_mask=mesh_mask,
            reading=reading,
            problems=problems,
        )
    except DataValidationError as err:
        problems.append(str(err))
    if not reading.product:
        reading.product = "nothing could be read as an ocean product"
    timeless = any(p.startswith("the time axis") for p in problems)
    if timeless:  # the budget terms are derivable, but not without a time axis: said so, not "missing"
        for row in reading.rows:
            if row.found_by == "missing" and row.quantity in (*PRESCRIBED, "mlhc", "dmlhc_dt"):
                row.found_by, row.conversion = "not computed", "needs a time axis that can be read"
    if out is not None:
        problems += _study_problems(out, size, timeless)
    if problems:
        reading.fact("study", "can run", f"no ({len(problems)} problem{'s' if len(problems) > 1 else ''})")
        for i, text in enumerate(problems, 1):
            reading.fact("study", f"problem {i}", text)
    else:
        reading.fact("study", "can run", f"yes (the {size} size's window and split fit the record)")
    return reading


def _study_problems(out: xr.Dataset, size: str, timeless: bool) -> list[str]:
    """What in the mapped product stops the study at ``size``: the schema (a missing variable, units) and the
    record's length for the size's window, lead and split (:func:`ocean.plan.check_record`); ``timeless``: the
    time axis could not be read (said already), so only the inputs are checked."""
    from ..plan import StudyConfig, check_record
    from .timeaxis import time_axis

    if timeless:
        lacking = [q for q in INPUTS if q not in out]
        return [f"the product lacks the input(s) {', '.join(lacking)} (see the table)"] if lacking else []
    found = []
    try:
        validate(out, check_nans=False)
    except DataValidationError as err:
        found.append(str(err))
    try:
        check_record(StudyConfig.sized(size), time_axis(out))
    except DataValidationError as err:
        found.append(f"{err} (the {size} size)")
    return found
