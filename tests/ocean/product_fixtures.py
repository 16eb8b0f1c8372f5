"""Product-like ocean datasets, written from each product's own documentation, whose truth is known.

Every builder takes one member of the synthetic ocean (:func:`truth`, :func:`ocean.synthetic.generate`)
and lays it out as the product does: its variable names, dims, coordinates, CF attributes
(``standard_name``, ``units``, ``positive``, ``axis``), calendar and time stamps. The values are the
truth's, so a reader that reads the conventions right gives back the truth, and a test can compare
with it (or with gsw / pint on the product's own arrays).

Sources (the conventions each builder copies):

- **CMIP6** (:func:`cmip6`): the CMOR tables, Omon (``tos`` degC ``sea_surface_temperature``;
  ``zos`` m ``sea_surface_height_above_geoid``; ``hfds`` W m-2 ``surface_downward_heat_flux_in_sea_water``
  positive down; ``tauuo`` / ``tauvo`` N m-2 ``surface_downward_x_stress`` / ``..._y_stress`` positive
  down; ``mlotst`` m ``ocean_mixed_layer_thickness_defined_by_sigma_t``; ``thetao`` degC
  ``sea_water_potential_temperature``, ``so`` "0.001" ``sea_water_salinity``, ``uo`` / ``vo`` m s-1
  ``sea_water_x_velocity`` / ``..._y_velocity`` on ``lev`` (out_name of ``olevel``: m, positive down,
  axis Z, ``standard_name: depth``)); the CMIP6 global attributes (``realization_index``,
  ``frequency: mon``); time at the middle of ``time_bnds``, calendars of the model (``noleap``,
  ``360_day``); https://github.com/PCMDI/cmip6-cmor-tables (Tables/CMIP6_Omon.json,
  CMIP6_coordinate.json), CF standard name table v84 (https://cfconventions.org/standard-names.html).
  A ``realization`` dim (``standard_name: realization``, CF 1.7 section 4.5 ... ensemble axis) is added
  by ``realization=N``, as an ensemble concatenated by intake-esm / xmip is.
- **ORAS5 / NEMO** (:func:`oras5`, :func:`mesh_mask`): NEMO 3.4 / 4 output names (``votemper``,
  ``vosaline``, ``sossheig``, ``somxl010``, ``sohefldo``, ``sozotaux``, ``sometauy``; ``nav_lat`` /
  ``nav_lon`` 2-D on ``(y, x)``, ``deptht``, ``time_counter``) as in the ORAS5 documentation
  (Zuo et al. 2019, Ocean Sci. 15, 779; the CDS "ORAS5 global ocean reanalysis monthly data on
  ORCA1 grid" product user guide) and NEMO's ``field_def.xml``; the mesh mask of
  NEMO's ``domain_cfg`` / ``mesh_mask.nc`` (``e1t``, ``e2t`` on ``(t, y, x)``, ``e3t_0`` and the 3-D
  ``tmask`` on ``(t, z, y, x)``, ``tmaskutil``, ``gdept_1d``; NEMO book v4, section 3 "space
  domain").
- **Copernicus Marine** (:func:`cmems`): GLOBAL_MULTIYEAR_PHY_001_030 (GLORYS12V1) product user
  manual, CMEMS-GLO-PUM-001-030: ``thetao`` (degrees_C, ``sea_water_potential_temperature``), ``so``
  (1e-3, ``sea_water_salinity``), ``uo`` / ``vo`` (m s-1, ``eastward_sea_water_velocity`` /
  ``northward_...``), ``zos`` (m), ``mlotst`` (m, ``ocean_mixed_layer_thickness_defined_by_sigma_theta``)
  on ``(time, depth, latitude, longitude)``, ``depth`` positive down, axis Z. The physics product
  carries no surface fluxes; ``forcing=True`` adds them under CMIP names, as a merged file would.
- **MOM6** (:func:`mom6`): MOM6's diagnostics (``xh`` / ``yh`` tracer points, ``xq`` / ``yq`` velocity
  faces, C grid: ``uo`` on ``(z_l, yh, xq)``, ``vo`` on ``(z_l, yq, xh)``, ``taux`` on ``(yh, xq)``,
  ``tauy`` on ``(yq, xh)``; ``z_l`` layer centres in "meter", positive down); MOM6 documentation,
  "Diagnostics" and the CM4 / OM4 output (Adcroft et al. 2019, JAMES 11, 3167).
- **CESM POP** (:func:`cesm_pop`): the POP2 history file (``TEMP`` degC, ``SALT`` g/kg, ``SSH`` cm,
  ``HMXL`` cm, ``SHF`` W/m^2, ``TAUX`` / ``TAUY`` dyne/centimeter^2, ``z_t`` in centimeters, positive
  down; ``TLAT`` / ``TLONG`` on ``(nlat, nlon)``); CESM POP2 reference manual (Smith et al. 2010,
  LAUR-10-01853) and the CESM2 history field list.

Helpers that make the variants real files come in: :func:`set_units` (a variable in other units,
values converted by pint with cf-xarray's registry), :func:`upward` (a flux or depth given positive up),
:func:`without` (an attribute removed), :func:`write_netcdf` / :func:`write_zarr` (one time step per
chunk, as CMIP6 and Copernicus Marine files are).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import xarray as xr

from ocean import synthetic
from ocean.nemo import DEPTHT

__all__ = [
    "DEPTHT",
    "truth",
    "column_temperature",
    "currents",
    "cmip6",
    "oras5",
    "mesh_mask",
    "cmems",
    "mom6",
    "cesm_pop",
    "set_units",
    "upward",
    "without",
    "write_netcdf",
    "write_zarr",
    "month_times",
]

#: practical salinity of the fixtures' ocean (constant: the MLD from (thetao, so) is set by temperature)
SALINITY = 35.0


@functools.lru_cache(maxsize=4)
def _truth(years: int, ny: int, nx: int, seed: int, output: str) -> xr.Dataset:
    return synthetic.generate(n_members=1, years=years, ny=ny, nx=nx, seed=seed, output=output)


def truth(years: int = 3, ny: int = 6, nx: int = 8, seed: int = 5, output: str = "monthly") -> xr.Dataset:
    """One member of the synthetic ocean (a copy: callers may change it), monthly by default."""
    return _truth(years, ny, nx, seed, output).copy(deep=True)


def column_temperature(t: xr.Dataset, depth=DEPTHT) -> xr.DataArray:
    """A 3-D temperature (degC) on ``depth`` (m): ``sst`` down to the MLD, ``t_sub`` below (the synthetic
    ocean's two-layer column, as :func:`ocean.nemo.nemo_layout` writes it)."""
    one = t.isel(member=0, drop=True) if "member" in t.dims else t
    z = xr.DataArray(np.asarray(depth, float), dims="depth")
    return xr.where(z <= one["mld"], one["sst"], one["t_sub"]).transpose("time", "depth", "lat", "lon")


def currents(lat, lon, n_time: int) -> tuple[np.ndarray, np.ndarray]:
    """Analytic mixed-layer currents (m s-1), linear in latitude and longitude (degrees) so that the mean of
    two face values is the value at the T point between them: ``u = 0.05 + 0.002 (lon + 40) + 0.001 (lat - 40)``,
    ``v = -0.02 + 0.001 (lon + 40) - 0.002 (lat - 40)``, times ``1 + 0.1 sin(2 pi k / 12)`` at step ``k``.
    Arrays of shape ``(n_time, len(lat), len(lon))``."""
    la, lo = np.meshgrid(np.asarray(lat, float), np.asarray(lon, float), indexing="ij")
    season = 1 + 0.1 * np.sin(2 * np.pi * np.arange(n_time) / 12)[:, None, None]
    return (
        season * (0.05 + 0.002 * (lo + 40) + 0.001 * (la - 40)),
        season * (-0.02 + 0.001 * (lo + 40) - 0.002 * (la - 40)),
    )


def month_times(
    n: int, calendar: str = "standard", start: str = "2000-01", stamp: str = "middle"
) -> tuple[np.ndarray, np.ndarray]:
    """Monthly time stamps and bounds in ``calendar`` (cftime objects unless ``standard``): at the middle of
    each month (CMIP6: time is the mid-point of ``time_bnds``) or at its ``start``."""
    edges = xr.date_range(
        start=start,
        periods=n + 1,
        freq="MS",
        calendar=calendar,
        use_cftime=calendar not in ("standard", "gregorian", "proleptic_gregorian"),
    )
    left, right = np.asarray(edges[:-1]), np.asarray(edges[1:])
    mid = np.array([a + (b - a) / 2 for a, b in zip(left, right)]) if stamp == "middle" else left
    return mid, np.stack([left, right], axis=1)


def _one(t: xr.Dataset) -> xr.Dataset:
    return t.isel(member=0, drop=True) if "member" in t.dims else t


def _salinity(temp: xr.DataArray) -> np.ndarray:
    return np.where(np.isfinite(temp.values), SALINITY, np.nan)


def cmip6(
    t: xr.Dataset,
    *,
    calendar: str = "noleap",
    realization: int | None = None,
    with_3d: bool = True,
    with_currents: bool = False,
) -> xr.Dataset:
    """The truth as a CMIP6 Omon product on a regular (``gr``) grid (see the module doc for the CMOR table).

    ``calendar``: the model's calendar (``noleap``, ``360_day``, ``standard``); time at mid-month with
    ``time_bnds``. ``realization=N``: a leading ``realization`` dim of N copies (an ensemble concatenated
    by intake-esm). ``with_3d``: ``thetao`` / ``so`` on ``lev``; ``with_currents``: ``uo`` / ``vo`` (analytic,
    :func:`currents`) on ``lev``.
    """
    one = _one(t)
    nt = one.sizes["time"]
    time, bnds = month_times(nt, calendar)
    two = ("time", "lat", "lon")
    v2 = {
        "tos": (
            two,
            one["sst"].values,
            {
                "standard_name": "sea_surface_temperature",
                "units": "degC",
                "long_name": "Sea Surface Temperature",
                "cell_methods": "area: mean where sea time: mean",
            },
        ),
        "zos": (
            two,
            one["zos"].values,
            {
                "standard_name": "sea_surface_height_above_geoid",
                "units": "m",
                "long_name": "Sea Surface Height Above Geoid",
            },
        ),
        "hfds": (
            two,
            one["qnet"].values,
            {
                "standard_name": "surface_downward_heat_flux_in_sea_water",
                "units": "W m-2",
                "positive": "down",
                "long_name": "Downward Heat Flux at Sea Water Surface",
            },
        ),
        "tauuo": (
            two,
            one["tauu"].values,
            {
                "standard_name": "surface_downward_x_stress",
                "units": "N m-2",
                "positive": "down",
                "long_name": "Surface Downward X Stress",
            },
        ),
        "tauvo": (
            two,
            one["tauv"].values,
            {
                "standard_name": "surface_downward_y_stress",
                "units": "N m-2",
                "positive": "down",
                "long_name": "Surface Downward Y Stress",
            },
        ),
        "mlotst": (
            two,
            one["mld"].values,
            {
                "standard_name": "ocean_mixed_layer_thickness_defined_by_sigma_t",
                "units": "m",
                "long_name": "Ocean Mixed Layer Thickness Defined by Sigma T",
            },
        ),
    }
    three = ("time", "lev", "lat", "lon")
    if with_3d:
        temp = column_temperature(one)
        v2["thetao"] = (
            three,
            temp.values,
            {
                "standard_name": "sea_water_potential_temperature",
                "units": "degC",
                "long_name": "Sea Water Potential Temperature",
            },
        )
        v2["so"] = (
            three,
            _salinity(temp),
            {"standard_name": "sea_water_salinity", "units": "0.001", "long_name": "Sea Water Salinity"},
        )
    if with_currents:
        u, v = currents(one["lat"].values, one["lon"].values, nt)
        nz = len(DEPTHT)
        v2["uo"] = (three, np.repeat(u[:, None], nz, 1), {"standard_name": "sea_water_x_velocity", "units": "m s-1"})
        v2["vo"] = (three, np.repeat(v[:, None], nz, 1), {"standard_name": "sea_water_y_velocity", "units": "m s-1"})
    ds = xr.Dataset(
        v2,
        coords={
            "time": ("time", time, {"standard_name": "time", "axis": "T", "bounds": "time_bnds"}),
            "lev": (
                "lev",
                DEPTHT.copy(),
                {
                    "standard_name": "depth",
                    "units": "m",
                    "positive": "down",
                    "axis": "Z",
                    "long_name": "ocean depth coordinate",
                },
            ),
            "lat": ("lat", one["lat"].values, {"standard_name": "latitude", "units": "degrees_north", "axis": "Y"}),
            "lon": ("lon", one["lon"].values, {"standard_name": "longitude", "units": "degrees_east", "axis": "X"}),
        },
        attrs={
            "Conventions": "CF-1.7 CMIP-6.2",
            "mip_era": "CMIP6",
            "table_id": "Omon",
            "frequency": "mon",
            "grid_label": "gr",
            "realm": "ocean",
            "source_id": "SCIMECH-SYNTH",
            "variant_label": "r1i1p1f1",
            "realization_index": 1,
            "title": "synthetic ocean in CMIP6 Omon layout",
        },
    )
    ds["time_bnds"] = (("time", "bnds"), bnds)
    ds["time"].encoding.update(units="days since 1850-01-01", calendar=calendar)
    if not with_3d:
        ds = ds.drop_vars("lev")
    if realization is not None:
        ds = xr.concat([ds] * realization, dim="realization").assign_coords(
            realization=(
                "realization",
                np.arange(1, realization + 1),
                {"standard_name": "realization", "long_name": "realization"},
            )
        )
        ds["time_bnds"] = ds["time_bnds"].isel(realization=0, drop=True)
    return ds


def oras5(t: xr.Dataset, *, kelvin: bool = False, with_3d: bool = True, with_sst: bool = True) -> xr.Dataset:
    """The truth as an ORAS5 / NEMO product on a regular ORCA-like grid: NEMO names, 2-D ``nav_lat`` /
    ``nav_lon`` on ``(y, x)``, ``time_counter`` (``gregorian``), ``deptht`` (m, positive down). ``kelvin``:
    temperatures in K (as some NEMO configurations write them); ``with_sst``: ``sosstsst`` given."""
    one = _one(t).rename(time="time_counter", lat="y", lon="x")
    temp = column_temperature(_one(t)).rename(time="time_counter", depth="deptht", lat="y", lon="x")
    off, tu = (273.15, "K") if kelvin else (0.0, "degC")
    two = ("time_counter", "y", "x")
    lat2, lon2 = np.meshgrid(_one(t)["lat"].values, _one(t)["lon"].values, indexing="ij")
    v = {
        "somxl010": (
            two,
            one["mld"].values,
            {
                "standard_name": "ocean_mixed_layer_thickness_defined_by_sigma_theta",
                "units": "m",
                "long_name": "Mixed layer depth (dsigma = 0.01 wrt 10m)",
            },
        ),
        "sohefldo": (
            two,
            one["qnet"].values,
            {
                "standard_name": "surface_downward_heat_flux_in_sea_water",
                "units": "W/m2",
                "long_name": "Net Downward Heat Flux",
            },
        ),
        "sossheig": (
            two,
            one["zos"].values,
            {"standard_name": "sea_surface_height_above_geoid", "units": "m", "long_name": "Sea Surface Height"},
        ),
        "sozotaux": (
            two,
            one["tauu"].values,
            {"standard_name": "surface_downward_x_stress", "units": "N/m2", "long_name": "Wind Stress along i-axis"},
        ),
        "sometauy": (
            two,
            one["tauv"].values,
            {"standard_name": "surface_downward_y_stress", "units": "N/m2", "long_name": "Wind Stress along j-axis"},
        ),
    }
    if with_sst:
        v["sosstsst"] = (
            two,
            one["sst"].values + off,
            {"standard_name": "sea_surface_temperature", "units": tu, "long_name": "Sea Surface Temperature"},
        )
    if with_3d:
        v["votemper"] = (
            temp.dims,
            temp.values + off,
            {"standard_name": "sea_water_potential_temperature", "units": tu, "long_name": "Temperature"},
        )
        v["vosaline"] = (
            temp.dims,
            _salinity(temp),
            {"standard_name": "sea_water_salinity", "units": "PSU", "long_name": "Salinity"},
        )
    ds = xr.Dataset(
        v,
        coords={
            "time_counter": ("time_counter", _one(t)["time"].values, {"standard_name": "time", "axis": "T"}),
            "deptht": (
                "deptht",
                DEPTHT.copy(),
                {"units": "m", "positive": "down", "axis": "Z", "long_name": "Vertical T levels"},
            ),
            "nav_lat": (("y", "x"), lat2.astype(np.float32), {"standard_name": "latitude", "units": "degrees_north"}),
            "nav_lon": (("y", "x"), lon2.astype(np.float32), {"standard_name": "longitude", "units": "degrees_east"}),
        },
        attrs={
            "Conventions": "CF-1.1",
            "title": "synthetic ocean in ORAS5 / NEMO layout",
            "file_name": "oras5_1m.nc",
            "TimeStamp": "ocean.synthetic",
            "institution": "scimech (ORAS5-like)",
        },
    )
    ds["time_counter"].encoding.update(units="seconds since 1900-01-01 00:00:00", calendar="gregorian")
    if not with_3d:
        ds = ds.drop_vars("deptht")
    return ds


def mesh_mask(t: xr.Dataset, *, bottom: np.ndarray | None = None, depth=DEPTHT) -> xr.Dataset:
    """NEMO's ``mesh_mask.nc`` for :func:`oras5`'s grid: ``e1t`` / ``e2t`` (m) on ``(t, y, x)``, ``e3t_0`` (m)
    and the 3-D ``tmask`` (1 ocean, 0 land) on ``(t, z, y, x)``, ``tmaskutil`` on ``(t, y, x)``,
    ``gdept_1d`` on ``(t, z)``, ``nav_lat`` / ``nav_lon``.

    ``bottom``: the number of wet levels of each column ``(y, x)`` (default: every level of every ocean
    column); land columns (truth ``mask == 0``) have none. ``e3t_0`` is the thickness between the mid-points
    of the levels (the first from the surface)."""
    from ocean.constants import R_EARTH

    one = _one(t)
    lat, lon = one["lat"].values.astype(float), one["lon"].values.astype(float)
    dlat, dlon = np.deg2rad(np.diff(lat).mean()), np.deg2rad(np.diff(lon).mean())
    lat2, lon2 = np.meshgrid(lat, lon, indexing="ij")
    e1t = R_EARTH * np.cos(np.deg2rad(lat2)) * dlon
    e2t = np.full(lat2.shape, R_EARTH * dlat)
    z = np.asarray(depth, float)
    w = np.concatenate([[0.0], (z[1:] + z[:-1]) / 2, [z[-1] + (z[-1] - z[-2]) / 2]])
    e3 = np.diff(w)
    nz = len(z)
    wet = one["mask"].values.astype(bool)
    nlev = np.where(wet, nz if bottom is None else np.asarray(bottom), 0)
    tmask = (np.arange(nz)[:, None, None] < nlev[None]).astype(np.int8)
    g2, g3 = ("t", "y", "x"), ("t", "z", "y", "x")
    return xr.Dataset(
        {
            "e1t": (g2, e1t[None]),
            "e2t": (g2, e2t[None]),
            "e3t_0": (g3, np.broadcast_to(e3[:, None, None], tmask.shape)[None].copy()),
            "tmask": (g3, tmask[None]),
            "tmaskutil": (g2, tmask.max(0)[None]),
            "gdept_1d": (("t", "z"), z[None]),
        },
        coords={
            "nav_lat": (("y", "x"), lat2.astype(np.float32)),
            "nav_lon": (("y", "x"), lon2.astype(np.float32)),
            "nav_lev": ("z", z),
        },
        attrs={"title": "NEMO mesh_mask for the synthetic ORAS5-like grid"},
    )


def cmems(t: xr.Dataset, *, forcing: bool = True, with_currents: bool = True) -> xr.Dataset:
    """The truth as a Copernicus Marine GLORYS12-like product on ``(time, depth, latitude, longitude)`` (see
    the module doc). ``forcing``: add ``hfds``, ``tauuo``, ``tauvo`` (CMIP names and attributes), which the
    physics product lacks; ``with_currents``: ``uo`` / ``vo`` (analytic, :func:`currents`)."""
    one = _one(t)
    temp = column_temperature(one)
    dims3, dims2 = ("time", "depth", "latitude", "longitude"), ("time", "latitude", "longitude")
    v = {
        "thetao": (
            dims3,
            temp.values,
            {
                "standard_name": "sea_water_potential_temperature",
                "units": "degrees_C",
                "long_name": "Temperature",
                "unit_long": "Degrees Celsius",
            },
        ),
        "so": (
            dims3,
            _salinity(temp),
            {
                "standard_name": "sea_water_salinity",
                "units": "1e-3",
                "long_name": "Salinity",
                "unit_long": "Practical Salinity Unit",
            },
        ),
        "zos": (
            dims2,
            one["zos"].values,
            {"standard_name": "sea_surface_height_above_geoid", "units": "m", "long_name": "Sea surface height"},
        ),
        "mlotst": (
            dims2,
            one["mld"].values,
            {
                "standard_name": "ocean_mixed_layer_thickness_defined_by_sigma_theta",
                "units": "m",
                "long_name": "Density ocean mixed layer thickness",
            },
        ),
    }
    if with_currents:
        u, vv = currents(one["lat"].values, one["lon"].values, one.sizes["time"])
        nz = len(DEPTHT)
        v["uo"] = (
            dims3,
            np.repeat(u[:, None], nz, 1),
            {"standard_name": "eastward_sea_water_velocity", "units": "m s-1"},
        )
        v["vo"] = (
            dims3,
            np.repeat(vv[:, None], nz, 1),
            {"standard_name": "northward_sea_water_velocity", "units": "m s-1"},
        )
    if forcing:
        v["hfds"] = (
            dims2,
            one["qnet"].values,
            {"standard_name": "surface_downward_heat_flux_in_sea_water", "units": "W m-2", "positive": "down"},
        )
        v["tauuo"] = (
            dims2,
            one["tauu"].values,
            {"standard_name": "surface_downward_eastward_stress", "units": "N m-2"},
        )
        v["tauvo"] = (
            dims2,
            one["tauv"].values,
            {"standard_name": "surface_downward_northward_stress", "units": "N m-2"},
        )
    ds = xr.Dataset(
        v,
        coords={
            "time": ("time", one["time"].values, {"standard_name": "time", "axis": "T"}),
            "depth": (
                "depth",
                DEPTHT.copy(),
                {"standard_name": "depth", "units": "m", "positive": "down", "axis": "Z", "long_name": "Depth"},
            ),
            "latitude": (
                "latitude",
                one["lat"].values,
                {"standard_name": "latitude", "units": "degrees_north", "axis": "Y"},
            ),
            "longitude": (
                "longitude",
                one["lon"].values,
                {"standard_name": "longitude", "units": "degrees_east", "axis": "X"},
            ),
        },
        attrs={
            "Conventions": "CF-1.6",
            "title": "synthetic ocean in Copernicus Marine GLORYS12 layout",
            "product": "GLOBAL_MULTIYEAR_PHY_001_030-like",
            "institution": "scimech (CMEMS-like)",
        },
    )
    ds["time"].encoding.update(units="hours since 1950-01-01", calendar="gregorian")
    return ds


def mom6(t: xr.Dataset, *, names: str = "cmor", with_currents: bool = True) -> xr.Dataset:
    """The truth as MOM6 output on a C grid: tracers on ``(yh, xh)``, ``uo`` / ``taux`` on east faces
    ``(yh, xq)``, ``vo`` / ``tauy`` on north faces ``(yq, xh)``, ``z_l`` layer centres (meter, positive down).
    ``names``: ``"cmor"`` (``thetao``, ``so``, ``tos``, ``zos``, ``hfds``, ``mlotst``) or ``"native"``
    (``temp``, ``salt``, ``SST``, ``SSH``, ``net_heat_surface``, ``MLD_003``).

    The face values of the wind stress are the T-point truth's mean with the neighbour across the face
    (so bringing them back to T points by averaging the two faces of a cell is not exact: within
    the curvature of the field); the currents are :func:`currents` at the face positions (exact on
    averaging). The last face (east of the last column, north of the last row) repeats its neighbour."""
    one = _one(t)
    lat, lon = one["lat"].values.astype(float), one["lon"].values.astype(float)
    latq = np.concatenate([(lat[1:] + lat[:-1]) / 2, [lat[-1] + (lat[-1] - lat[-2]) / 2]])
    lonq = np.concatenate([(lon[1:] + lon[:-1]) / 2, [lon[-1] + (lon[-1] - lon[-2]) / 2]])
    nt = one.sizes["time"]
    temp = column_temperature(one).rename(depth="z_l", lat="yh", lon="xh")

    def faces(a: np.ndarray, axis: int) -> np.ndarray:
        nxt = np.concatenate([np.take(a, np.arange(1, a.shape[axis]), axis), np.take(a, [-1], axis)], axis)
        return (a + nxt) / 2

    n = {
        "cmor": dict(T="thetao", S="so", sst="tos", ssh="zos", q="hfds", mld="mlotst"),
        "native": dict(T="temp", S="salt", sst="SST", ssh="SSH", q="net_heat_surface", mld="MLD_003"),
    }[names]
    h2, u2, v2 = ("time", "yh", "xh"), ("time", "yh", "xq"), ("time", "yq", "xh")
    d = {
        n["T"]: (
            temp.dims,
            temp.values,
            {
                "standard_name": "sea_water_potential_temperature",
                "units": "degC",
                "long_name": "Sea Water Potential Temperature",
            },
        ),
        n["S"]: (
            temp.dims,
            _salinity(temp),
            {"standard_name": "sea_water_salinity", "units": "psu", "long_name": "Sea Water Salinity"},
        ),
        n["sst"]: (h2, one["sst"].values, {"standard_name": "sea_surface_temperature", "units": "degC"}),
        n["ssh"]: (h2, one["zos"].values, {"standard_name": "sea_surface_height_above_geoid", "units": "m"}),
        n["q"]: (
            h2,
            one["qnet"].values,
            {"standard_name": "surface_downward_heat_flux_in_sea_water", "units": "W m-2", "positive": "down"},
        ),
        n["mld"]: (
            h2,
            one["mld"].values,
            {"standard_name": "ocean_mixed_layer_thickness_defined_by_sigma_t", "units": "m"},
        ),
        "taux": (u2, faces(one["tauu"].values, 2), {"standard_name": "surface_downward_x_stress", "units": "Pa"}),
        "tauy": (v2, faces(one["tauv"].values, 1), {"standard_name": "surface_downward_y_stress", "units": "Pa"}),
    }
    if with_currents:
        u, _ = currents(lat, lonq, nt)
        _, v = currents(latq, lon, nt)
        nz = len(DEPTHT)
        d["uo"] = (
            ("time", "z_l", "yh", "xq"),
            np.repeat(u[:, None], nz, 1),
            {"standard_name": "sea_water_x_velocity", "units": "m s-1"},
        )
        d["vo"] = (
            ("time", "z_l", "yq", "xh"),
            np.repeat(v[:, None], nz, 1),
            {"standard_name": "sea_water_y_velocity", "units": "m s-1"},
        )
    ds = xr.Dataset(
        d,
        coords={
            "time": ("time", one["time"].values, {"axis": "T", "long_name": "time"}),
            "z_l": (
                "z_l",
                DEPTHT.copy(),
                {"units": "meter", "positive": "down", "axis": "Z", "long_name": "Depth at cell center"},
            ),
            "xh": ("xh", lon, {"units": "degrees_east", "axis": "X", "long_name": "h point nominal longitude"}),
            "yh": ("yh", lat, {"units": "degrees_north", "axis": "Y", "long_name": "h point nominal latitude"}),
            "xq": ("xq", lonq, {"units": "degrees_east", "axis": "X", "long_name": "q point nominal longitude"}),
            "yq": ("yq", latq, {"units": "degrees_north", "axis": "Y", "long_name": "q point nominal latitude"}),
        },
        attrs={"title": "synthetic ocean in MOM6 layout", "grid_type": "regular", "associated_files": ""},
    )
    ds["time"].encoding.update(units="days since 0001-01-01", calendar="noleap")
    return ds


def cesm_pop(t: xr.Dataset) -> xr.Dataset:
    """The truth as a CESM POP2 history file: ``TEMP`` (degC), ``SALT`` (g/kg), ``SSH`` (cm), ``HMXL`` (cm),
    ``SHF`` (W/m^2), ``TAUX`` / ``TAUY`` (dyne/centimeter^2) on ``(time, [z_t,] nlat, nlon)``, ``z_t`` in
    centimeters (positive down), ``TLAT`` / ``TLONG`` 2-D, calendar ``noleap``."""
    one = _one(t).rename(lat="nlat", lon="nlon")
    temp = column_temperature(_one(t)).rename(depth="z_t", lat="nlat", lon="nlon")
    g = ("time", "nlat", "nlon")
    lat2, lon2 = np.meshgrid(_one(t)["lat"].values, _one(t)["lon"].values % 360, indexing="ij")
    time, bnds = month_times(one.sizes["time"], "noleap", stamp="middle")
    ds = xr.Dataset(
        {
            "TEMP": (temp.dims, temp.values, {"long_name": "Potential Temperature", "units": "degC"}),
            "SALT": (temp.dims, _salinity(temp), {"long_name": "Salinity", "units": "gram/kilogram"}),
            "SSH": (g, one["zos"].values * 100, {"long_name": "Sea Surface Height", "units": "centimeter"}),
            "HMXL": (g, one["mld"].values * 100, {"long_name": "Mixed-Layer Depth", "units": "centimeter"}),
            "SHF": (g, one["qnet"].values, {"long_name": "Total Surface Heat Flux, Including SW", "units": "watt/m^2"}),
            "TAUX": (
                g,
                one["tauu"].values * 10,
                {"long_name": "Windstress in grid-x direction", "units": "dyne/centimeter^2"},
            ),
            "TAUY": (
                g,
                one["tauv"].values * 10,
                {"long_name": "Windstress in grid-y direction", "units": "dyne/centimeter^2"},
            ),
        },
        coords={
            "time": ("time", time, {"long_name": "time", "bounds": "time_bound"}),
            "z_t": (
                "z_t",
                DEPTHT * 100,
                {"long_name": "depth from surface to midpoint of layer", "units": "centimeters", "positive": "down"},
            ),
            "TLAT": (("nlat", "nlon"), lat2, {"long_name": "array of t-grid latitudes", "units": "degrees_north"}),
            "TLONG": (("nlat", "nlon"), lon2, {"long_name": "array of t-grid longitudes", "units": "degrees_east"}),
        },
        attrs={"title": "synthetic ocean in CESM POP2 layout", "source": "CCSM POP2-like", "calendar": "noleap"},
    )
    ds["time_bound"] = (("time", "d2"), bnds)
    ds["time"].encoding.update(units="days since 0001-01-01 00:00:00", calendar="noleap")
    return ds


# --- variants -----------------------------------------------------------------------------------------
def set_units(ds: xr.Dataset, name: str, units: str) -> xr.Dataset:
    """``ds`` with ``name`` in ``units``: values converted with pint (cf-xarray's registry), attribute set."""
    import cf_xarray.units  # noqa: F401  (CF unit spellings in the registry)
    import pint_xarray  # noqa: F401

    da = ds[name]
    # pint reads no scale factor ("0.001") and not "degrees_C": the salinity scales are 1e-3 of a mass fraction
    # (a practical salinity of 35 is about 35 g/kg, 0.035 kg/kg), which is all a fixture's numbers need
    src = {"0.001": "g/kg", "1e-3": "g/kg", "PSU": "g/kg", "psu": "g/kg", "degrees_C": "degC"}.get(
        da.attrs.get("units"), da.attrs.get("units")
    )
    q = da.assign_attrs(units=src).pint.quantify(unit_registry=cf_xarray.units.units).pint.to(units).pint.dequantify()
    out = ds.copy()
    out[name] = q.assign_attrs({**da.attrs, "units": units})
    return out


def upward(ds: xr.Dataset, name: str, standard_name: str | None = None) -> xr.Dataset:
    """``ds`` with ``name`` given positive up: values negated, ``positive: up`` (and ``standard_name`` when
    given, e.g. ``surface_upward_heat_flux_in_air``). A coordinate stays a coordinate."""
    da = ds[name]
    attrs = {**da.attrs, "positive": "up"}
    if standard_name:
        attrs["standard_name"] = standard_name
        attrs.pop("long_name", None)
    if name in ds.coords:
        return ds.assign_coords({name: (da.dims, -da.values, attrs)})
    out = ds.copy()
    out[name] = (-da).assign_attrs(attrs)
    return out


def without(ds: xr.Dataset, name: str, *attrs: str) -> xr.Dataset:
    """``ds`` with the attributes ``attrs`` of ``name`` removed (e.g. ``without(ds, "lev", "units")``)."""
    out = ds.copy()
    new = {k: v for k, v in ds[name].attrs.items() if k not in attrs}
    if name in ds.coords:
        return out.assign_coords({name: (ds[name].dims, ds[name].values, new)})
    out[name] = ds[name].copy()
    out[name].attrs = new
    return out


def _time_dim(ds: xr.Dataset) -> str:
    return next(d for d in ("time", "time_counter") if d in ds.dims)


def write_netcdf(ds: xr.Dataset, path: str | Path) -> Path:
    """Write ``ds`` as netCDF4 with one time step per chunk (as CMIP6 and Copernicus Marine files are)."""
    path = Path(path)
    td = _time_dim(ds)
    enc = {}
    for v in ds.data_vars:
        if td in ds[v].dims and ds[v].dtype.kind == "f":
            enc[v] = {"chunksizes": tuple(1 if d == td else ds.sizes[d] for d in ds[v].dims), "zlib": True}
    ds.to_netcdf(path, encoding=enc)
    return path


def write_zarr(ds: xr.Dataset, path: str | Path) -> Path:
    """Write ``ds`` as a zarr (v3) store with one time step per chunk."""
    path = Path(path)
    td = _time_dim(ds)
    out = ds.chunk({td: 1})
    for v in out.variables:
        out[v].encoding.pop("chunks", None)
    out.to_zarr(path, zarr_format=3, consolidated=False)
    return path
