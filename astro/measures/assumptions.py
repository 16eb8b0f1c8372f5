"""What the head study's verbs assumed about the model: scimech's model profile
(:func:`scimech.profile`) of the head sites the study ablated and patched, on the first batch
the verbs ran in each input signature (``"multimodal"``: the test galaxies with their image
tokens, which the ablations of the multimodal run and both runs of the patching saw;
``"photometry only"``: the image tokens dropped, which the ablations of the photometry-only run
saw). Measured once, after the verbs ran, on the model they ran on: what they measured already
(the autograd mode, whether two unchanged passes agree) comes from the profile's cache; what they
did not (each site's calls, shapes, dtype and layout, in-place writes, whether the rows are
independent galaxies) costs one pass and half a pass per signature, counted in ``passes``.

The facts travel as JSON in the first intervention chunk's attributes (:data:`ATTR`) and become
the study's ``site_profile`` dataset (``study/site_profile.nc``) and a table of the report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from scimech.capture.profile import profile_of
from scimech.capture.profiling import profile
from scimech.capture.sites import resolve_site

__all__ = ["ATTR", "RUNS", "measure_site_profile", "site_profile_dataset", "site_profile_table"]

#: attribute of an intervention chunk that carries the profile (JSON), set on the chunk starting at galaxy 0
ATTR = "site_profile"
#: the input signatures the verbs ran, in the order of the table
RUNS = ("multimodal", "photometry only")
#: the facts per site, as the report shows them (column -> heading)
COLUMNS = {
    "calls": "calls per pass",
    "shape": "shape of each call",
    "units": "head's units",
    "dtype": "dtype",
    "tolerance": "tolerance",
    "layout": "layout",
    "samples": "samples",
    "repeatable": "repeatable",
    "needs_grad": "needs grad",
    "in_place": "in place",
}
#: above this many rows the report shows one row per block where all its heads share the facts
MAX_ROWS = 16


def _shape_text(shapes: Sequence[Sequence[int]]) -> str:
    return "; ".join(" x ".join(str(int(n)) for n in s) for s in shapes)


def _units_text(index: Sequence[int] | None, width: int | None) -> str:
    if index is None:
        return "all"
    idx = [int(i) for i in index]
    run = idx == list(range(idx[0], idx[-1] + 1))
    sel = f"{idx[0]}-{idx[-1]}" if run and len(idx) > 1 else ", ".join(map(str, idx))
    return f"{sel} of {width}" if width else sel


def measure_site_profile(model, batches: Mapping[str, Mapping[str, Any]], sites: Sequence[str], forward) -> str:
    """The profile of ``sites`` on each of ``batches`` (run name -> the first batch the verbs ran
    in that input signature), as JSON for a chunk's :data:`ATTR`.

    Call it after the verbs, with their ``forward=``: the profile is cached per model, forward and
    input signature, so only what they did not measure costs passes (counted per run)."""
    runs = {}
    for run, batch in batches.items():
        before = profile_of(model, batch, forward).passes
        table = profile(model, dict(batch), list(sites), forward=forward)
        prof = table.attrs["profile"]
        rows = []
        for site, fact in table.iterrows():
            index = resolve_site(model, site).index
            width = fact["shapes"][0][-1] if fact["shapes"] and fact["shapes"][0] else None
            rows.append(
                {
                    "site": site,
                    "calls": int(fact["calls"]),
                    "shape": _shape_text(fact["shapes"]),
                    "units": _units_text(index, width),
                    "dtype": str(fact["dtype"]),
                    "tolerance": float(fact["tolerance"]),
                    "layout": str(fact["layout"]),
                    "layout_from": str(fact["layout_from"]),
                    "samples": str(fact["samples"]),
                    "repeatable": bool(fact["repeatable"]),
                    "needs_grad": bool(fact["needs_grad"]),
                    "in_place": bool(fact["in_place"]),
                }
            )
        runs[run] = {"rows": int(prof.rows or 0), "passes": int(prof.passes - before), "sites": rows}
    return json.dumps({"runs": runs})


def site_profile_dataset(raw: xr.Dataset) -> xr.Dataset | None:
    """The ``site_profile`` dataset (run, site) from the concatenated intervention chunks (the
    first chunk's :data:`ATTR`); ``None`` where the chunks carry none (units saved before the
    study recorded it)."""
    text = raw.attrs.get(ATTR)
    if not text:
        return None
    runs = json.loads(text)["runs"]
    names = [r for r in RUNS if r in runs] + [r for r in runs if r not in RUNS]
    sites = [s["site"] for s in runs[names[0]]["sites"]]
    data = {}
    for col in (
        "calls",
        "shape",
        "units",
        "dtype",
        "tolerance",
        "layout",
        "layout_from",
        "samples",
        "repeatable",
        "needs_grad",
        "in_place",
    ):
        by_site = [{s["site"]: s[col] for s in runs[r]["sites"]} for r in names]
        data[col] = (("run", "site"), np.array([[row[s] for s in sites] for row in by_site]))
    ds = xr.Dataset(data, coords={"run": names, "site": sites})
    ds["rows"] = (
        "run",
        np.array([runs[r]["rows"] for r in names]),
        {"description": "galaxies of the batch the facts were measured on (the verbs' first batch)"},
    )
    ds["passes"] = (
        "run",
        np.array([runs[r]["passes"] for r in names]),
        {"description": "forward passes the profile added to the verbs' own (half a batch counts as one)"},
    )
    ds["calls"].attrs["description"] = "calls of the site per forward pass"
    ds["shape"].attrs["description"] = "shape of the site's tensor at each call (the model's own layout)"
    ds["units"].attrs["description"] = "the head's units on the last axis of that tensor"
    ds["tolerance"].attrs["description"] = "relative difference two unchanged passes may show in this dtype"
    ds["repeatable"].attrs["description"] = "two unchanged passes gave the same outputs"
    ds["needs_grad"].attrs["description"] = "the forward computes gradients itself (verbs run it under enable_grad)"
    ds["in_place"].attrs["description"] = "the model writes into the site's output after producing it"
    ds.attrs["description"] = (
        "what the verbs of the head study assumed about the model (scimech.profile) at the "
        "sites they intervened on, per input signature they ran"
    )
    blocks = raw.attrs.get("block", -1)
    ds.attrs["block"] = [int(b) for b in blocks] if np.ndim(blocks) else int(blocks)
    return ds


def _cell(v: xr.Dataset, col: str) -> Any:
    if col == "layout":
        return f"{v['layout'].item()} ({v['layout_from'].item()})"
    x = v[col].item()
    return ("yes" if x else "no") if isinstance(x, bool) else x


_HEAD = re.compile(r"^(?P<block>.*)\.heads\[(?P<head>\d+)\]$")


def site_profile_table(ds: xr.Dataset, max_rows: int = MAX_ROWS) -> tuple[pd.DataFrame, str]:
    """The report's table (columns ``run``, ``site`` and the facts, one row per run and site) and a
    line to go with it; with more than
    ``max_rows`` rows, the heads of a block that share every fact but their units are one row
    and the line says so."""
    rows = []
    for run in ds["run"].values:
        for site in ds["site"].values:
            v = ds.sel(run=run, site=site)
            rows.append({"run": str(run), "site": str(site)} | {COLUMNS[c]: _cell(v, c) for c in COLUMNS})
    table = pd.DataFrame(rows)
    passes = ", ".join(
        f"{int(p)} on the {r} batch of {int(n)} galaxies"
        for r, p, n in zip(ds["run"].values, ds["passes"].values, ds["rows"].values, strict=True)
    )
    line = (
        f"Measured once, with `scimech.profile` after the verbs, on the first batch they ran per input "
        f"signature: what they had measured (the autograd mode, two unchanged passes agreeing) came from the "
        f"profile's cache; the rest cost forward passes ({passes}; a pass that watches the sites and one "
        "on half the galaxies, counted as one, that checks they are independent)."
    )
    if len(table) > max_rows:
        facts = [c for c in COLUMNS.values() if c != COLUMNS["units"]]
        table["block"] = [m.group("block") if (m := _HEAD.match(s)) else s for s in table["site"]]
        merged, shared = [], []
        for (run, block), g in table.groupby(["run", "block"], sort=False):
            if len(g) > 1 and (g[facts].astype(str).nunique() == 1).all():
                merged.append({"run": run, "site": f"{block}.heads[{len(g)} heads]"} | g.iloc[0][facts].to_dict())
                shared.append(f"{block} ({run}, {len(g)} heads)")
            else:
                merged.extend(g.drop(columns=["block", COLUMNS["units"]]).to_dict("records"))
        table = pd.DataFrame(merged)
        if shared:
            line += " All heads of " + "; ".join(shared) + " share these facts (each head its own units)."
    return table.reset_index(drop=True), line
