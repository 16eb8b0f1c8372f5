"""OceanCBM on gridded ocean data (xarray / zarr): a concept bottleneck forecast of
mixed-layer heat content (MLHC) through heat-budget concepts plus one free concept.

Modules
-------
constants   physical constants (TEOS-10 rho0, cp0, g, Omega, R_earth) with sources
variables   the study's variables: names, roles, CF units, and their ORAS5 / NEMO / CMEMS names
synthetic   a mixed-layer ocean whose heat budget closes exactly (incl. a hidden process)
budget      MLD, MLHC and budget terms from real model / reanalysis fields (gsw)
data        CF validation, zarr I/O, your own stores (from_nemo, open_store), train-only
            normalisation, windows, a torch Dataset
model       CPU-sized UNet encoder -> ConceptLayer(conv) -> 1x1 linear head
experiment  regimes x seeds: skill, concept fidelity, cross-seed consistency
heatwaves   Hobday et al. (2016) marine-heatwave detection for any time step
grid        land-aware finite differences on the sphere
report      the study report (scimech.report.Report)
plots, cli  figures and the ``scimech ocean`` commands
"""

from __future__ import annotations

__all__ = ["constants", "variables", "grid", "synthetic", "budget", "data", "model", "experiment", "heatwaves", "plots",
           "report", "cli"]
