"""Mixed-layer depth, heat content and heat-budget terms from real ocean fields.

TEOS-10 through ``gsw``: practical salinity and potential temperature (as in NEMO / CMEMS
output: ``so``, ``thetao``) are converted to Absolute Salinity and Conservative
Temperature Theta (in-situ temperature, CF ``sea_water_temperature`` as HYCOM's ``water_temp``, with
``gsw.CT_from_t`` at each level's pressure; :func:`potential_from_insitu` gives its potential
temperature, ``gsw.pt0_from_t``); potential density sigma0 gives the mixed-layer depth by the threshold
criterion (``sigma0(h) = sigma0(10 m) + 0.03 kg m-3``, de Boyer Montegut et al. 2004).

MLHC is the integral over the mixed layer, ``MLHC = int_{-h}^{0} rho cp0 Theta dz``
(J m-2), with model levels treated as cells bounded half-way between level depths and
the cell containing ``h`` counted partially. (OceanCBM's public code takes the one level
bracketing the MLD instead; that is not the integral.)

Budget terms (W m-2) from mixed-layer means: advection by the resolved currents,
geostrophic advection from SSH, Ekman advection from wind stress, surface flux, entrainment,
lateral diffusion (:mod:`ocean.concepts`, the synthetic ocean's definitions) and the residual
``dMLHC/dt - sum(terms)``. Geostrophic and Ekman terms are 0 within ``equator_mask_deg`` of the
equator, where ``f -> 0``. NEMO's 2-D ``nav_lat`` / ``nav_lon`` are laid out as
:func:`ocean.data.from_nemo` does: a curvilinear grid is kept and differentiated with its scale
factors ``e1t`` / ``e2t`` (:mod:`ocean.curvilinear`).

Product names (ORAS5 / NEMO ``votemper``, ``vosaline``, ``deptht``, ...) are renamed with
:func:`ocean.variables.rename_to_study`; :func:`ocean.data.from_nemo` maps a whole product
onto the study's layout.
"""

from __future__ import annotations

import importlib.resources as resources

import gsw
import numpy as np
import xarray as xr

from . import concepts
from .constants import CP0, KAPPA, RHO0
from .errors import require_vars
from .horizontal import regular_grid
from .variables import rename_to_study

__all__ = [
    "salinity_kind",
    "temperature_kind",
    "potential_from_insitu",
    "teos10",
    "mixed_layer_depth",
    "mixed_layer_heat_content",
    "mixed_layer_mean",
    "level_bounds",
    "first_level_below",
    "budget_terms",
    "open_xoa_sample",
]


def _dim(da: xr.DataArray | xr.Dataset, *cands: str) -> str:
    for c in cands:
        if c in da.dims:
            return c
    raise KeyError(f"none of the dims {cands} in {tuple(da.dims)}")


def salinity_kind(so: xr.DataArray) -> str:
    """``"absolute"`` or ``"practical"``: what ``so`` holds, from its CF ``standard_name`` (the reader,
    :mod:`ocean.products`, sets ``sea_water_absolute_salinity`` for g/kg and mass fractions) else its units
    (``g kg-1`` / ``g/kg``: absolute; PSU, ``1``, ``1e-3``, ``0.001``: practical)."""
    std = so.attrs.get("standard_name", "")
    if std == "sea_water_absolute_salinity":
        return "absolute"
    if std == "sea_water_practical_salinity":
        return "practical"
    units = str(so.attrs.get("units", "")).replace(" ", "").lower()
    return "absolute" if units in ("gkg-1", "g/kg", "gram/kilogram", "gkg**-1") else "practical"


#: the kinds of 3-D temperature a product may hold, by CF standard name
TEMPERATURE_KINDS = {
    "sea_water_potential_temperature": "potential",
    "sea_water_conservative_temperature": "conservative",
    "sea_water_temperature": "in-situ",
}
#: how each kind becomes Conservative Temperature
_CT_FROM = {
    "potential": "gsw.CT_from_pt",
    "conservative": "as given",
    "in-situ": "gsw.CT_from_t at the level's pressure",
}
#: gsw's Standard Ocean Reference Salinity (g kg-1; TEOS-10, Millero et al. 2008): the Absolute Salinity a
#: conversion of in-situ temperature takes where the product gives no salinity
REFERENCE_SA = 35.16504


def temperature_kind(temp: xr.DataArray) -> str:
    """``"potential"``, ``"conservative"`` or ``"in-situ"``: what a 3-D temperature holds, from its CF
    ``standard_name`` (``sea_water_potential_temperature``, ``sea_water_conservative_temperature``,
    ``sea_water_temperature``: HYCOM's ``water_temp``, World Ocean Atlas, Argo); potential when it has none
    (what ``thetao`` / ``votemper`` hold in CMIP6, CMEMS and NEMO output)."""
    return TEMPERATURE_KINDS.get(temp.attrs.get("standard_name", ""), "potential")


def _pressure(temp: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    """Sea pressure (dbar) of each level (``gsw.p_from_z`` of the depth, positive down, at the latitude) and the
    latitude and longitude the conversions take (2-D ``nav_lat`` / ``nav_lon`` on a curvilinear grid)."""
    zdim = _dim(temp, "depth", "deptht", "lev", "z")
    if "nav_lat" in temp.coords and "nav_lon" in temp.coords:  # a curvilinear grid's 2-D positions
        lat, lon = temp["nav_lat"], temp["nav_lon"]
    else:
        latn = _dim(temp, "lat", "latitude", "y") if any(d in temp.dims for d in ("lat", "latitude", "y")) else None
        lat = temp[latn] if latn else temp["lat"]
        lon = temp[_dim(temp, "lon", "longitude", "x")]
    p = xr.apply_ufunc(gsw.p_from_z, -temp[zdim], lat, keep_attrs=False)
    return p, lat, lon


def _absolute_salinity(so: xr.DataArray | None, p, lon, lat) -> tuple[xr.DataArray | float, str]:
    """Absolute Salinity (g kg-1) and how it was had: as given, ``gsw.SA_from_SP`` of practical salinity, or
    :data:`REFERENCE_SA` where there is no salinity."""
    if so is None:
        return REFERENCE_SA, f"no salinity: gsw's reference Absolute Salinity {REFERENCE_SA} g kg-1"
    if salinity_kind(so) == "absolute":
        sa = so.copy(data=so.data)
        sa.attrs = {}
        return sa, "Absolute Salinity as given"
    sa = xr.apply_ufunc(gsw.SA_from_SP, so, p, lon, lat, dask="allowed", keep_attrs=False)
    sa.attrs = {}
    return sa, "gsw.SA_from_SP of practical salinity"


def potential_from_insitu(temp: xr.DataArray, so: xr.DataArray | None = None) -> xr.DataArray:
    """Potential temperature referenced to the sea surface (degree_Celsius) from in-situ temperature:
    ``gsw.pt0_from_t(SA, t, p)`` with ``p = gsw.p_from_z(-depth, lat)`` and ``SA = gsw.SA_from_SP(SP, p, lon, lat)``
    (Absolute Salinity as given; gsw's reference salinity where there is none, which moves pt0 by under 1e-3 K in
    the upper ocean). ``temp`` on a depth dim (m, positive down) with latitude / longitude coordinates."""
    p, lat, lon = _pressure(temp)
    sa, how = _absolute_salinity(so, p, lon, lat)
    pt = xr.apply_ufunc(gsw.pt0_from_t, sa, temp, p, dask="allowed", keep_attrs=False)
    return pt.transpose(*temp.dims).assign_attrs(
        units="degree_Celsius",
        standard_name="sea_water_potential_temperature",
        long_name="potential temperature (reference pressure 0 dbar)",
        comment=f"in-situ sea_water_temperature converted by gsw.pt0_from_t, p = gsw.p_from_z(-depth, lat), SA: {how}",
    )


def teos10(thetao: xr.DataArray, so: xr.DataArray) -> xr.Dataset:
    """Absolute Salinity, Conservative Temperature, sea pressure and sigma0 (gsw).

    Parameters
    ----------
    thetao
        Potential temperature (degree_Celsius; conservative temperature when its ``standard_name`` is
        ``sea_water_conservative_temperature``, in-situ temperature when it is ``sea_water_temperature``:
        :func:`temperature_kind`), with a depth dim (m, positive down) and ``lat`` / ``latitude`` and
        ``lon`` / ``longitude`` coordinates.
    so
        Practical salinity (PSU, "1e-3"), or Absolute Salinity (g kg-1) when its ``standard_name`` is
        ``sea_water_absolute_salinity`` or its units are g/kg (:func:`salinity_kind`).

    Returns
    -------
    xr.Dataset
        ``SA`` (g kg-1), ``CT`` (degree_Celsius), ``p`` (dbar), ``sigma0`` (kg m-3).
    """
    p, lat, lon = _pressure(thetao)
    sa, sa_how = _absolute_salinity(so, p, lon, lat)
    kind = temperature_kind(thetao)
    if kind == "conservative":
        ct = thetao.copy()
    elif kind == "in-situ":
        ct = xr.apply_ufunc(gsw.CT_from_t, sa, thetao, p, dask="allowed", keep_attrs=False)
    else:
        ct = xr.apply_ufunc(gsw.CT_from_pt, sa, thetao, dask="allowed", keep_attrs=False)
    ct.attrs = {}
    s0 = xr.apply_ufunc(gsw.sigma0, sa, ct, dask="allowed", keep_attrs=False)
    absolute = sa_how.startswith("Absolute")
    how = f"TEOS-10 (gsw) from {kind} temperature and " + ("Absolute Salinity" if absolute else "practical salinity")
    return xr.Dataset(
        {
            "SA": sa.assign_attrs(
                units="g kg-1",
                standard_name="sea_water_absolute_salinity",
                long_name="Absolute Salinity",
                comment=f"{'as given' if absolute else 'gsw.SA_from_SP'}; {how}",
            ),
            "CT": ct.assign_attrs(
                units="degree_Celsius",
                standard_name="sea_water_conservative_temperature",
                long_name="Conservative Temperature",
                comment=f"{_CT_FROM[kind]}; {how}",
            ),
            "p": p.assign_attrs(
                units="dbar",
                standard_name="sea_water_pressure_due_to_sea_water",
                long_name="sea pressure",
                comment="gsw.p_from_z of the level depth",
            ),
            "sigma0": s0.assign_attrs(
                units="kg m-3",
                standard_name="sea_water_sigma_theta",
                long_name="potential density anomaly referenced to 0 dbar",
                comment=f"gsw.sigma0; {how}",
            ),
        }
    )


def level_bounds(depth: np.ndarray) -> np.ndarray:
    """Cell interfaces (m, positive down) for level centres ``depth``: 0, mid-points, and
    the last centre plus half the last spacing. Shape ``(n + 1,)``."""
    d = np.asarray(depth, float)
    if d.ndim != 1 or d.size < 1 or np.any(np.diff(d) <= 0):
        raise ValueError(f"depth must be 1-D, positive down and increasing; got {d}.")
    last = d[-1] + (0.5 * (d[-1] - d[-2]) if d.size > 1 else d[-1])
    return np.concatenate([[0.0], 0.5 * (d[1:] + d[:-1]), [last]])


def _mld_column(s0: np.ndarray, depth: np.ndarray, threshold: float, ref: float) -> float:
    ok = np.isfinite(s0)
    if ok.sum() < 2:
        return np.nan
    d, s = depth[ok], s0[ok]
    if ref <= d[0]:
        s_ref = s[0]
    elif ref >= d[-1]:
        return np.nan
    else:
        s_ref = np.interp(ref, d, s)
    target = s_ref + threshold
    below = np.nonzero((d > ref) & (s >= target))[0]
    if below.size == 0:
        return float(d[-1])  # mixed to the bottom of the valid column
    k = below[0]
    # previous point: the reference depth itself or the level above
    d0, s0_ = (ref, s_ref) if k == 0 or d[k - 1] < ref else (d[k - 1], s[k - 1])
    if s[k] == s0_:
        return float(d[k])
    return float(d0 + (target - s0_) * (d[k] - d0) / (s[k] - s0_))


def mixed_layer_depth(sigma0: xr.DataArray, *, threshold: float = 0.03, ref_depth: float = 10.0) -> xr.DataArray:
    """Mixed-layer depth (m) by the sigma0 threshold criterion.

    The MLD is the depth, below ``ref_depth``, where sigma0 first exceeds its value at
    ``ref_depth`` (linearly interpolated) by ``threshold`` (kg m-3), interpolated
    linearly between levels. A column that never exceeds it is mixed to its deepest
    valid level. All-NaN columns (land) give NaN.
    """
    zdim = _dim(sigma0, "depth", "deptht", "lev", "z")
    depth = sigma0[zdim].values.astype(float)
    out = xr.apply_ufunc(
        _mld_column,
        sigma0,
        input_core_dims=[[zdim]],
        vectorize=True,
        kwargs={"depth": depth, "threshold": threshold, "ref": ref_depth},
        dask="parallelized",
        output_dtypes=[float],
        keep_attrs=False,
    )
    out = out.rename("mld")
    out.attrs = {
        "units": "m",
        "standard_name": "ocean_mixed_layer_thickness_defined_by_sigma_theta",
        "long_name": f"mixed-layer depth (sigma0 threshold {threshold} kg m-3 from {ref_depth} m)",
        "positive": "down",
        "comment": f"depth below {ref_depth} m where sigma0 first exceeds sigma0({ref_depth} m) + {threshold} "
        "kg m-3, linearly interpolated between levels (de Boyer Montegut et al. 2004); the "
        "deepest valid level when the column never does; sigma0 by TEOS-10 (gsw) when computed "
        "by ocean.budget.teos10 from thetao and so",
    }
    return out


def _ml_weights(depth: np.ndarray, mld: xr.DataArray, valid: xr.DataArray, zdim: str) -> xr.DataArray:
    """Thickness (m) of each cell inside [0, h], zero for NaN levels."""
    b = level_bounds(depth)
    top = xr.DataArray(b[:-1], dims=zdim, coords={zdim: depth})
    bot = xr.DataArray(b[1:], dims=zdim, coords={zdim: depth})
    w = (np.minimum(bot, mld) - top).clip(min=0.0)
    return w.where(valid, 0.0)


def mixed_layer_heat_content(
    ct: xr.DataArray, mld: xr.DataArray, *, rho: float | xr.DataArray = RHO0, cp: float = CP0
) -> xr.DataArray:
    """MLHC = integral from -h to 0 of rho cp Theta dz (J m-2).

    Parameters
    ----------
    ct
        Conservative Temperature (degree_Celsius) on depth levels (m, positive down).
    mld
        Mixed-layer depth h (m), broadcastable against ``ct`` without its depth dim.
    rho
        Density (kg m-3): the Boussinesq ``RHO0`` (default, as NEMO) or an in-situ field
        on the same levels (``gsw.rho``).
    cp
        Heat capacity (J kg-1 K-1), TEOS-10 ``CP0`` so that cp Theta is potential enthalpy.
    """
    zdim = _dim(ct, "depth", "deptht", "lev", "z")
    w = _ml_weights(ct[zdim].values, mld, np.isfinite(ct), zdim)
    integrand = (rho * cp * ct).fillna(0.0)
    out = (integrand * w).sum(zdim)
    out = out.where(np.isfinite(mld))
    return out.rename("mlhc").assign_attrs(
        units="J m-2",
        long_name="mixed-layer heat content",
        description="integral over the mixed layer of rho cp Theta dz",
    )


def mixed_layer_mean(field: xr.DataArray, mld: xr.DataArray) -> xr.DataArray:
    """Thickness-weighted mean of ``field`` over the mixed layer (units of ``field``)."""
    zdim = _dim(field, "depth", "deptht", "lev", "z")
    w = _ml_weights(field[zdim].values, mld, np.isfinite(field), zdim)
    tot = w.sum(zdim)
    out = (field.fillna(0.0) * w).sum(zdim) / tot.where(tot > 0)
    out.attrs = {
        "units": field.attrs.get("units", ""),
        "long_name": f"mixed-layer mean of {field.name}",
        "comment": "thickness-weighted over the cells in [0, h], the cell containing h counted partially",
    }
    if "standard_name" in field.attrs:
        out.attrs["standard_name"] = field.attrs["standard_name"]
    return out


def _first_below_column(temp: np.ndarray, mld: np.ndarray, *, depth: np.ndarray) -> np.ndarray:
    """Temperature at the first valid level deeper than ``mld`` (the deepest valid level when the
    column is mixed to its bottom); NaN for land or an unknown MLD. ``temp`` has depth last."""
    valid = np.isfinite(temp)
    below = valid & (depth > mld[..., None])
    deepest = (valid * np.arange(depth.size)).argmax(-1)
    idx = np.where(below.any(-1), below.argmax(-1), deepest)
    out = np.take_along_axis(temp, idx[..., None], -1)[..., 0]
    return np.where(valid.any(-1) & np.isfinite(mld), out, np.nan)


def first_level_below(field: xr.DataArray, mld: xr.DataArray) -> xr.DataArray:
    """``field`` at the first valid level deeper than ``mld`` (the deepest valid level where the column
    is mixed to its bottom; NaN for land or an unknown MLD). No attributes: label the result."""
    zdim = _dim(field, "depth", "deptht", "lev", "z")
    return xr.apply_ufunc(
        _first_below_column,
        field,
        mld,
        input_core_dims=[[zdim], []],
        kwargs={"depth": field[zdim].values.astype(float)},
        dask="parallelized",
        output_dtypes=[float],
        dask_gufunc_kwargs={"allow_rechunk": True},
        keep_attrs=False,
    )


def budget_terms(
    ds: xr.Dataset,
    *,
    threshold: float = 0.03,
    ref_depth: float = 10.0,
    equator_mask_deg: float = 5.0,
    kappa: float = KAPPA,
) -> xr.Dataset:
    """Mixed-layer heat budget from 3-D fields.

    Parameters
    ----------
    ds
        Needs ``thetao`` (potential temperature, degree_Celsius) and ``so`` (practical
        salinity) on ``(time, depth, lat, lon)``; uses ``uo``, ``vo`` (m s-1), ``zos``
        (m), ``tauu``, ``tauv`` (N m-2) and ``qnet`` (W m-2) when present. Names may be
        NEMO ones (``votemper``, ``vosaline``, ``deptht``, ``nav_lat``; see
        :data:`ocean.variables.PRODUCT_NAMES`) or CMEMS ones (``latitude`` / ``longitude``).

    Returns
    -------
    xr.Dataset
        On the product's own dims and coordinates (``latitude`` / ``longitude`` stay so; the study's
        names are used inside, ``attrs["renamed"]`` says which).
        ``mld`` (m), ``mlhc`` (J m-2), ``theta_ml`` (degree_Celsius) and the terms (W m-2):
        ``dmlhc_dt`` (centred in time), ``q_adv`` (resolved currents), ``q_geo``
        (geostrophic, from ``zos``), ``q_ekman`` (from wind stress), ``q_surf``, and with two or
        more time steps on a regular grid ``q_entr`` (with ``w_e``, m s-1, and ``t_below``: CT at the
        first level below the MLD), ``q_diff`` (diffusivity ``kappa``) and, with currents,
        ``q_mass = -rho0 cp0 T_ml div(h u)`` (:mod:`ocean.concepts`); ``residual`` = dmlhc_dt - the
        sum of the available terms (q_geo and q_ekman are parts of q_adv when currents are given).
    """
    ds, renamed = rename_to_study(ds)
    require_vars(ds, ["thetao", "so"], where="budget_terms")
    notes: list[str] = []
    # longitudes unwrapped and a periodic longitude marked on any grid; NEMO's nav_lat / nav_lon: a regular grid's
    # 1-D dims, or the curvilinear grid kept
    two_d = ds["lat"].ndim == 2
    ds = regular_grid(ds, notes)
    if two_d:
        renamed = {k: v for k, v in renamed.items() if v not in ("lat", "lon")}
    th = teos10(ds["thetao"], ds["so"])
    mld = mixed_layer_depth(th["sigma0"], threshold=threshold, ref_depth=ref_depth)
    mlhc = mixed_layer_heat_content(th["CT"], mld)
    theta_ml = mixed_layer_mean(th["CT"].rename("CT"), mld)
    ocean = np.isfinite(theta_ml)
    rc = RHO0 * CP0
    out = {"mld": mld, "mlhc": mlhc, "theta_ml": theta_ml}
    dTdx, dTdy = concepts.gradient(theta_ml, None)
    terms = []
    if "time" in mlhc.dims and mlhc.sizes["time"] > 1:
        out["dmlhc_dt"] = concepts.time_tendency(mlhc).assign_attrs(
            units="W m-2", long_name="tendency of MLHC", time_derivative="centred"
        )
    if "uo" in ds and "vo" in ds:
        u_ml = mixed_layer_mean(ds["uo"].rename("uo"), mld)
        v_ml = mixed_layer_mean(ds["vo"].rename("vo"), mld)
        out["q_adv"] = (-rc * mld * (u_ml * dTdx + v_ml * dTdy)).assign_attrs(
            units="W m-2", long_name="advection by mixed-layer mean currents", formula="-rho0 cp0 h u_ml . grad T_ml"
        )
        terms.append("q_adv")
    eq = {"equator_mask_deg": equator_mask_deg}
    if "zos" in ds:
        q_geo = concepts.geostrophic_advection(theta_ml, mld, ds["zos"], **eq)
        out["q_geo"] = q_geo.assign_attrs(long_name="geostrophic advection (diagnostic; part of q_adv)")
    if "tauu" in ds and "tauv" in ds:
        out["q_ekman"] = concepts.ekman_advection(theta_ml, mld, ds["tauu"], ds["tauv"], **eq)
        if "q_adv" not in terms:
            terms.append("q_ekman")
    if "qnet" in ds:
        out["q_surf"] = ds["qnet"].assign_attrs(units="W m-2", long_name="net surface heat flux")
        terms.append("q_surf")
    if "dmlhc_dt" in out:
        terms += _mixing_terms(out, th["CT"], u_ml if "q_adv" in out else None, v_ml if "q_adv" in out else None, kappa)
    res = xr.Dataset(out)
    if "dmlhc_dt" in res:
        known = sum((res[k].fillna(0.0) for k in terms), xr.zeros_like(res["dmlhc_dt"]))
        res["residual"] = (
            (res["dmlhc_dt"] - known)
            .where(ocean)
            .assign_attrs(
                units="W m-2",
                long_name="residual: vertical mixing and advection, what the terms leave out",
                terms=",".join(terms),
            )
        )
    res.attrs.update(
        {
            "rho0": RHO0,
            "cp0": CP0,
            "mld_threshold_kg_m3": threshold,
            "mld_ref_depth_m": ref_depth,
            "description": "mixed-layer heat budget from 3-D fields (TEOS-10 via gsw)",
        }
    )
    return _product_names(res, renamed, notes)


def _mixing_terms(out: dict, ct: xr.DataArray, u_ml, v_ml, kappa: float) -> list[str]:
    """``q_entr`` (with ``w_e``), ``q_diff`` and, with currents, ``q_mass`` into ``out``; the names of
    the budget terms added (:mod:`ocean.concepts`: the synthetic ocean's definitions)."""
    mld, theta_ml = out["mld"], out["theta_ml"]
    t_below = first_level_below(ct, mld).assign_attrs(units="degree_Celsius", long_name="CT just below the mixed layer")
    cur = {"u": u_ml, "v": v_ml} if u_ml is not None else {}
    ent = concepts.entrainment(mld, theta_ml, t_below, **cur)
    out.update(
        t_below=t_below,
        w_e=ent["w_e"],
        q_entr=ent["q_entr"],
        q_diff=concepts.lateral_diffusion(theta_ml, mld, kappa=kappa),
    )
    if not cur:
        return ["q_entr", "q_diff"]
    # the heat-content form of flux-form advection: -div(rho0 cp0 h u T) = q_adv + q_mass
    out["q_mass"] = (-RHO0 * CP0 * theta_ml * concepts.divergence(mld * u_ml, mld * v_ml)).assign_attrs(
        units="W m-2",
        long_name="mixed-layer mass convergence at T_ml (with q_adv: flux-form advection)",
        formula="q_mass = -rho0 cp0 T_ml div(h u); q_adv + q_mass = -div(rho0 cp0 h u T_ml)",
    )
    return ["q_entr", "q_diff", "q_mass"]


def _product_names(res: xr.Dataset, renamed: dict[str, str], grid_notes: list[str] = ()) -> xr.Dataset:
    """The result on the product's own dims and coordinates (``latitude``, ``time_counter``, ...): the
    study's names are used inside only; ``attrs["renamed"]`` says which were used, and how a 2-D grid
    was laid out (its dims stay ``lat`` / ``lon`` then)."""
    back = {new: old for old, new in renamed.items() if new in res.dims or new in res.coords}
    said = [f"{old} -> {new} -> {old}" for new, old in back.items()]
    res.attrs["renamed"] = "; ".join(
        (["computed on the study's names, returned on the product's: " + ", ".join(said)] if said else [])
        + [f"kept on the study's names: {n}" for n in grid_notes]
    )
    return res.rename(back) if back else res


def open_xoa_sample(name: str = "ibi-argo-7900573.nc") -> xr.Dataset:
    """Open a sample file shipped in the ``xoa`` wheel (CMEMS IBI by default), offline."""
    path = resources.files("xoa") / "data_samples" / name
    with resources.as_file(path) as p:
        return xr.open_dataset(p).load()
