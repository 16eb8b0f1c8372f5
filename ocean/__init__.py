"""OceanCBM on gridded ocean data (xarray / zarr): a concept bottleneck forecast of
mixed-layer heat content (MLHC) through heat-budget concepts plus one free concept.

Modules
-------
constants   physical constants (TEOS-10 rho0, cp0, g, Omega, R_earth) with sources
variables   the study's variables: names, roles, CF units, and their ORAS5 / NEMO / CMEMS names
grid        land-aware finite differences on the sphere
curvilinear the same on NEMO's orthogonal curvilinear grids, with the scale factors e1t / e2t
synthetic   a mixed-layer ocean whose heat budget closes exactly (incl. a hidden process)
nemo        the synthetic ocean written as a NEMO product (only product variables)
budget      MLD, MLHC and budget terms from real model / reanalysis fields (gsw)
concepts    the prescribed concepts (q_surf, q_ekman, q_geo, q_entr, q_diff) and the target
            from a product's 2-D fields, with the synthetic ocean's definitions
data        the data layer, a subpackage whose names come in one import (``data.open_store``, ...):
  data.validation  the schema check (dims, mask, CF units, NaNs at ocean points)
  data.stores      zarr v3 stores: atomic writes, lazy reads
  data.products    your own files: variables by CF standard_name (cf_xarray), units (pint-xarray), signs,
                   salinity kinds and extra dims read onto the study's layout (from_nemo, open_store)
  data.files       a product's many files (a list, a glob, a folder, a NEMO run) combined lazily and checked
  data.timeaxis    the product's time axis: CF calendars (cftime), frequency, gaps, record length
  data.gridaxes    the product's horizontal grid (xgcm, xnemogcm): periodic, unwrapped, staggered, mesh mask
  data.reading     what was read, said back (scimech.studies.reading.Reading): `scimech ocean inspect`,
                   report openings
  data.samples     chronological splits, train-only normalisation, windows, a torch Dataset, the block
                   order and byte-bounded cache of a product larger than memory
  data.splits      the split's arithmetic without torch (the fewest steps a record needs)
model       CPU-sized UNet encoder -> ConceptLayer(conv) -> 1x1 linear head
heatwaves   Hobday et al. (2016) marine-heatwave detection for any time step

The study, one module per step (``scimech ocean study``; :mod:`ocean.study`):
settings    the study settings a --config file holds beyond the options
plan        StudyConfig, the sizes quick / medium / full, the checked settings, the Plan
training    one (regime, seed) unit: train (checkpointed) and keep its test predictions
run         the data (fingerprinted; stale results set aside) and every unit through
            scimech.run.parallel.map_units, resumable
evidence    the finished units analysed: skill, fidelity, cross-seed consistency, planted truth
recovery    planted truth vs what the study found: the table, the line and recovery.txt's text
findings    the reference findings with their verdicts
report      report.md / html and the outcome files; plots: the figures
study       OceanStudy (scimech.studies.contract.Study): the ``scimech ocean`` commands, plan -> run -> findings /
            planted truth -> report, the demo
experiment  the study's Python names in one import (StudyConfig, run_units, analyse, ...)

The data layer's old flat paths (``ocean.stores``, ``from ocean import products``, ...) give the
modules of :mod:`ocean.data`, with a DeprecationWarning, until scimech 0.3.0 (:mod:`scimech._moved`).
"""

from __future__ import annotations

from scimech._moved import install as _install_old_paths
from scimech._moved import moved_attribute as _moved_attribute

_install_old_paths()  # `import ocean.stores` (an old path): ocean.data.stores, with a warning

__all__ = [
    "constants",
    "variables",
    "grid",
    "curvilinear",
    "synthetic",
    "nemo",
    "budget",
    "concepts",
    "data",
    "model",
    "heatwaves",
    "settings",
    "plan",
    "training",
    "run",
    "evidence",
    "recovery",
    "findings",
    "report",
    "plots",
    "study",
    "experiment",
    "run_study",
]


def run_study(**options):
    """The OceanCBM study (regimes x seeds) from Python, as ``scimech ocean study`` runs it: :func:`scimech.studies.run_study`
    with ``"ocean"`` (its keywords are the command's options: ``scimech.studies.study_options("ocean")``).

    Examples
    --------
    >>> import ocean
    >>> result = ocean.run_study(out="runs/ocean/mine", seeds=[0], regimes=["mixed"], epochs=1, window=3, width=4,
    ...                       synth={"n_members": 1, "years": 4, "ny": 6, "nx": 8})  # doctest: +SKIP
    >>> print(result.report)  # doctest: +SKIP
    runs/ocean/mine/report.md
    >>> ocean.run_study(sizes="quick")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    scimech.errors.ConfigError: run_study('ocean'): no option sizes; did you mean size? ...
    """
    from scimech.studies import run_study as run  # lazy: `import ocean` stays light

    return run("ocean", **options)


def __getattr__(name: str):
    moved = _moved_attribute(__name__, name)  # `ocean.products`: ocean.data.products, with a warning
    if moved is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return moved
