"""The ocean report as an oceanographer reads it: the seasonal skill maps and the attribution maps side by side
on one shared scale with one colour bar (values checked against numpy), the RMSE panel with every yardstick of
the competence table, the regimes and abbreviations said in words, and no bare ``nan`` in a table."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402

from ocean import plots  # noqa: E402
from ocean import report as ocean_report  # noqa: E402
from ocean.evidence import SEASONS  # noqa: E402
from scimech.studies.competence import competence_line  # noqa: E402
from scimech.studies.report import Report  # noqa: E402


def _unit(seed=0, ns=24, ny=4, nx=5):
    """Monthly test samples (two years, every season has 6 months), one land point."""
    rng = np.random.default_rng(seed)
    mask = np.ones((ny, nx), np.int8)
    mask[0, 0] = 0
    y_true = rng.normal(0, 100.0, (ns, ny, nx))
    return xr.Dataset(
        {
            "y_true": (("sample", "lat", "lon"), y_true),
            "y_pred": (("sample", "lat", "lon"), 0.6 * y_true + rng.normal(0, 60.0, (ns, ny, nx))),
            "y_clim": (("sample", "lat", "lon"), rng.normal(0, 10.0, (ns, ny, nx))),
            "mask": (("lat", "lon"), mask),
        },
        coords={
            "time": ("sample", pd.date_range("2001-01-01", periods=ns, freq="MS")),
            "lat": np.linspace(30, 40, ny),
            "lon": np.linspace(-50, -30, nx),
        },
        attrs={"regime": "mixed", "seed": 0},
    )


def _panels(fig):
    return [a for a in fig.axes if a.collections and a.get_title()]  # map axes (a colour bar's has no title)


def test_the_four_seasons_share_one_scale_from_minus_one_to_one_and_one_colour_bar():
    unit = _unit()
    fig = plots.seasonal_skill_maps(unit)
    try:
        panels = _panels(fig)
        assert len(panels) == 4
        assert {a.collections[0].get_clim() for a in panels} == {(-1.0, 1.0)}  # one scale, 0 (no skill) neutral
        bars = [a.collections[0].colorbar for a in panels if a.collections[0].colorbar is not None]
        assert len(fig.axes) == 5 and len(bars) <= 1  # four maps and one colour bar
        assert "anomaly correlation" in fig.axes[-1].get_ylabel()
        # DJF at an ocean point, against numpy's correlation of the anomalies over the season's months
        months = unit["time"].dt.month.values
        sel = np.isin(months, SEASONS["DJF"])
        i, j = 2, 3
        pa = (unit["y_pred"] - unit["y_clim"]).values[sel, i, j]
        ta = (unit["y_true"] - unit["y_clim"]).values[sel, i, j]
        djf = next(a for a in panels if a.get_title().startswith("ACC DJF"))
        assert djf.get_title() == f"ACC DJF (n={sel.sum()} months)"
        drawn = np.ma.filled(djf.collections[0].get_array(), np.nan).reshape(unit["mask"].shape)
        assert drawn[i, j] == pytest.approx(np.corrcoef(pa, ta)[0, 1], abs=1e-12)
        assert np.isnan(drawn[0, 0])  # land is not drawn as skill
    finally:
        plt.close(fig)


def test_attribution_maps_compare_variables_on_one_scale():
    rng = np.random.default_rng(3)
    variables, window, ny, nx = ["sst", "mld", "qnet"], 2, 4, 5
    strength = np.repeat([1.0, 10.0, 0.1], window)[None, :, None, None]  # mld 10 x sst, variable-major channels
    attr = xr.DataArray(rng.normal(0, 1, (3, len(variables) * window, ny, nx)) * strength)
    mask = _unit(ny=ny, nx=nx)["mask"]
    fig = plots.attribution_figure(attr, mask, variables, window)
    try:
        panels = _panels(fig)
        assert [a.get_title() for a in panels] == [
            "sst (mixed-layer (sea surface) temperature)",
            "mld (mixed-layer depth)",
            "qnet (net surface heat flux)",
        ]
        # by hand: mean |attribution| over samples, summed over each variable's window months
        hand = np.abs(attr.values).mean(0).reshape(len(variables), window, ny, nx).sum(1)
        ok = mask.values.astype(bool)
        top = hand[:, ok].max()
        for k, a in enumerate(panels):
            mesh = a.collections[0]
            assert mesh.get_clim() == pytest.approx((0.0, top))  # every variable on the strongest's scale
            drawn = np.ma.filled(mesh.get_array(), np.nan).reshape(ny, nx)
            np.testing.assert_allclose(drawn[ok], hand[k][ok])
        assert len(fig.axes) == len(panels) + 1  # three maps in one row and one colour bar
        assert "summed over 2 input months" in fig.axes[-1].get_ylabel()
    finally:
        plt.close(fig)


def test_the_rmse_panel_draws_every_yardstick_of_the_competence_table():
    summary = xr.Dataset(
        {
            "rmse": (("regime", "seed"), [[98.0, 101.0], [105.0, 103.0]], {"units": "W m-2"}),
            "acc": (("regime", "seed"), [[0.8, 0.78], [0.76, 0.77]]),
            "rmse_climatology": (("regime", "seed"), [[157.5, 157.5], [157.5, 157.5]]),
            "acc_season": (("regime", "seed", "season"), np.full((2, 2, 4), 0.7)),
        },
        coords={"regime": ["mixed", "prediction_only"], "seed": [0, 1], "season": list(SEASONS)},
    )
    table = xr.Dataset(
        {"value": (("model", "metric"), [[98.1], [104.0], [158.0], [237.0], [117.0]])},
        coords={
            "model": ["mixed", "prediction_only", "climatology", "persistence", "damped persistence"],
            "role": ("model", ["dissected model"] * 2 + ["yardstick"] * 3),
            "metric": ["RMSE"],
        },
    )
    yardsticks = ocean_report._yardstick_rmse(table)
    assert yardsticks == {"climatology": 158.0, "persistence": 237.0, "damped persistence": 117.0}
    fig = plots.skill_figure(summary, yardsticks)
    try:
        rmse_ax = fig.axes[0]
        levels = sorted(line.get_ydata()[0] for line in rmse_ax.lines if len(set(line.get_ydata())) == 1)
        assert levels == [117.0, 158.0, 237.0]
        assert sorted(t.get_text() for t in rmse_ax.texts) == [
            "climatology 158",
            "damped persistence 117",
            "persistence 237",
        ]
        assert rmse_ax.get_ylim()[1] > 237.0  # the highest yardstick is on the panel
        assert rmse_ax.get_ylabel() == "RMSE (W m-2)" and fig.axes[1].get_ylabel() == "anomaly correlation (ACC)"
    finally:
        plt.close(fig)


def test_tables_say_n_a_and_drop_columns_without_a_number(tmp_path):
    rep = Report(tmp_path, title="t")
    frame = pd.DataFrame({"q_surf": [0.86, 0.87], "free_0": [0.33, np.nan], "none": [np.nan, np.nan]})
    ocean_report._table(rep, frame.set_axis(pd.Index(["mixed", "prescription_only"], name="regime")), caption="r")
    md = rep.write().read_text()
    assert "| regime | q_surf | free_0 |" in md  # the column without a number is left out
    assert "| prescription_only | 0.87 | n/a |" in md and "| mixed | 0.86 | 0.33 |" in md
    assert "nan" not in md


def test_the_introduction_says_the_regimes_and_abbreviations_in_words(tmp_path):
    rep = Report(tmp_path, title="t")
    cfg = {"regimes": ["mixed", "prediction_only"], "seeds": [0, 1, 2], "epochs": 30, "window": 6}
    ocean_report._introduction(rep, cfg, False, None, 12.0)
    text = rep.write().read_text()
    assert "[" not in text  # no Python lists
    assert "Seeds 0, 1, 2; 30 epochs each" in text
    assert "prediction_only (forecast loss only" in text
    for word in ("ACC, anomaly correlation", "CKA, centred kernel alignment", "CV, coefficient of variation"):
        assert word in text


def test_the_competence_line_gives_each_number_its_unit():
    table = xr.Dataset(
        {
            "value": (("model", "metric"), [[98.1], [117.0]]),
            "worse_than_best_low": (("model", "metric"), [[-32.4], [0.0]]),
            "worse_than_best_high": (("model", "metric"), [[-3.91], [0.0]]),
        },
        coords={
            "model": ["mixed", "damped persistence"],
            "role": ("model", ["dissected model", "yardstick"]),
            "verdict": ("model", ["competent", "yardstick"]),
            "metric": ["RMSE"],
            "units": ("metric", ["W m-2"]),
            "headline": ("metric", [True]),
            "best_yardstick": ("metric", ["damped persistence"]),
        },
        attrs={"world": "synthetic world (4 x 5 grid)"},
    )
    line = competence_line(table)
    assert line.startswith("Competence on synthetic world (4 x 5 grid): mixed: competent (")
    assert "RMSE 98.1 W m-2 vs damped persistence 117 W m-2, difference [-32.4, -3.91] W m-2" in line
    assert "the model minus the best yardstick, 95% interval; > 0: the model is worse" in line
