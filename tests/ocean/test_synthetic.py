"""The synthetic ocean: exact heat-budget closure (a conservation law), schema, land mask."""

import numpy as np
import pytest

from ocean import grid, synthetic
from ocean.constants import CP0, RHO0


@pytest.fixture(scope="module")
def daily():
    return synthetic.generate(n_members=2, years=1, ny=8, nx=12, output="daily", seed=3)


@pytest.fixture(scope="module")
def monthly():
    return synthetic.generate(n_members=1, years=2, ny=8, nx=12, output="monthly", seed=4)


@pytest.mark.parametrize("which", ["daily", "monthly"])
def test_budget_closes_to_round_off(which, request):
    ds = request.getfixturevalue(which)
    res = synthetic.budget_residual(ds).values
    scale = float(np.nanmax(np.abs(ds["dmlhc_dt"].values)))
    ocean = ds["mask"].values.astype(bool)
    assert np.isfinite(res[..., ocean]).all()
    # float64 round-off: H ~ 1e10 J m-2 differenced over dt = 86400 s gives ~1e10 * 1e-16 / 1 ~ 1e-6 W m-2
    # per step at most; we allow 1e-9 of the largest tendency (~1e3 W m-2), i.e. ~1e-6 W m-2.
    assert np.nanmax(np.abs(res)) <= 1e-9 * scale


def test_daily_tendency_is_the_difference_of_heat_content(daily):
    # independent of the stored tendency: difference the stored MLHC series itself
    dH = daily["mlhc"].diff("time").values / 86400.0
    total = sum(daily[k] for k in synthetic.CONCEPTS).isel(time=slice(0, -1)).values
    ok = np.isfinite(dH)
    np.testing.assert_allclose(dH[ok], total[ok], rtol=0, atol=1e-6)  # W m-2, round-off as above


def test_heat_content_is_rho_cp_h_t(daily):
    np.testing.assert_allclose(daily["mlhc"].values, RHO0 * CP0 * daily["mld"].values * daily["sst"].values, rtol=1e-12)


def test_diffusion_only_moves_heat(daily):
    area = grid.cell_area(daily["lat"].values, daily["lon"].values)
    ocean = daily["mask"].values.astype(bool)
    q = daily["q_diff"].values[..., ocean]  # (member, time, points), W m-2
    total = (q * area[ocean]).sum(-1)
    typical = (np.abs(q) * area[ocean]).sum(-1)
    assert np.all(np.abs(total) <= 1e-9 * typical)  # discrete flux form telescopes exactly (round-off only)


def test_schema_cf_and_mask(monthly):
    ds = monthly
    for v in [*synthetic.INPUTS, *synthetic.CONCEPTS, "mlhc", "dmlhc_dt"]:
        assert ds[v].dims == ("member", "time", "lat", "lon")
        assert ds[v].attrs["units"]
        assert ds[v].attrs["long_name"]
    assert ds["sst"].attrs["standard_name"] == "sea_surface_temperature"
    land = ds["mask"].values == 0
    assert land.any() and (~land).any()
    assert np.isnan(ds["sst"].values[..., land]).all()
    assert np.isfinite(ds["sst"].values[..., ~land]).all()
    # monthly periods are whole calendar months
    assert set(ds["period_days"].values) <= {28.0, 29.0, 30.0, 31.0}


def test_members_differ_and_seed_reproduces():
    a = synthetic.generate(n_members=2, years=1, ny=6, nx=8, seed=1)
    b = synthetic.generate(n_members=2, years=1, ny=6, nx=8, seed=1)
    np.testing.assert_array_equal(a["mlhc"].values, b["mlhc"].values)
    diff = np.nanmax(np.abs(a["sst"].isel(member=0).values - a["sst"].isel(member=1).values))
    assert diff > 0.1  # degree_Celsius: ensemble members have their own weather
