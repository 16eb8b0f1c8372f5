"""The chronological split's arithmetic without torch: the window ends each split keeps and the fewest
steps a record needs (:func:`steps_needed`), for :mod:`ocean.data.samples` and the checks before any work
(:func:`ocean.plan.check_record`, ``scimech ocean inspect``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["steps_needed"]


def _cut(n_time: int, window: int, lead: int, fractions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three splits' window end indices (possibly empty)."""
    ts = np.arange(window - 1, n_time - lead)
    gap = window + lead - 1
    n = len(ts)
    a = int(round(fractions[0] * n))
    b = int(round((fractions[0] + fractions[1]) * n))
    return ts[:a], ts[a + gap : b], ts[b + gap :]


def _enough(n_time: int, window: int, lead: int, fractions, train_min: int) -> bool:
    tr, va, te = _cut(n_time, window, lead, fractions)
    return len(va) > 0 and len(te) > 0 and len(tr) >= max(1, train_min)


def steps_needed(
    *, window: int = 6, lead: int = 1, fractions: Sequence[float] = (0.8, 0.1, 0.1), train_min: int = 1
) -> int:
    """The fewest time steps for which :func:`ocean.data.samples.chronological_split` gives non-empty validation and
    test splits and at least ``train_min`` training samples (a year of steps, for the training
    climatology of the target): the smallest ``n`` from which every record of ``n`` steps or more
    (up to ``n + 2 / min(fractions)``, where rounding no longer matters) splits so.

    Parameters
    ----------
    window, lead : int
        Input steps per sample and steps ahead of the forecast (in the product's own steps).
    fractions : sequence of 3 floats
        Train, validation and test shares.
    train_min : int
        The fewest training samples (window ends).
    """
    slack = int(np.ceil(2 / min(fractions)))
    n = window + lead
    while not all(_enough(m, window, lead, fractions, train_min) for m in range(n, n + slack + 1)):
        n += 1
    return n
