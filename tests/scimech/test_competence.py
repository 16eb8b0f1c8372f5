"""The competence table (scimech.studies.competence): an untrained model is reported "not competent",
an oracle and a trained model "competent", against yardsticks recomputed here by hand in numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import xarray as xr

from scimech.errors import DataValidationError
from scimech.studies.competence import (
    COMPETENT,
    NOT_COMPETENT,
    Metric,
    competence,
    competence_frame,
    competence_markdown,
    competence_summary,
    save_competence,
    synthetic_world,
)
from scimech.studies.report import Report

RMSE = Metric("RMSE", lambda se: float(np.sqrt(np.mean(se))), units="W m-2")


def _ar1(n=400, phi=0.8, seed=0):
    """An AR(1) series x_t = phi x_{t-1} + e_t: persistence is a fair yardstick, damped persistence the best one."""
    rng = np.random.default_rng(seed)
    x = np.zeros(n)
    for t in range(1, n):
        x[t] = phi * x[t - 1] + rng.normal()
    return x


def _forecasts(x, phi):
    """One-step forecasts of x[1:] from x[:-1]: by hand, independent of the module."""
    past, future = x[:-1], x[1:]
    return future, {
        "climatology": np.zeros_like(future),  # the series' mean is 0 by construction
        "persistence": past,
        "damped persistence": phi * past,
    }


def _table(future, models, dissected, **kw):
    se = {name: (pred - future) ** 2 for name, pred in models.items()}
    return competence(se, dissected=dissected, metrics=[RMSE], world=synthetic_world("AR(1), 399 steps"), **kw)


def test_untrained_model_is_not_competent_and_trained_one_is():
    x = _ar1()
    future, yard = _forecasts(x, 0.8)
    torch.manual_seed(0)
    untrained = torch.nn.Linear(1, 1)  # a forecaster at its random initialisation: never fitted
    with torch.no_grad():
        raw = untrained(torch.as_tensor(x[:-1, None], dtype=torch.float32)).numpy()[:, 0] * 3.0 + 2.0
    # a trained linear forecaster: least squares on the first half, scored on all samples
    half = len(future) // 2
    slope = float(np.dot(x[:half], future[:half]) / np.dot(x[:half], x[:half]))
    models = {"untrained": raw, "trained": slope * x[:-1], "oracle": future.copy(), **yard}
    tab = _table(future, models, ["untrained", "trained", "oracle"], n_resamples=400)

    verdict = dict(zip(tab["model"].values, tab["verdict"].values))
    assert verdict["untrained"] == NOT_COMPETENT
    assert verdict["trained"] == COMPETENT
    assert verdict["oracle"] == COMPETENT
    assert verdict["persistence"] == "yardstick"

    # the yardsticks' RMSE equals the hand computation
    for name, pred in yard.items():
        want = np.sqrt(np.mean((pred - future) ** 2))
        assert float(tab["value"].sel(model=name, metric="RMSE")) == pytest.approx(want, rel=1e-12)
    # the best yardstick of an AR(1) one step ahead is damped persistence (its conditional mean)
    assert str(tab["best_yardstick"].sel(metric="RMSE").values) == "damped persistence"
    # each interval holds its estimate, and the untrained model's difference lies wholly above 0
    assert bool(((tab["ci_low"] <= tab["value"]) & (tab["value"] <= tab["ci_high"])).all())
    assert float(tab["worse_than_best_low"].sel(model="untrained", metric="RMSE")) > 0
    assert float(tab["worse_than_best_high"].sel(model="oracle", metric="RMSE")) < 0


def test_a_skill_metric_higher_is_better_and_clusters_resample_together():
    x = _ar1(seed=1)
    future, yard = _forecasts(x, 0.8)
    skill = Metric("minus MSE", lambda e: float(np.mean(e)), lower_is_better=False)  # higher is better
    neg_se = {"worst": -(((future * 0 + 5.0) - future) ** 2), **{k: -((v - future) ** 2) for k, v in yard.items()}}
    clusters = np.arange(len(future)) // 20  # blocks of 20 consecutive steps
    tab = competence(neg_se, dissected=["worst"], metrics=[skill], world="w", clusters=clusters, n_resamples=300)
    assert tab.attrs["n_clusters"] == len(np.unique(clusters))
    assert str(tab["verdict"].sel(model="worst").values) == NOT_COMPETENT
    assert str(tab["best_yardstick"].values[0]) == "damped persistence"


def test_non_finite_samples_are_dropped_and_counted():
    future, yard = _forecasts(_ar1(n=60), 0.8)
    se = {k: (v - future) ** 2 for k, v in yard.items()}
    se["model"] = se["damped persistence"].copy()
    se["model"][:5] = np.nan
    tab = competence(se, dissected=["model"], metrics=[RMSE], world="w", n_resamples=200)
    assert tab.attrs["n_dropped"] == 5 and tab.attrs["n_samples"] == len(future) - 5


def test_refuses_without_a_yardstick_or_with_unequal_samples():
    with pytest.raises(DataValidationError, match="yardstick"):
        competence({"m": np.ones(5)}, dissected=["m"], metrics=[RMSE], world="w")
    with pytest.raises(DataValidationError, match="same samples"):
        competence({"m": np.ones(5), "y": np.ones(4)}, dissected=["m"], metrics=[RMSE], world="w")


def test_the_report_opens_with_the_table_and_it_is_saved(tmp_path):
    future, yard = _forecasts(_ar1(n=120), 0.8)
    tab = _table(future, {"model": future + 3.0, **yard}, ["model"], n_resamples=200)
    rep = Report(tmp_path, title="t", world=tab.attrs["world"])
    rep.heading("Later")
    rep.text("more")
    rep.competence(tab)  # called last, shown first
    md = rep.write().read_text()
    assert md.index("Is the model competent?") < md.index("Later")
    assert "Not competent: read the mechanisms with care" in md
    assert "synthetic world (AR(1), 399 steps)" in md
    assert competence_markdown(tab).startswith("**Not competent")
    assert f"bootstrap over {len(future)} test samples," in md  # independent samples: no clusters to name
    frame = competence_frame(tab)
    assert list(frame.index)[0] == "model" and frame.loc["model", "verdict"] == NOT_COMPETENT
    nc, csv = save_competence(tab, tmp_path)
    back = xr.open_dataset(nc)
    assert set(back.dims) == {"model", "metric"}
    assert list(back["verdict"].values) == list(tab["verdict"].values)
    assert csv.read_text().startswith("model,role,")
    assert competence_summary(tmp_path) == NOT_COMPETENT  # the cell of the demo's index
    assert competence_summary(tmp_path / "absent") == "not reported"


def test_one_test_month_is_not_assessed_and_the_report_says_why_and_the_fix():
    # the ORCA025 study on 24 months holds one test month: no interval can be bootstrapped from one sample
    future, yard = _forecasts(_ar1(n=2), 0.8)
    assert len(future) == 1
    se = {k: (v - future) ** 2 for k, v in yard.items()}
    se["model"] = se["persistence"] + 1.0
    tab = competence(se, dissected=["model"], metrics=[RMSE], world="w", n_resamples=100)
    assert str(tab["verdict"].sel(model="model").values) == "not assessed"
    text = competence_markdown(tab)
    assert "1 test sample(s)" in text and "at least two" in text and "Fix: more test samples" in text


def test_clusters_too_few_for_an_interval_are_counted_as_clusters():
    future, yard = _forecasts(_ar1(n=7), 0.8)  # 6 samples, one block of 6
    se = {k: (v - future) ** 2 for k, v in yard.items()}
    se["model"] = se["persistence"].copy()
    tab = competence(se, dissected=["model"], metrics=[RMSE], world="w", clusters=np.zeros(6, int), n_resamples=100)
    assert "6 test sample(s) in 1 cluster(s)" in competence_markdown(tab)


def test_a_model_without_a_finite_score_is_named():
    future, yard = _forecasts(_ar1(n=60), 0.8)
    se = {k: (v - future) ** 2 for k, v in yard.items()}
    se["model"] = -np.ones_like(future)  # finite samples whose RMSE (the root of a negative mean) is NaN
    with np.errstate(invalid="ignore"):
        tab = competence(se, dissected=["model"], metrics=[RMSE], world="w", n_resamples=100)
    assert str(tab["verdict"].sel(model="model").values) == "not assessed"
    assert "no finite value for model (RMSE)" in competence_markdown(tab)
    se["model"] = np.full_like(future, np.inf)  # every sample infinite: every sample left out
    tab = competence(se, dissected=["model"], metrics=[RMSE], world="w", n_resamples=100)
    assert "no test sample has a finite score in every model (59 left out)" in competence_markdown(tab)
