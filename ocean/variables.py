"""The variables of the ocean study: names, roles, CF units and attributes, and the names
ocean products give them.

One table serves every module that reads or writes ocean data (:mod:`ocean.synthetic`
writes these variables, :mod:`ocean.data` checks and reads them, :mod:`ocean.budget`
computes them from 3-D fields), so a name or a unit is defined once.

Layout of the study (``docs/ocean.md``): dims ``(member, time, lat, lon)`` on a regular
lat-lon grid, a ``mask`` ``(lat, lon)`` with 1 = ocean; inputs :data:`INPUTS`, budget
concepts :data:`CONCEPTS` (W m-2; :data:`PRESCRIBED` are supervised, ``q_hidden`` never),
target ``dmlhc_dt`` (W m-2) or ``mlhc`` (J m-2), each with the CF ``units`` of
:data:`VAR_ATTRS`.

:data:`PRODUCT_NAMES` maps ORAS5 / NEMO and CMEMS / CMIP names onto these (3-D fields keep
their CMEMS names: ``thetao`` potential temperature, ``so`` practical salinity, ``uo``,
``vo`` currents, on ``depth`` in m, positive down).
"""

from __future__ import annotations

from collections.abc import Mapping

import xarray as xr

__all__ = [
    "DIMS",
    "INPUTS",
    "CONCEPTS",
    "PRESCRIBED",
    "TARGET",
    "VAR_ATTRS",
    "EXPECTED_UNITS",
    "UNIT_ALIASES",
    "PRODUCT_NAMES",
    "PLAUSIBLE",
    "TEMPERATURES",
    "STANDARD_NAMES",
    "FIELD_UNITS",
    "UPWARD",
    "DOWNWARD",
    "ENSEMBLE_DIMS",
    "units_ok",
    "product_names_of",
    "rename_to_study",
]

DIMS = ("member", "time", "lat", "lon")
INPUTS = ("sst", "zos", "tauu", "tauv", "qnet", "mld", "t_sub")
CONCEPTS = ("q_surf", "q_ekman", "q_geo", "q_entr", "q_diff", "q_hidden")
PRESCRIBED = ("q_surf", "q_ekman", "q_geo", "q_entr", "q_diff")
TARGET = "mlhc"
#: variables in degree_Celsius (read from K when a product stores kelvin)
TEMPERATURES = ("sst", "t_sub", "thetao")

VAR_ATTRS: dict[str, dict[str, str]] = {
    "sst": {
        "units": "degree_Celsius",
        "standard_name": "sea_surface_temperature",
        "long_name": "mixed-layer (sea surface) temperature",
    },
    "zos": {"units": "m", "standard_name": "sea_surface_height_above_geoid", "long_name": "sea surface height"},
    "tauu": {"units": "N m-2", "standard_name": "surface_downward_eastward_stress", "long_name": "zonal wind stress"},
    "tauv": {
        "units": "N m-2",
        "standard_name": "surface_downward_northward_stress",
        "long_name": "meridional wind stress",
    },
    "qnet": {
        "units": "W m-2",
        "standard_name": "surface_downward_heat_flux_in_sea_water",
        "long_name": "net surface heat flux",
    },
    "mld": {
        "units": "m",
        "standard_name": "ocean_mixed_layer_thickness_defined_by_sigma_theta",
        "long_name": "mixed-layer depth",
    },
    "t_sub": {
        "units": "degree_Celsius",
        "standard_name": "sea_water_conservative_temperature",
        "long_name": "temperature just below the mixed layer",
    },
    "mlhc": {
        "units": "J m-2",
        "long_name": "mixed-layer heat content, integral of rho0 cp0 Theta dz over the mixed layer",
    },
    "dmlhc_dt": {"units": "W m-2", "long_name": "tendency of mixed-layer heat content over the time step"},
    "q_surf": {"units": "W m-2", "long_name": "surface heat flux term of the MLHC budget"},
    "q_ekman": {"units": "W m-2", "long_name": "Ekman advection term of the MLHC budget"},
    "q_geo": {"units": "W m-2", "long_name": "geostrophic advection term of the MLHC budget"},
    "q_entr": {"units": "W m-2", "long_name": "entrainment / detrainment term of the MLHC budget"},
    "q_diff": {"units": "W m-2", "long_name": "horizontal diffusion term of the MLHC budget"},
    "q_hidden": {"units": "W m-2", "long_name": "hidden eddy-driven heat flux (never prescribed)"},
}
EXPECTED_UNITS: dict[str, str] = {k: v["units"] for k, v in VAR_ATTRS.items()}

#: bounds on an ocean input at ocean points, in the study's units, that catch a unit mix-up
#: (SST in K labelled degC, an MLD in cm or given positive up, a sea surface height in cm, a
#: wind stress in mN m-2) or a land fill value inside the mask, with what a value outside
#: suggests. They are wider than the real ocean's (SST -2..36 degC) because the synthetic
#: ocean, which has no sea ice, goes below freezing (-10 degC) and above 40 degC.
PLAUSIBLE: dict[str, tuple[float, float, str]] = {
    "sst": (-30.0, 80.0, "kelvin labelled degree_Celsius? convert with K - 273.15"),
    "t_sub": (-30.0, 80.0, "kelvin labelled degree_Celsius? convert with K - 273.15"),
    "mld": (0.0, 6000.0, "a depth in cm, or positive up? give metres, positive down"),
    "qnet": (-3000.0, 3000.0, "a flux accumulated over the time step (J m-2)? divide by its seconds"),
    "tauu": (-10.0, 10.0, "a stress in mN m-2? give N m-2"),
    "tauv": (-10.0, 10.0, "a stress in mN m-2? give N m-2"),
    "zos": (-10.0, 10.0, "a height in cm or mm? give metres"),
}

#: accepted spellings of each CF unit
UNIT_ALIASES: dict[str, set[str]] = {
    "degree_Celsius": {
        "degree_Celsius",
        "degrees_Celsius",
        "degC",
        "degrees_C",
        "deg_C",
        "deg C",
        "celsius",
        "Celsius",
        "°C",
    },
    "W m-2": {"W m-2", "W/m2", "W m**-2", "W/m^2", "W.m-2"},
    "N m-2": {"N m-2", "N/m2", "N m**-2", "Pa", "N/m^2"},
    "J m-2": {"J m-2", "J/m2", "J m**-2", "J/m^2"},
    "m": {"m", "meter", "meters", "metre", "metres"},
}

#: CF standard names (CF standard name table v84) of each quantity the study reads, in order of preference:
#: the reader (:mod:`ocean.products`) finds a product's variable by these through cf_xarray before any name
STANDARD_NAMES: dict[str, tuple[str, ...]] = {
    "sst": (
        "sea_surface_temperature",
        "sea_surface_skin_temperature",
        "sea_surface_subskin_temperature",
        "sea_surface_foundation_temperature",
    ),
    "zos": ("sea_surface_height_above_geoid", "sea_surface_height_above_mean_sea_level", "sea_surface_height"),
    "tauu": (
        "surface_downward_eastward_stress",
        "surface_downward_x_stress",
        "surface_upward_eastward_stress",
        "surface_upward_x_stress",
    ),
    "tauv": (
        "surface_downward_northward_stress",
        "surface_downward_y_stress",
        "surface_upward_northward_stress",
        "surface_upward_y_stress",
    ),
    "qnet": (
        "surface_downward_heat_flux_in_sea_water",
        "surface_net_downward_total_heat_flux",
        "surface_upward_heat_flux_in_air",
        "surface_net_upward_total_heat_flux",
        "surface_upward_heat_flux_in_sea_water",
    ),
    "mld": (
        "ocean_mixed_layer_thickness_defined_by_sigma_theta",
        "ocean_mixed_layer_thickness_defined_by_sigma_t",
        "ocean_mixed_layer_thickness_defined_by_temperature",
        "ocean_mixed_layer_thickness",
    ),
    # in-situ temperature last (HYCOM's water_temp, WOA, Argo): converted to potential by the reader (gsw.pt0_from_t)
    "thetao": ("sea_water_potential_temperature", "sea_water_conservative_temperature", "sea_water_temperature"),
    "so": ("sea_water_salinity", "sea_water_practical_salinity", "sea_water_absolute_salinity"),
    "uo": ("sea_water_x_velocity", "eastward_sea_water_velocity"),
    "vo": ("sea_water_y_velocity", "northward_sea_water_velocity"),
    "mask": ("sea_binary_mask",),
}
#: standard names whose vertical direction is up or down (a flux or stress positive into the sea is the
#: study's convention): an upward one is negated, and a ``positive`` attribute that says otherwise is refused
UPWARD = frozenset(n for names in STANDARD_NAMES.values() for n in names if "_upward_" in n)
DOWNWARD = frozenset(n for names in STANDARD_NAMES.values() for n in names if "_downward_" in n)
#: the units the study works in, for the fields the reader converts (pint spellings; the 2-D fields' CF units
#: are :data:`EXPECTED_UNITS`)
FIELD_UNITS: dict[str, str] = {
    "sst": "degree_Celsius",
    "t_sub": "degree_Celsius",
    "thetao": "degree_Celsius",
    "zos": "m",
    "mld": "m",
    "tauu": "N m-2",
    "tauv": "N m-2",
    "qnet": "W m-2",
    "uo": "m s-1",
    "vo": "m s-1",
    "depth": "m",
}
#: dims that hold ensemble members (CF ``standard_name: realization``, CMIP6 / intake-esm, ECMWF): read as the
#: study's ``member`` dim
ENSEMBLE_DIMS = ("realization", "member_id", "number", "ensemble", "ens", "member")

#: ORAS5 / NEMO and CMEMS / CMIP names -> names of the study (first match wins when a
#: product has two, e.g. ``somxl010`` over ``somxl030``)
PRODUCT_NAMES: dict[str, str] = {
    # 2-D fields
    "somxl010": "mld",  # NEMO mixed-layer depth, sigma0 threshold 0.01 kg m-3
    "somxl030": "mld",  # threshold 0.03 kg m-3
    "mlotst": "mld",  # CMEMS / CMIP
    "sossheig": "zos",
    "sosstsst": "sst",
    "tos": "sst",
    "sosaline": "sss",
    "sohefldo": "qnet",
    "hfds": "qnet",
    "sozotaux": "tauu",
    "tauuo": "tauu",
    "sometauy": "tauv",
    "tauvo": "tauv",
    "sowsc": "wsc",
    "tmaskutil": "mask",
    # MOM6 (native names) and CESM POP2 history files
    "SST": "sst",
    "SSH": "zos",
    "MLD_003": "mld",
    "HMXL": "mld",
    "net_heat_surface": "qnet",
    "SHF": "qnet",
    "taux": "tauu",
    "TAUX": "tauu",
    "tauy": "tauv",
    "TAUY": "tauv",
    # 3-D fields (kept under their CMEMS names)
    "votemper": "thetao",
    "vosaline": "so",
    "vozocrtx": "uo",
    "vomecrty": "vo",
    "temp": "thetao",
    "TEMP": "thetao",
    "water_temp": "thetao",  # HYCOM (in-situ: standard_name sea_water_temperature, converted by the reader)
    "salt": "so",
    "SALT": "so",
    # coordinates and dims
    "time_counter": "time",
    "deptht": "depth",
    "lev": "depth",  # CMIP6 (out_name of olevel)
    "z_l": "depth",  # MOM6 layer centres
    "z_t": "depth",  # POP2 (centimetres)
    "nav_lat": "lat",
    "nav_lon": "lon",
    "latitude": "lat",
    "longitude": "lon",
    "xh": "lon",  # MOM6 tracer points
    "yh": "lat",
    "TLAT": "lat",  # POP2 T points
    "TLONG": "lon",
    "member_id": "member",
    "number": "member",
}


def units_ok(got: str | None, expected: str) -> bool:
    """Whether ``got`` is ``expected`` or an accepted spelling of it (see :data:`UNIT_ALIASES`)."""
    if got is None:
        return False
    return got == expected or got in UNIT_ALIASES.get(expected, set())


def product_names_of(name: str) -> list[str]:
    """The product names that map onto the study variable ``name`` (for error messages)."""
    return [k for k, v in PRODUCT_NAMES.items() if v == name]


def rename_to_study(
    ds: xr.Dataset, names: Mapping[str, str] | None = None, *, cf_units: bool = True
) -> tuple[xr.Dataset, dict[str, str]]:
    """Rename product variables and dims to the study's names; CF spellings of the units.

    Parameters
    ----------
    ds
        A dataset with ORAS5 / NEMO or CMEMS names (``votemper``, ``somxl010``, ``nav_lat``,
        ``time_counter``, ...), or already with the study's names (nothing is renamed then).
    names
        More ``{your name: study name}`` renames; they take precedence over
        :data:`PRODUCT_NAMES`.
    cf_units
        Respell the units attributes the CF way (``False``: leave them as found, for a reader that
        converts them itself and says what it found).

    Returns
    -------
    (dataset, renamed)
        The renamed dataset (unit spellings made CF: ``degC`` -> ``degree_Celsius``,
        ``W/m2`` -> ``W m-2``, ...) and the ``{old: new}`` renames applied. A name whose
        target already exists in ``ds`` is left alone (the study's own variable wins).
    """
    table = {**(names or {}), **{k: v for k, v in PRODUCT_NAMES.items() if k not in (names or {})}}
    present = set(map(str, ds.variables)) | set(map(str, ds.dims))
    ren: dict[str, str] = {}
    taken = set(present)
    for old, new in table.items():
        if old in present and old != new and new not in taken:
            ren[old] = new
            taken.add(new)
    out = ds.rename(ren)
    for v in out.variables if cf_units else ():
        u = out[v].attrs.get("units")
        for cf, spellings in UNIT_ALIASES.items():
            if u in spellings and u != cf:
                out[v].attrs["units"] = cf
    return out, ren
