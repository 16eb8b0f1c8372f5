"""Product files laid out as each product is distributed, written small from :mod:`product_fixtures`.

Sources (the layouts each writer copies):

- **ESGF / CMIP6 DRS** (:func:`write_cmip6_drs`): one variable per file, long records split into time chunks,
  the file name ``<variable_id>_<table_id>_<source_id>_<experiment_id>_<member_id>_<grid_label>_<start>-<end>.nc``
  (CMIP6 Data Reference Syntax, "CMIP6 Global Attributes, DRS, Filenames, Directory Structure, and CV's",
  Taylor, Juckes, Balaji et al. 2018, https://goo.gl/v1drZl, section "File name template"; ESGF serves
  ``thetao_Omon_<model>_historical_r1i1p1f1_gn_185001-186912.nc``, ``..._187001-188912.nc`` ...).
- **ORAS5** (:func:`write_oras5_monthly`): one file per variable per month, named as the Copernicus Climate
  Data Store serves them (``votemper_control_monthly_highres_3D_201801_CONS_v0.1.nc``,
  ``sosstsst_control_monthly_highres_2D_201801_CONS_v0.1.nc``; CDS "ORAS5 global ocean reanalysis
  monthly data on ORCA1 grid", product user guide, and Zuo et al. 2019, Ocean Sci. 15, 779).
- **NEMO / XIOS** (:func:`write_nemo_run`, :func:`full_mesh_mask`): a run's ``<CONFIG>_1m_<start>_<end>_grid_T.nc``,
  ``..._grid_U.nc``, ``..._grid_V.nc`` (one file per grid and output period, the XIOS ``file_def`` name
  ``@expname@_@freq@_@startdate@_@enddate@`` plus the grid suffix), the global attribute
  ``description: ocean T grid variables``, ``time_counter`` with ``time_counter_bounds``, U fields on
  ``depthu`` and V fields on ``depthv`` at the U / V points; beside them ``mesh_mask.nc`` with the
  T / U / V / F positions and scale factors (``glamt`` .. ``gphif``, ``e1t`` .. ``e2f``) and masks (NEMO
  book v4, section 3 "space domain", and NEMO's ``field_def_nemo-oce.xml`` / ``file_def_nemo-oce.xml``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import product_fixtures as pf
import xarray as xr

__all__ = ["write_cmip6_drs", "write_oras5_monthly", "write_nemo_run", "full_mesh_mask", "drs_name"]

CMIP_VARIABLES = ("tos", "zos", "hfds", "tauuo", "tauvo", "mlotst", "thetao", "so")


def drs_name(var: str, ds: xr.Dataset, member: str = "r1i1p1f1", grid: str = "gr") -> str:
    """The CMIP6 DRS file name of ``ds`` (its first and last months)."""
    t = ds["time"].values
    span = f"{t[0].year:04d}{t[0].month:02d}-{t[-1].year:04d}{t[-1].month:02d}"
    return f"{var}_Omon_{ds.attrs['source_id']}_historical_{member}_{grid}_{span}.nc"


def write_cmip6_drs(
    product: xr.Dataset, folder: Path, *, chunk: int = 12, variables=CMIP_VARIABLES, member: str = "r1i1p1f1"
) -> list[Path]:
    """``product`` (:func:`product_fixtures.cmip6`) as ESGF serves it: one file per variable per ``chunk`` months."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    n = product.sizes["time"]
    for var in variables:
        for start in range(0, n, chunk):
            part = product[[var, "time_bnds"]].isel(time=slice(start, start + chunk))
            part.attrs = {**product.attrs, "variable_id": var, "variant_label": member}
            part["time"].encoding.update(product["time"].encoding)
            paths.append(folder / drs_name(var, part, member))
            part.to_netcdf(paths[-1])
    return paths


def write_oras5_monthly(product: xr.Dataset, folder: Path, variables=None) -> list[Path]:
    """``product`` (:func:`product_fixtures.oras5`) as the CDS serves ORAS5: one file per variable per month."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for var in variables or list(product.data_vars):
        kind = "3D" if "deptht" in product[var].dims else "2D"
        for i in range(product.sizes["time_counter"]):
            part = product[[var]].isel(time_counter=slice(i, i + 1))
            t = part["time_counter"].values[0]
            stamp = str(np.datetime64(t, "M")).replace("-", "")
            paths.append(folder / f"{var}_control_monthly_highres_{kind}_{stamp}_CONS_v0.1.nc")
            part["time_counter"].encoding.update(product["time_counter"].encoding)
            part.to_netcdf(paths[-1])
    return paths


def full_mesh_mask(truth: xr.Dataset) -> xr.Dataset:
    """:func:`product_fixtures.mesh_mask` with what a NEMO mesh mask also holds: the T / U / V / F positions
    (U half a cell east of T, V half a cell north, F both) and scale factors, and their masks."""
    mm = pf.mesh_mask(truth)
    lat, lon = mm["nav_lat"].values.astype(float), mm["nav_lon"].values.astype(float)
    dlat, dlon = float(np.diff(lat[:, 0]).mean()), float(np.diff(lon[0]).mean())
    g2 = ("t", "y", "x")
    mm["glamt"], mm["gphit"] = (g2, lon[None]), (g2, lat[None])
    for p, (sy, sx) in {"u": (0.0, 0.5), "v": (0.5, 0.0), "f": (0.5, 0.5)}.items():
        mm[f"glam{p}"], mm[f"gphi{p}"] = (g2, (lon + sx * dlon)[None]), (g2, (lat + sy * dlat)[None])
        mm[f"e1{p}"], mm[f"e2{p}"] = mm["e1t"], mm["e2t"]
        mm[f"{p}mask"], mm[f"e3{p}_0"] = mm["tmask"], mm["e3t_0"]
    mm["e3w_0"], mm["gdepw_1d"] = mm["e3t_0"], mm["gdept_1d"]
    return mm


def write_nemo_run(
    truth: xr.Dataset, folder: Path, *, years: int | None = None, mesh: bool = True, u_faces=None, v_faces=None
) -> list[Path]:
    """The truth as a NEMO run writes it (see the module doc): per year a grid_T file (votemper, vosaline,
    sosstsst, sossheig, somxl010, sohefldo), a grid_U file (vozocrtx on depthu, sozotaux) and a grid_V file
    (vomecrty on depthv, sometauy); ``u_faces`` / ``v_faces``: the currents at the U / V points, arrays
    ``(time, y, x)`` (the same at every level); ``mesh``: write mesh_mask.nc beside them."""
    folder.mkdir(parents=True, exist_ok=True)
    ds = pf.oras5(truth)
    n = ds.sizes["time_counter"]
    nz = ds.sizes["deptht"]
    u3 = np.repeat(np.asarray(u_faces)[:, None], nz, 1)
    v3 = np.repeat(np.asarray(v_faces)[:, None], nz, 1)
    grids = {
        "T": ds[["votemper", "vosaline", "sosstsst", "sossheig", "somxl010", "sohefldo"]],
        "U": xr.Dataset(
            {
                "vozocrtx": (("time_counter", "depthu", "y", "x"), u3, {"units": "m/s"}),
                "sozotaux": ds["sozotaux"],
            },
            coords={"depthu": ("depthu", ds["deptht"].values, {"units": "m", "positive": "down"})},
        ),
        "V": xr.Dataset(
            {
                "vomecrty": (("time_counter", "depthv", "y", "x"), v3, {"units": "m/s"}),
                "sometauy": ds["sometauy"],
            },
            coords={"depthv": ("depthv", ds["deptht"].values, {"units": "m", "positive": "down"})},
        ),
    }
    paths = []
    per = 12 if years is None else 12 * years
    for start in range(0, n, per):
        sl = slice(start, start + per)
        t = ds["time_counter"].values[sl]
        name = f"ORCA_1m_{str(t[0])[:10].replace('-', '')}_{str(t[-1])[:10].replace('-', '')}"
        for g, part in grids.items():
            part = part.isel(time_counter=sl).copy()
            tc = part["time_counter"].values
            part["time_counter_bounds"] = (("time_counter", "axis_nbounds"), np.stack([tc, tc], 1))
            part["time_counter"].attrs.update(bounds="time_counter_bounds")
            part["time_counter"].encoding.update(ds["time_counter"].encoding)
            part.attrs = {**ds.attrs, "description": f"ocean {g} grid variables", "name": f"{name}_grid_{g}"}
            paths.append(folder / f"{name}_grid_{g}.nc")
            part.to_netcdf(paths[-1])
    if mesh:
        paths.append(folder / "mesh_mask.nc")
        full_mesh_mask(truth).to_netcdf(paths[-1])
    return paths
