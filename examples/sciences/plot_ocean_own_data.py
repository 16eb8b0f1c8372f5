"""
Ocean: a product of many files, read and checked
================================================

An ocean product comes as many files: ORAS5 one per variable and month, CMIP6 one per
variable and period. :func:`ocean.data.open_store` takes them as they were downloaded (a
folder, a glob or a list), combines them by variable and by time, maps the product's names
and units onto the study's layout, and computes the heat-budget terms the product lacks.

The files here are a small synthetic ocean written in ORAS5's (NEMO's) layout with
:func:`ocean.nemo.nemo_layout`, one file per variable per year, so what is read back can be
compared with the truth it was written from. Your own product goes where ``folder`` is.
"""

import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from ocean import data, synthetic
from ocean.nemo import nemo_layout

truth = synthetic.generate(n_members=1, years=2, ny=8, nx=12, seed=5)  # the heat budget, exact
product = nemo_layout(truth, rotate=False)  # votemper (K), somxl010, sohefldo, ... as ORAS5 names them

folder = Path(tempfile.mkdtemp()) / "oras5"
folder.mkdir()
grid = ["e1t", "e2t", "tmaskutil"]
for name in [v for v in product.data_vars if v not in grid]:
    for year, part in product[[name, *grid]].groupby("time_counter.year"):
        part.to_netcdf(folder / f"{name}_{year}.nc")
print(len(list(folder.iterdir())), "files, e.g.", sorted(p.name for p in folder.iterdir())[:3])

# %%
# One call reads the folder. What was read, from which variable and with which conversion,
# is said back in the dataset's attributes:
ds = data.open_store(folder)
print(ds.attrs["mapping"].replace("; ", "\n"))
print(json.loads(ds.attrs["reading"])["product"])

# %%
# The terms the product lacks are computed from what it holds (Ekman transport from the wind
# stress, entrainment from the mixed-layer depth, ...), here on month means of a coarse
# (3.75 degree) grid. How advection is discretised matters there: centred differences (the
# default) and upwind ones (the synthetic ocean's own scheme) part. Both, against the
# synthetic ocean's own terms:
upwind = data.open_store(folder, advection="upwind")
month = 14
fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
kw = {"cmap": "RdBu_r", "vmin": -150, "vmax": 150, "x": "nav_lon", "y": "nav_lat"}
truth["q_ekman"].isel(member=0, time=month).plot(ax=axes[0], **(kw | {"x": "lon", "y": "lat"}))
upwind["q_ekman"].isel(member=0, time=month).plot(ax=axes[1], **kw)
axes[0].set_title("Ekman heat flux, the synthetic truth", fontsize="medium")
axes[1].set_title("computed from the files read (upwind)", fontsize="medium")
terms = ["q_surf", "q_ekman", "q_geo", "q_entr", "q_diff", "dmlhc_dt"]
for k, (label, read) in enumerate({"centred (default)": ds, "upwind": upwind}.items()):
    errors = []
    for v in terms:
        a, b = read[v].values, truth[v].values
        ok = np.isfinite(a) & np.isfinite(b)
        errors.append(np.sqrt(np.mean((a[ok] - b[ok]) ** 2)) / np.sqrt(np.mean(b[ok] ** 2)))
    axes[2].barh(np.arange(len(terms)) + 0.4 * k, errors, height=0.4, label=label)
    print(f"{label:18s}", "  ".join(f"{v} {e:.3f}" for v, e in zip(terms, errors)))
axes[2].set_yticks(np.arange(len(terms)) + 0.2, terms)
axes[2].set(xlabel="rms error / rms truth", title="every budget term, all months")
axes[2].legend(fontsize="small")
fig.tight_layout()
