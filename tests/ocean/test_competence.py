"""OceanCBM's competence table: a deliberately untrained model reads "not competent", an oracle "competent",
and the yardsticks (persistence, damped persistence, climatology) are recomputed here by hand from the store."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ocean import competence as oc
from ocean.plan import StudyConfig
from ocean.run import prepare_data
from ocean.training import train_unit
from scimech.studies.competence import COMPETENT, NOT_COMPETENT


@pytest.fixture(scope="module")
def untrained(tmp_path_factory):
    """A unit whose model is left at its random start (one epoch at a learning rate of 1e-12), on a small ocean."""
    out = tmp_path_factory.mktemp("ocean_competence")
    cfg = StudyConfig(synth={"years": 7, "ny": 6, "nx": 8}, epochs=1, lr=1e-12, regimes=["mixed"], seeds=[0])
    path = prepare_data(cfg, out)
    unit = train_unit(dataclasses.asdict(cfg), "mixed", 0, str(path), str(out / "checkpoints"))
    return cfg, path, unit


def test_yardsticks_are_persistence_and_damped_persistence_by_hand(untrained):
    import xarray as xr

    cfg, path, unit = untrained
    got = oc.yardstick_forecasts(unit, path, cfg)
    ds = xr.open_zarr(path, consolidated=False)
    y = ds[cfg.target].transpose("member", "time", "lat", "lon").values
    times = list(ds["time"].values)
    land = ~unit["mask"].values.astype(bool)
    for k, (when, m) in enumerate(zip(unit["time"].values, unit["member"].values)):
        issue = times.index(when) - cfg.lead  # the last input month
        want = np.where(land, np.nan, y[int(m), issue])
        np.testing.assert_array_equal(got["persistence"][k], want)
    # climatology: the unit's own (the forecast the study always scored)
    np.testing.assert_allclose(got["climatology"], unit["y_clim"].values, equal_nan=True)
    # damped persistence by hand: month-of-year means of the training targets, the lag-1 regression of the
    # anomaly per point (clipped to [0, 1]), clim(t + 1) + a (y(t) - clim(t))
    from ocean.data.samples import chronological_split

    split = chronological_split(len(times), window=cfg.window, lead=cfg.lead, fractions=tuple(cfg.fractions))
    month = ds["time"].dt.month.values
    targets = split.train + cfg.lead
    clim = {mo: y[:, targets[month[targets] == mo]].mean(axis=(0, 1)) for mo in np.unique(month[targets])}

    def anomaly(steps):
        return y[:, steps] - np.stack([clim[mo] for mo in month[steps]])[None]

    a0, a1 = anomaly(split.train), anomaly(targets)
    slope = np.clip((a0 * a1).sum((0, 1)) / (a0 * a0).sum((0, 1)), 0, 1)
    for k, (when, m) in enumerate(zip(unit["time"].values, unit["member"].values)):
        issue = times.index(when) - cfg.lead
        want = clim[month[issue + cfg.lead]] + slope * (y[int(m), issue] - clim[month[issue]])
        np.testing.assert_allclose(got["damped persistence"][k][~land], want[~land], rtol=1e-9, atol=1e-9)


def test_an_untrained_model_is_not_competent_and_an_oracle_is(untrained):
    cfg, path, unit = untrained
    forecasts = oc.yardstick_forecasts(unit, path, cfg)
    oracle = unit.copy()
    oracle["y_pred"] = unit["y_true"]  # a model that knows the answer
    table = oc.ocean_competence({("untrained", 0): unit, ("oracle", 0): oracle}, forecasts, cfg, n_resamples=300)
    verdict = dict(zip(table["model"].values, table["verdict"].values))
    assert verdict["untrained"] == NOT_COMPETENT, table["value"].values
    assert verdict["oracle"] == COMPETENT
    # the untrained model's RMSE is the hand computation over ocean points and test months
    ok = unit["mask"].values.astype(bool)
    err = (unit["y_pred"].values - unit["y_true"].values)[:, ok]
    assert float(table["value"].sel(model="untrained", metric="RMSE")) == pytest.approx(
        np.sqrt(np.mean(np.mean(err**2, axis=1))), rel=1e-9
    )
    assert table.attrs["world"] == "synthetic world (2 members x 7 years on a 6 x 8 grid)"
