"""The synthetic ocean written as a NEMO product: NEMO names, 2-D coordinates, scale factors, no
budget terms, so that the path from a reanalysis to a report runs on a dataset whose truth is known.

:func:`nemo_layout` holds only what an ORAS5-like product gives: ``votemper`` (K) and ``vosaline``
on ``(time_counter, deptht, y, x)``, ``somxl010``, ``sohefldo``, ``sossheig``, ``sozotaux``,
``sometauy`` on ``(time_counter, y, x)``, 2-D ``nav_lat`` / ``nav_lon``, the mesh mask's ``e1t`` /
``e2t`` and ``tmaskutil``. ``votemper`` is the mixed-layer temperature down to the MLD and the
temperature below it (``t_sub``) deeper, so the MLD, ``sst`` and ``t_sub`` the study derives are the
generator's. With ``rotate=True`` the grid is turned by 90 degrees (the index ``x`` runs north,
``y`` west; wind stress in grid-aligned components), a curvilinear grid whose derivatives must go
through the scale factors. With ``tilt=ANGLE`` (and ``rotate=False``) it is rotated on the sphere: the
generator's latitudes and longitudes are read as those of a rotated pole (the sphere turned by
``ANGLE`` degrees about the axis through the domain's centre), so ``nav_lat`` / ``nav_lon`` are
geographic positions whose grid lines cross the meridians at about ``ANGLE`` degrees, the scale
factors are the generator's (the rotation keeps distances) and the wind stress is along the grid
lines. Its Coriolis parameter differs: the concepts take ``f`` at the geographic latitude
(``nav_lat``), the generator at its own, so ``q_ekman`` and ``q_geo`` are the generator's times
``f(generator latitude) / f(nav_lat)`` and every other term is the generator's. The budget terms and
the target are left out: :func:`ocean.data.open_store` computes them (:mod:`ocean.concepts`).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .constants import R_EARTH

__all__ = ["DEPTHT", "nemo_layout", "tilted_positions"]

#: model levels (m): below every synthetic MLD (< 210 m)
DEPTHT = np.array([0.5, 5.0, 15.0, 30.0, 60.0, 100.0, 200.0, 400.0])


def tilted_positions(
    lat: np.ndarray, lon: np.ndarray, tilt: float, centre: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """Geographic ``(lat, lon)`` (degrees) of points at ``(lat, lon)`` on a sphere turned by ``tilt`` degrees
    (counter-clockwise seen from outside) about the axis through ``centre`` (lat, lon)."""

    def unit(la, lo):
        la, lo = np.deg2rad(la), np.deg2rad(lo)
        return np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)])

    p, c = unit(np.asarray(lat, float), np.asarray(lon, float)), unit(*centre)
    c = c.reshape(3, *([1] * (p.ndim - 1)))
    a = np.deg2rad(tilt)
    q = (
        p * np.cos(a) + np.cross(c, p, axis=0) * np.sin(a) + c * (c * p).sum(0, keepdims=True) * (1 - np.cos(a))
    )  # Rodrigues' rotation
    return np.rad2deg(np.arcsin(np.clip(q[2], -1, 1))), np.rad2deg(np.arctan2(q[1], q[0]))


def nemo_layout(ds: xr.Dataset, *, member: int = 0, rotate: bool = True, tilt: float | None = None) -> xr.Dataset:
    """One member of a synthetic ocean (:func:`ocean.synthetic.generate`) as a NEMO product (``rotate``:
    the grid turned by 90 degrees; ``tilt``: rotated on the sphere by that many degrees, see the module doc)."""
    if tilt is not None and rotate:
        raise ValueError("tilt rotates the untransposed grid: pass rotate=False with it.")
    one = ds.isel(member=member, drop=True)
    east, north = one["tauu"], one["tauv"]
    dlat = np.deg2rad(float(np.diff(ds["lat"].values).mean()))
    dlon = np.deg2rad(float(np.diff(ds["lon"].values).mean()))
    if rotate:  # x (i) runs north, y (j) runs west: tau_i = tau_north, tau_j = -tau_east
        one = one.isel(lon=slice(None, None, -1)).rename(lat="x", lon="y").transpose("time", "y", "x")
        tau_i, tau_j = north.isel(lon=slice(None, None, -1)), -east.isel(lon=slice(None, None, -1))
        tau_i, tau_j = (t.rename(lat="x", lon="y").transpose("time", "y", "x") for t in (tau_i, tau_j))
    else:
        one = one.rename(lat="y", lon="x")
        tau_i, tau_j = (t.rename(lat="y", lon="x") for t in (east, north))
    nav_lat, nav_lon = xr.broadcast(one["y"], one["x"])
    lat2 = (nav_lon if rotate else nav_lat).transpose("y", "x").values
    lon2 = (nav_lat if rotate else nav_lon).transpose("y", "x").values
    e_lon = R_EARTH * np.cos(np.deg2rad(lat2)) * dlon
    if tilt is not None:  # the scale factors are the generator's; the positions turn
        lat2, lon2 = tilted_positions(lat2, lon2, tilt, (float(ds["lat"].mean()), float(ds["lon"].mean())))
    e_lat = np.full(lat2.shape, R_EARTH * dlat)
    e1t, e2t = (e_lat, e_lon) if rotate else (e_lon, e_lat)
    one = one.drop_vars(["x", "y"]).rename(time="time_counter")
    tau_i, tau_j = (t.drop_vars(["x", "y"]).rename(time="time_counter") for t in (tau_i, tau_j))
    depth = xr.DataArray(DEPTHT, dims="deptht")
    temp = xr.where(depth <= one["mld"], one["sst"], one["t_sub"]).transpose("time_counter", "deptht", "y", "x")
    grid2 = ("y", "x")
    return xr.Dataset(
        {
            "votemper": (temp.dims, temp.values + 273.15, {"units": "K", "long_name": "temperature"}),
            "vosaline": (temp.dims, np.where(np.isfinite(temp.values), 35.0, np.nan), {"units": "1e-3"}),
            "somxl010": (one["mld"].dims, one["mld"].values, {"units": "m"}),
            "sohefldo": (one["qnet"].dims, one["qnet"].values, {"units": "W/m2"}),
            "sossheig": (one["zos"].dims, one["zos"].values, {"units": "m"}),
            "sozotaux": (tau_i.dims, tau_i.values, {"units": "N/m2", "long_name": "wind stress along i"}),
            "sometauy": (tau_j.dims, tau_j.values, {"units": "N/m2", "long_name": "wind stress along j"}),
            "e1t": (grid2, e1t, {"units": "m"}),
            "e2t": (grid2, e2t, {"units": "m"}),
            "tmaskutil": (grid2, one["mask"].values.astype(np.int8)),
        },
        coords={
            "time_counter": one["time_counter"].values,
            "deptht": ("deptht", DEPTHT, {"units": "m", "positive": "down"}),
            "nav_lat": (grid2, lat2.astype(np.float32)),
            "nav_lon": (grid2, lon2.astype(np.float32)),
        },
        attrs={
            "title": "scimech synthetic ocean in NEMO layout",
            "source": "ocean.nemo.nemo_layout",
            "grid": "rotated by 90 degrees: x runs north, y west"
            if rotate
            else (
                f"rotated on the sphere by {tilt:g} degrees about the domain's centre"
                if tilt is not None
                else "regular"
            ),
        },
    )
