"""Verdicts on the reference study's findings, computed from the numbers with intervals.

Errors are compared per *trial* (the windows of one trial overlap in time, so they are not
independent), and over search seeds: :func:`cluster_bootstrap` resamples seeds and trials
with replacement (a two-level bootstrap) and returns a percentile interval of the mean
difference. A verdict follows from the interval, never from a threshold on the estimate
alone: a difference whose interval holds 0 is reported as undecided. The bootstrap is
:func:`scimech.analysis.stats.cluster_bootstrap` (generic: any study with clustered samples).
"""

from __future__ import annotations

import numpy as np

from scimech.analysis.stats import cluster_bootstrap, compare  # noqa: F401  (generic: their home is scimech.analysis.stats)

__all__ = ["cluster_bootstrap", "compare", "verdict_better"]


def verdict_better(c: dict) -> str:
    """``"a better"`` if the interval of ``a - b`` (errors: lower is better) lies below 0,
    ``"b better"`` if above, else ``"undecided"``."""
    lo, hi = c["diff_low"], c["diff_high"]
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "undecided"
    if hi < 0:
        return "a better"
    if lo > 0:
        return "b better"
    return "undecided"
