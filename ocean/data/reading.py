"""What the ocean reader read from a product, said back: the ocean's :class:`scimech.studies.reading.Reading`.

:func:`describe_product` names the product from its own attributes and layout (CMIP6's global
attributes, NEMO's ``nav_lat`` / ``time_counter``, Copernicus Marine's ``latitude`` / ``longitude``,
MOM6's ``xh`` / ``yh``, POP's ``TLAT`` / ``z_t``); :func:`say_back` completes the reading that
:func:`ocean.data.products.from_nemo` filled while it read (a row for every quantity the study needs: the
variable that served it, or how it was derived, or that it is missing; the mask);
:func:`reading_of` gives back the reading a mapped store keeps. :func:`ocean.data.products.inspect` reads a
file as ``scimech ocean study --data`` would, for ``scimech ocean inspect PATH``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Sequence
from pathlib import Path

import xarray as xr

from scimech.studies.reading import Reading

from ..variables import CONCEPTS, INPUTS, PRESCRIBED

__all__ = ["describe_product", "say_back", "reading_of", "product_words"]

#: how each quantity the study needs is made when the product does not give it (ocean.concepts, ocean.budget)
_DERIVED = {
    "sst": "thetao at the shallowest level",
    "mld": "sigma0 threshold depth (0.03 kg m-3 from 10 m; gsw, TEOS-10) of thetao, so",
    "t_sub": "thetao at the first level below mld",
    "q_surf": "qnet",
    "q_ekman": "-rho0 cp0 h u_ek . grad T, u_ek from tauu, tauv",
    "q_geo": "-rho0 cp0 h u_g . grad T, u_g from zos",
    "q_entr": "rho0 cp0 dh/dt (T_b or T) from mld, sst, t_sub",
    "q_diff": "rho0 cp0 kappa div(h grad T) from mld, sst",
    "mlhc": "rho0 cp0 mld sst",
    "dmlhc_dt": "time tendency of mlhc",
}


def describe_product(ds: xr.Dataset) -> str:
    """The product in words, from its global attributes and layout (``"CMIP6 Omon SOURCE r1i1p1f1 (mon)"``)."""
    a = ds.attrs
    names = set(map(str, ds.variables))
    title = f": {a['title']}" if a.get("title") else ""
    if a.get("mip_era") or a.get("table_id"):
        parts = [
            str(a.get(k)) for k in ("mip_era", "table_id", "source_id", "experiment_id", "variant_label") if a.get(k)
        ]
        return " ".join(parts) + (f" ({a['frequency']})" if a.get("frequency") else "") + " (CMIP, CMOR layout)"
    if {"nav_lat", "nav_lon"} & names or "time_counter" in names or {"votemper", "sossheig", "somxl010"} & names:
        return "NEMO / ORAS5 output (nav_lat / nav_lon, time_counter)" + title
    if {"TLAT", "TLONG", "z_t"} & names:
        return "CESM POP2 history file (TLAT / TLONG, z_t)" + title
    if {"xh", "yh"} <= names:
        return "MOM6 output (xh / yh tracer points" + (", xq / yq faces)" if {"xq", "yq"} & names else ")") + title
    if {"latitude", "longitude"} <= names:
        return "Copernicus Marine-style product (latitude / longitude / depth)" + title
    if {"member", "time", "lat", "lon"} <= set(map(str, ds.dims)):
        return "a dataset in the study's layout (member, time, lat, lon)" + title
    return "an ocean dataset" + title


def product_words(reading: Reading) -> str:
    """The product's short name for a report's sentences (``"CMIP6 Omon ..."``), from the reading."""
    return reading.product.split(" (")[0] if reading.product else "your product"


def say_back(out: xr.Dataset, reading: Reading, notes: Sequence[str] = (), given: Collection[str] = ()) -> Reading:
    """Complete ``reading`` from the mapped dataset ``out``: a row for each quantity the study needs that the
    reader did not find itself (given under the study's name, derived with how, or missing), the units it is
    used in, and the mask. ``given``: the study's names the product itself holds."""
    have = {r.quantity for r in reading.rows}
    for q in [*INPUTS, *PRESCRIBED, "mlhc", "dmlhc_dt"]:
        if q in have:
            continue
        if q in out.data_vars and q in given:
            units = out[q].attrs.get("units", "")
            reading.add(q, q, "name", units, units, "as given")
        elif q in out.data_vars:
            reading.add(
                q,
                _DERIVED.get(q, q),
                "derived",
                "",
                out[q].attrs.get("units", ""),
                "computed by ocean.concepts"
                if q in CONCEPTS or q in ("mlhc", "dmlhc_dt")
                else "computed from the 3-D fields",
            )
        else:
            reading.add(
                q, "", "missing", "", "", f"not in the product and not derivable ({_DERIVED.get(q, 'given only')})"
            )
    order = {
        q: i
        for i, q in enumerate([*INPUTS, *PRESCRIBED, "mlhc", "dmlhc_dt", "thetao", "so", "uo", "vo", "depth", "mask"])
    }
    reading.rows.sort(key=lambda r: order.get(r.quantity, len(order)))
    if "mask" in out and "ocean cells" not in reading.sections.get("mask", {}):
        n = int(out["mask"].sum())
        reading.fact("mask", "ocean cells", f"{n} of {out['mask'].size}")
        said = [s for s in notes if s.startswith("mask")]
        reading.sections.setdefault("mask", {}).setdefault("from", said[0] if said else "the product's mask")
    if "member" in out.dims:
        reading.sections.setdefault("dims", {}).setdefault("member", f"{out.sizes['member']}")
    return reading


def reading_of(store: xr.Dataset | str | os.PathLike) -> Reading | None:
    """The reading a store mapped by :func:`ocean.data.products.from_nemo` keeps (``attrs["reading"]``), or None
    (the synthetic ocean, a store in the study's layout written by hand)."""
    ds = store if isinstance(store, xr.Dataset) else xr.open_zarr(Path(store), consolidated=False)
    text = ds.attrs.get("reading")
    return Reading.from_dict(json.loads(text)) if text else None
