"""Is OceanCBM competent? Each regime's forecast against the classical forecasts of the target on the same
test months (:func:`ocean_competence`, the table the report opens with).

The yardsticks forecast the target ``y`` (the MLHC tendency, W m-2) ``lead`` steps after the last input
step ``t``, at every ocean point, from what is known at ``t``:

- **climatology**: the training split's mean of the target for the phase of the year of ``t + lead``
  (the unit's ``y_clim``, the forecast the study always scored);
- **persistence**: ``y(t)``;
- **damped persistence**: ``clim(t + lead) + a (y(t) - clim(t))``, with ``a`` per ocean point the
  least-squares regression of the anomaly ``lead`` steps later on the anomaly now over the training
  split (the lag-``lead`` autocorrelation, clipped to [0, 1]).

The score of a test sample (one member and month) is the squared error of the map, averaged over ocean
points; each regime's is the mean over its seeds. RMSE is the square root of their mean (the headline);
the anomaly correlation (ACC) is reported beside it. The bootstrap resamples blocks of consecutive
months of one member (neighbouring months are not independent; :mod:`ocean.recovery` does the same).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from scimech.studies.competence import Metric, competence, synthetic_world, your_product

from .plan import StudyConfig

__all__ = ["ocean_competence", "yardstick_forecasts", "world_of", "YARDSTICKS"]

YARDSTICKS = ("climatology", "persistence", "damped persistence")
#: training steps read at a time for the damped persistence's regression
YARDSTICK_BLOCK = 12
RMSE = Metric(
    "RMSE",
    lambda se: float(np.sqrt(np.mean(se))),
    units="W m-2",
    description="root mean squared error of the MLHC tendency",
)


def world_of(cfg: StudyConfig) -> str:
    """``"your product (<path>)"`` or ``"synthetic world (<members> members x <years> years on a NY x NX grid)"``."""
    if cfg.data:
        return your_product(Path(cfg.data).name if isinstance(cfg.data, str) else f"{len(cfg.data)} files")
    from .synthetic import SynthConfig

    syn = SynthConfig(**cfg.synth)
    return synthetic_world(f"{syn.n_members} members x {syn.years} years on a {syn.ny} x {syn.nx} grid")


def _issue_steps(unit: xr.Dataset, time: xr.DataArray, lead: int) -> np.ndarray:
    """The store's time index of each test sample's last input step (its valid time minus ``lead``)."""
    index = pd.Index(np.asarray(time.values))
    pos = index.get_indexer(np.asarray(unit["time"].values))
    if (pos < 0).any():
        raise ValueError("the test samples' times are not in the study's store: was the store rewritten since?")
    return pos - lead


def yardstick_forecasts(unit: xr.Dataset, store: str | Path, cfg: StudyConfig) -> dict[str, np.ndarray]:
    """``{yardstick: (sample, lat, lon) forecast in W m-2}`` of the unit's test samples, from the study's
    store ``store`` read with the split and the climatology the study trains and scores with.

    Examples
    --------
    >>> import dataclasses
    >>> from pathlib import Path
    >>> from ocean.experiment import StudyConfig, prepare_data, train_unit
    >>> cfg = StudyConfig(  # the smallest synthetic ocean: 1 member, 4 years, 8 x 8 points
    ...     synth={"n_members": 1, "years": 4, "ny": 8, "nx": 8, "n_eddies": 2},
    ...     window=2, epochs=1, width=4, regimes=["mixed"], seeds=[0], fractions=[0.6, 0.2, 0.2],
    ... )
    >>> store = prepare_data(cfg, Path("out"))
    >>> unit = train_unit(dataclasses.asdict(cfg), "mixed", 0, str(store), "checkpoints")
    >>> from ocean.experiment import yardstick_forecasts
    >>> forecasts = yardstick_forecasts(unit, store, cfg)
    >>> sorted(forecasts), forecasts["persistence"].shape == unit["y_true"].shape
    (['climatology', 'damped persistence', 'persistence'], True)
    """
    from . import data as odata
    from .training import at_phases, phase_means, study_split

    ds = odata.open_zarr(store, target=cfg.target)
    split = study_split(ds, cfg)
    target = ds[cfg.target].transpose("member", "time", "lat", "lon")  # lazy: read step by step below
    t = _issue_steps(unit, ds["time"], cfg.lead)
    member = np.asarray(unit["member"].values, int)
    train_next = split.train + cfg.lead
    clim, phase = phase_means(target, train_next)
    pick = {"member": xr.DataArray(member, dims="sample"), "time": xr.DataArray(t, dims="sample")}
    now = np.asarray(target.isel(pick).values, float)
    clim_now, clim_next = at_phases(clim, phase, t), at_phases(clim, phase, t + cfg.lead)
    # the lag-`lead` regression of the anomaly on the training split, every member, per point: its sums
    # gathered a year of steps at a time, so memory does not grow with the record
    num = den = 0.0
    for steps in np.array_split(split.train, max(1, -(-len(split.train) // YARDSTICK_BLOCK))):
        a0 = np.asarray(target.isel(time=steps).values, float) - at_phases(clim, phase, steps)[None]
        a1 = (
            np.asarray(target.isel(time=steps + cfg.lead).values, float)
            - at_phases(clim, phase, steps + cfg.lead)[None]
        )
        num, den = num + np.nansum(a0 * a1, axis=(0, 1)), den + np.nansum(a0 * a0, axis=(0, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.clip(np.where(den > 0, num / den, 0.0), 0.0, 1.0)
    land = ~unit["mask"].values.astype(bool)
    out = {
        "climatology": clim_next,
        "persistence": now,
        "damped persistence": clim_next + slope * (now - clim_now),
    }
    return {k: np.where(land, np.nan, v) for k, v in out.items()}


def ocean_competence(
    units: Mapping[tuple[str, int], xr.Dataset],
    forecasts: Mapping[str, np.ndarray],
    cfg: StudyConfig,
    *,
    block: int = 3,
    n_resamples: int = 1000,
    seed: int = 0,
    yardsticks: tuple[str, ...] = YARDSTICKS,
) -> xr.Dataset:
    """The competence table (:func:`scimech.studies.competence.competence`): every regime (its seeds'
    mean per-sample error) against :data:`YARDSTICKS` (``forecasts``, :func:`yardstick_forecasts`) on
    the same test samples.

    Examples
    --------
    >>> import dataclasses
    >>> from pathlib import Path
    >>> from ocean.experiment import StudyConfig, prepare_data, train_unit
    >>> cfg = StudyConfig(  # the smallest synthetic ocean: 1 member, 4 years, 8 x 8 points
    ...     synth={"n_members": 1, "years": 4, "ny": 8, "nx": 8, "n_eddies": 2},
    ...     window=2, epochs=1, width=4, regimes=["mixed"], seeds=[0], fractions=[0.6, 0.2, 0.2],
    ... )
    >>> store = prepare_data(cfg, Path("out"))
    >>> unit = train_unit(dataclasses.asdict(cfg), "mixed", 0, str(store), "checkpoints")
    >>> from ocean.experiment import ocean_competence, yardstick_forecasts
    >>> forecasts = yardstick_forecasts(unit, store, cfg)
    >>> table = ocean_competence({("mixed", 0): unit}, forecasts, cfg, n_resamples=50)
    >>> table["model"].values.tolist(), table["value"].dims
    (['mixed', 'climatology', 'persistence', 'damped persistence'], ('model', 'metric'))
    """
    from .recovery import _blocks

    regimes = list(dict.fromkeys(r for r, _ in units))
    first = units[next(iter(units))]
    truth = first["y_true"].values
    ok = first["mask"].values.astype(bool)

    def per_sample_se(pred: np.ndarray) -> np.ndarray:
        return np.nanmean(((pred - truth)[:, ok]) ** 2, axis=1)

    samples = {}
    for reg in regimes:
        seeds = [units[k] for k in units if k[0] == reg]
        samples[reg] = np.mean([per_sample_se(u["y_pred"].values) for u in seeds], axis=0)
    for name in yardsticks:
        samples[name] = per_sample_se(forecasts[name])
    return competence(
        samples,
        dissected=regimes,
        metrics=[RMSE],
        world=world_of(cfg),
        clusters=_blocks(first, block),
        n_resamples=n_resamples,
        seed=seed,
        note=f"forecast {cfg.lead} step(s) ahead of the last of {cfg.window} input steps; test split; "
        f"bootstrap over blocks of {block} consecutive steps of one member",
    )
