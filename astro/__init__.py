"""astro: the AION-1 redshift head analysis on synthetic (or real) photometry and images.

Modules: :mod:`astro.synthetic` (galaxies with truth), :mod:`astro.catalog` (your Legacy
Survey DR10 catalogue and cut-outs), :mod:`astro.photoz` (classical
photo-z and metrics), :mod:`astro.models` (a small AION stand-in and the AION-1 adapter,
including its image codec), :mod:`astro.analysis` (the study), :mod:`astro.execution` (the
study as resumable Dask units), :mod:`astro.plots`, :mod:`astro.cli`.
"""

__all__ = ["constants", "synthetic", "catalog", "photoz", "analysis", "execution", "plots", "cli"]
