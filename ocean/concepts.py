"""The study's prescribed concepts (W m-2) from a product's own 2-D fields, on a regular or a
curvilinear grid.

Each term is a tendency of the mixed-layer heat content ``MLHC = rho0 cp0 h T_ml`` (J m-2), with
the definitions and sign conventions of the synthetic ocean (:mod:`ocean.synthetic`), so that
``dMLHC/dt = q_surf + q_ekman + q_geo + q_entr + q_diff (+ what no concept names)``:

- ``q_surf  = Q_net`` (the net downward surface heat flux);
- ``q_ekman = -rho0 cp0 h u_ek . grad T_ml`` with ``u_ek = (tau x k) / (rho0 f h)``, i.e.
  ``-cp0 (tau_y dT/dx - tau_x dT/dy) / f``;
- ``q_geo   = -rho0 cp0 h u_g . grad T_ml`` with ``u_g = (g / f) k x grad(eta)``;
- ``q_entr  = rho0 cp0 w_e T_e``: the entrainment velocity ``w_e = dh/dt + div(h u)`` (``u`` the
  mixed-layer mean current, absent: 0) carries water at ``T_e = T_below`` into a deepening layer
  (``w_e > 0``) and leaves water at ``T_e = T_ml`` behind a shoaling one (``w_e < 0``). In the
  temperature equation the same process is ``rho0 cp0 h dT_ml/dt = ... - rho0 cp0 w_e (T_ml -
  T_below)`` where ``w_e > 0`` (0 elsewhere): the heat-content form adds ``rho0 cp0 T_ml w_e``,
  the change of ``h`` at fixed ``T_ml``;
- ``q_diff  = rho0 cp0 kappa div(h grad T_ml)``: lateral diffusion with diffusivity ``kappa``
  (the synthetic ocean's 2000 m2 s-1 by default), no flux through land (it only moves heat).

Horizontal derivatives are land-aware centred differences on the sphere, on xgcm
(:class:`ocean.horizontal.HorizontalGrid`): on the regular grid of the 1-D ``lat`` / ``lon`` (either
direction), or, where the fields carry NEMO's scale factors ``e1t`` / ``e2t`` as coordinates
(and ``nav_lat`` for ``f``), on that orthogonal curvilinear grid with vectors (currents, wind stress) in
grid-aligned components; periodic in longitude wherever the longitudes go once round the globe
(:func:`ocean.data.gridaxes.periodic_in_longitude`, from the coordinates' values, so every term sees the same
seam whatever attributes a computation dropped on the way; :func:`complete` writes the finding into
``lon.attrs['periodic']``, or ``nav_lon``'s, as a record); across a tripolar ORCA grid's north fold as NEMO
defines it (the row folded onto the last one, a vector's grid components in ``div(h u)`` with their sign reversed);
time derivatives are centred (``scheme="centred"``, for period means: the mean over period ``p``
of a tendency is ``(x[p+1] - x[p-1]) / (t[p+1] - t[p-1])`` to second order on even steps; on the
uneven steps of calendar months, the three-point derivative of ``xarray.DataArray.differentiate``,
``(a^2 x[p+1] + (b^2 - a^2) x[p] - b^2 x[p-1]) / (a b (a + b))`` with ``a``, ``b`` the steps before
and after, in seconds of the product's calendar; one-sided at the ends) or forward (``"forward"``, for snapshots: ``(x[n+1] - x[n]) / dt``, NaN at the last step).
The Ekman and geostrophic terms are set to 0 within ``equator_mask_deg`` of the equator, where
``f -> 0`` (said in their attrs).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .constants import CP0, KAPPA, RHO0, G, coriolis
from .data import timeaxis
from .data.gridaxes import mark_periodic
from .horizontal import HorizontalGrid

__all__ = [
    "time_tendency",
    "gradient",
    "divergence",
    "entrainment",
    "lateral_diffusion",
    "ekman_advection",
    "geostrophic_advection",
    "heat_content",
    "complete",
]

RC = RHO0 * CP0


def _latitude(da: xr.DataArray) -> xr.DataArray:
    """Degrees north at each point: 2-D ``nav_lat`` on a curvilinear grid, else ``lat``."""
    return da["nav_lat"] if "nav_lat" in da.coords else da["lat"]


def _on_grid(fn, *arrays: xr.DataArray, mask) -> xr.DataArray:
    """``fn(grid, *arrays)`` with ``grid`` the :class:`ocean.horizontal.HorizontalGrid` of the first array (its
    coordinates say regular or curvilinear, periodic or not); land (``mask`` 0, or NaN) as NaN; lazy stays lazy."""
    return HorizontalGrid.of(arrays[0]).apply(fn, *arrays, mask=mask)


def _seconds(time: xr.DataArray) -> np.ndarray:
    """Seconds after the first stamp, in the stamps' own calendar (datetime64, cftime or numbers as seconds)."""
    return timeaxis.seconds_since_start(time)


def time_tendency(da: xr.DataArray, scheme: str = "centred") -> xr.DataArray:
    """``d da / dt`` per second along ``time`` (see the module's note on ``scheme``), in any CF calendar;
    a lazy array chunked along time (one step per chunk, as CMIP6 and CMEMS files are) is rechunked
    into one time chunk first, since a difference needs the neighbouring steps."""
    if scheme not in ("centred", "forward"):
        raise ValueError(f"scheme must be 'centred' or 'forward'; got {scheme!r}.")
    secs = _seconds(da["time"])
    if da.chunks is not None and len(da.chunks[da.get_axis_num("time")]) > 1:
        da = da.chunk({d: -1 if d == "time" else "auto" for d in da.dims})  # other dims split to keep chunks small
    x = da.assign_coords(time=secs)
    if scheme == "centred":
        out = x.differentiate("time")
    else:
        out = (x.shift(time=-1) - x) / (x["time"].shift(time=-1) - x["time"])
    return out.assign_coords(time=da["time"])


def divergence(fx: xr.DataArray, fy: xr.DataArray, mask=None) -> xr.DataArray:
    """``div F = (1 / (R cos lat)) (d fx / d lon + d (fy cos lat) / d lat)`` (units of F per m)."""
    return _on_grid(lambda g, a, b: g.divergence(a, b), fx, fy, mask=mask)


def gradient(t: xr.DataArray, mask=None) -> tuple[xr.DataArray, xr.DataArray]:
    """``grad t`` per metre: east / north components on a regular grid, along i / j on a curvilinear one."""
    return (
        _on_grid(lambda g, a: g.derivative(a, "X"), t, mask=mask),
        _on_grid(lambda g, a: g.derivative(a, "Y"), t, mask=mask),
    )


def entrainment(
    h: xr.DataArray,
    t_ml: xr.DataArray,
    t_below: xr.DataArray,
    *,
    u: xr.DataArray | None = None,
    v: xr.DataArray | None = None,
    mask=None,
    scheme: str = "centred",
) -> xr.Dataset:
    """Entrainment velocity ``w_e`` (m s-1) and ``q_entr = rho0 cp0 w_e T_e`` (W m-2).

    ``h`` mixed-layer depth (m), ``t_ml`` / ``t_below`` the temperatures of the mixed layer and
    of the water just below it (degree_Celsius), ``u`` / ``v`` the mixed-layer mean current (m s-1;
    both or neither), all with dims (..., time, ..., lat, lon).
    """
    dhdt = time_tendency(h, scheme)
    w_e = dhdt
    formula_w = "w_e = dh/dt"
    if (u is None) != (v is None):
        raise ValueError("give both mixed-layer currents u and v, or neither.")
    if u is not None:
        w_e = dhdt + divergence(h * u, h * v, mask)
        formula_w = "w_e = dh/dt + div(h u), u the mixed-layer mean current"
    t_e = xr.where(w_e > 0, t_below, t_ml)
    q = (RC * w_e * t_e).transpose(*h.dims)
    w_e = (
        w_e.transpose(*h.dims)
        .rename("w_e")
        .assign_attrs(
            units="m s-1",
            long_name="entrainment velocity (positive: the mixed layer takes in water from below)",
            formula=formula_w,
            time_derivative=scheme,
        )
    )
    q = q.rename("q_entr").assign_attrs(
        units="W m-2",
        long_name="entrainment / detrainment term of the MLHC budget",
        formula="q_entr = rho0 cp0 w_e T_e; T_e = T_below where w_e > 0 (entrained water), T_ml where "
        "w_e <= 0 (water left behind); " + formula_w,
        temperature_form="rho0 cp0 h dT_ml/dt gets -rho0 cp0 max(w_e, 0) (T_ml - T_below); q_entr adds "
        "rho0 cp0 w_e T_ml, the change of h at fixed T_ml",
        rho0=RHO0,
        cp0=CP0,
        time_derivative=scheme,
    )
    return xr.Dataset({"w_e": w_e, "q_entr": q})


def lateral_diffusion(t_ml: xr.DataArray, h: xr.DataArray, *, kappa: float = KAPPA, mask=None) -> xr.DataArray:
    """``q_diff = rho0 cp0 kappa div(h grad T_ml)`` (W m-2), flux form, no flux through land."""
    q = RC * kappa * _on_grid(lambda g, t, hh: g.diffusion(t, hh), t_ml, h, mask=mask)
    return q.rename("q_diff").assign_attrs(
        units="W m-2",
        long_name="lateral diffusion term of the MLHC budget",
        formula="q_diff = rho0 cp0 kappa div(h grad T_ml), h averaged onto cell faces, no flux through land",
        kappa_m2_s=kappa,
        rho0=RHO0,
        cp0=CP0,
    )


def _beyond_equator(da: xr.DataArray, equator_mask_deg: float) -> xr.DataArray:
    return np.abs(_latitude(da)) >= equator_mask_deg


def _advection(t_ml: xr.DataArray, u: xr.DataArray, v: xr.DataArray, mask, advection: str) -> xr.DataArray:
    """``u . grad T_ml`` (K s-1): centred differences, or first-order upwind (the synthetic ocean's)."""
    if advection == "upwind":
        return _on_grid(lambda g, a, uu, vv: g.upwind(a, uu, vv), t_ml, u, v, mask=mask)
    if advection != "centred":
        raise ValueError(f"advection must be 'centred' or 'upwind'; got {advection!r}.")
    dtdx, dtdy = gradient(t_ml, mask)
    return u * dtdx + v * dtdy


def ekman_advection(
    t_ml: xr.DataArray,
    h: xr.DataArray,
    tauu: xr.DataArray,
    tauv: xr.DataArray,
    *,
    mask=None,
    equator_mask_deg: float = 5.0,
    advection: str = "centred",
) -> xr.DataArray:
    """``q_ekman = -rho0 cp0 h u_ek . grad T_ml``, ``u_ek = (tau x k) / (rho0 f h)`` (W m-2; 0 within
    ``equator_mask_deg``). ``advection``: ``"centred"`` differences or ``"upwind"``."""
    f = coriolis(_latitude(t_ml))
    u_ek, v_ek = tauv / (RHO0 * f * h), -tauu / (RHO0 * f * h)
    return _advective_term(
        t_ml,
        h,
        u_ek,
        v_ek,
        mask,
        advection,
        equator_mask_deg,
        "q_ekman",
        "Ekman advection term of the MLHC budget",
        "q_ekman = -rho0 cp0 h u_ek . grad T_ml, u_ek = (tau x k) / (rho0 f h)",
    )


def geostrophic_advection(
    t_ml: xr.DataArray,
    h: xr.DataArray,
    zos: xr.DataArray,
    *,
    mask=None,
    equator_mask_deg: float = 5.0,
    advection: str = "centred",
) -> xr.DataArray:
    """``q_geo = -rho0 cp0 h u_g . grad T_ml``, ``u_g = (g / f) k x grad(eta)`` (W m-2; 0 within
    ``equator_mask_deg``). ``advection``: ``"centred"`` differences or ``"upwind"``."""
    dedx, dedy = gradient(zos, mask)
    f = coriolis(_latitude(t_ml))
    u_g, v_g = -(G / f) * dedy, (G / f) * dedx
    return _advective_term(
        t_ml,
        h,
        u_g,
        v_g,
        mask,
        advection,
        equator_mask_deg,
        "q_geo",
        "geostrophic advection term of the MLHC budget",
        "q_geo = -rho0 cp0 h u_g . grad T_ml, u_g = (g / f) k x grad(zos)",
    )


def _advective_term(
    t_ml, h, u, v, mask, advection: str, equator_mask_deg: float, name: str, long_name: str, formula: str
):
    """``-rho0 cp0 h (u, v) . grad T_ml`` (W m-2), 0 within ``equator_mask_deg`` of the equator
    (where f -> 0 makes Ekman and geostrophic velocities undefined), labelled."""
    q = (-RC * h * _advection(t_ml, u, v, mask, advection)).where(_beyond_equator(t_ml, equator_mask_deg), 0.0)
    return (
        q.transpose(*t_ml.dims)
        .rename(name)
        .assign_attrs(
            units="W m-2",
            long_name=long_name,
            formula=formula,
            advection=advection,
            equator=f"0 within {equator_mask_deg} degrees of the equator (f -> 0)",
        )
    )


def heat_content(h: xr.DataArray, t_ml: xr.DataArray, scheme: str = "centred") -> xr.Dataset:
    """``mlhc = rho0 cp0 h T_ml`` (J m-2) and its tendency ``dmlhc_dt`` (W m-2)."""
    mlhc = (
        (RC * h * t_ml)
        .rename("mlhc")
        .assign_attrs(units="J m-2", long_name="mixed-layer heat content", formula="mlhc = rho0 cp0 h T_ml")
    )
    tend = (
        time_tendency(mlhc, scheme)
        .rename("dmlhc_dt")
        .assign_attrs(
            units="W m-2",
            long_name="tendency of mixed-layer heat content",
            formula="d(mlhc)/dt",
            time_derivative=scheme,
        )
    )
    return xr.Dataset({"mlhc": mlhc, "dmlhc_dt": tend})


def complete(
    ds: xr.Dataset,
    *,
    kappa: float = KAPPA,
    scheme: str = "centred",
    advection: str = "centred",
    equator_mask_deg: float = 5.0,
) -> tuple[xr.Dataset, list[str]]:
    """Add the concepts and target a study-layout dataset lacks but its fields allow.

    ``ds`` has dims ``(member, time, lat, lon)`` and a ``mask``; ``T_ml`` is ``sst`` (a
    well-mixed layer), ``h`` is ``mld``, ``T_below`` is ``t_sub``, and ``u_ml`` / ``v_ml`` (mixed-layer
    mean currents, optional) enter ``w_e``. What is computed (each with its formula in its attrs):
    ``q_surf`` from ``qnet``; ``mlhc`` and ``dmlhc_dt`` from ``mld``, ``sst``; ``q_ekman`` from
    ``tauu``, ``tauv``; ``q_geo`` from ``zos``; ``q_entr`` from ``t_sub``; ``q_diff`` (``kappa``).
    Variables already present are kept as given. Returns the dataset and the names computed.
    """
    ds = mark_periodic(ds)  # one grid for every term: the seam read from the longitudes, and said in their attrs
    mask = ds["mask"].values.astype(bool) if "mask" in ds else None
    ocean = ds["mask"].astype(bool) if "mask" in ds else True
    have = set(map(str, ds.data_vars))
    made: dict[str, xr.DataArray] = {}
    T, h = ds.get("sst"), ds.get("mld")
    if "q_surf" not in have and "qnet" in have:
        made["q_surf"] = (
            ds["qnet"]
            .rename("q_surf")
            .assign_attrs(units="W m-2", long_name="surface heat flux term of the MLHC budget", formula="q_surf = qnet")
        )
    if T is not None and h is not None:
        if "mlhc" not in have:
            made["mlhc"] = heat_content(h, T, scheme)["mlhc"]
        if "dmlhc_dt" not in have:
            made["dmlhc_dt"] = (
                heat_content(h, T, scheme)["dmlhc_dt"]
                if "mlhc" not in have
                else time_tendency(ds["mlhc"], scheme).assign_attrs(
                    units="W m-2", formula="d(mlhc)/dt", long_name="tendency of mixed-layer heat content"
                )
            )
        if "q_ekman" not in have and {"tauu", "tauv"} <= have:
            made["q_ekman"] = ekman_advection(
                T, h, ds["tauu"], ds["tauv"], mask=mask, advection=advection, equator_mask_deg=equator_mask_deg
            )
        if "q_geo" not in have and "zos" in have:
            made["q_geo"] = geostrophic_advection(
                T, h, ds["zos"], mask=mask, advection=advection, equator_mask_deg=equator_mask_deg
            )
        if "q_entr" not in have and "t_sub" in have:
            cur = {"u": ds["u_ml"], "v": ds["v_ml"]} if {"u_ml", "v_ml"} <= have else {}
            made["q_entr"] = entrainment(h, T, ds["t_sub"], mask=mask, scheme=scheme, **cur)["q_entr"]
        if "q_diff" not in have:
            made["q_diff"] = lateral_diffusion(T, h, kappa=kappa, mask=mask)
    for k, v in made.items():
        v = v.transpose(*T.dims) if T is not None and set(v.dims) == set(T.dims) else v
        ds[k] = v.where(ocean).assign_attrs({**v.attrs, "source": "computed by ocean.concepts.complete"})
    return ds, list(made)
