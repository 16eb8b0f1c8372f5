"""MLD, MLHC and budget terms: hand-computed columns and a real CMEMS file shipped by xoa."""

import numpy as np
import pytest
import xarray as xr

from ocean import budget
from ocean.constants import CP0, RHO0
from ocean.variables import rename_to_study

DEPTH = np.array(
    [
        0.5,
        1.5,
        2.6,
        3.8,
        5.1,
        6.4,
        7.9,
        9.6,
        11.4,
        13.5,
        15.8,
        18.5,
        21.6,
        25.2,
        29.4,
        34.4,
        40.3,
        47.4,
        55.8,
        65.8,
        77.9,
        92.3,
        109.7,
        130.7,
        155.9,
        186.1,
        222.5,
    ]
)


@pytest.mark.parametrize("h", [0.3, 5.0, 37.3, 100.0, 200.0])
def test_mlhc_of_uniform_column_is_rho_cp_t_h(h):
    T = 13.7
    ct = xr.DataArray(np.full(DEPTH.size, T), dims="depth", coords={"depth": DEPTH})
    mlhc = budget.mixed_layer_heat_content(ct, xr.DataArray(h))
    assert float(mlhc) == pytest.approx(RHO0 * CP0 * T * h, rel=1e-12)  # exact up to round-off


def test_mlhc_two_layer_column_hand_computed():
    depth = np.array([5.0, 15.0, 25.0, 35.0])  # cells [0,10], [10,20], [20,30], [30,40]
    ct = xr.DataArray([20.0, 20.0, 10.0, 10.0], dims="depth", coords={"depth": depth})
    mlhc = budget.mixed_layer_heat_content(ct, xr.DataArray(25.0), rho=1000.0, cp=4000.0)
    assert float(mlhc) == pytest.approx(1000 * 4000 * (20 * 20 + 10 * 5))


def test_mld_threshold_hand_computed():
    depth = np.arange(0.0, 101.0, 5.0)
    s0 = np.where(depth <= 40, 26.0, 26.0 + 0.01 * (depth - 40))  # crosses 26.03 at 43 m
    da = xr.DataArray(s0, dims="depth", coords={"depth": depth})
    assert float(budget.mixed_layer_depth(da)) == pytest.approx(43.0)
    # a column that never reaches the threshold is mixed to its deepest valid level
    s1 = np.full(depth.size, 26.0)
    s1[15:] = np.nan
    assert float(budget.mixed_layer_depth(xr.DataArray(s1, dims="depth", coords={"depth": depth}))) == 70.0


@pytest.fixture(scope="module")
def ibi():
    ds = budget.open_xoa_sample()
    return ds, budget.budget_terms(ds)


def test_real_file_mld_and_mlhc_plausible(ibi):
    ds, b = ibi
    mld = b["mld"].values
    mlhc = b["mlhc"].values
    assert np.isfinite(mld).all()  # the IBI box is all ocean
    # winter (February) Bay-of-Biscay / Iberian margin: mixed layers of tens to ~200 m
    assert 10 < np.nanmin(mld) and np.nanmax(mld) < 250
    # 1e9-1e10 J m-2: rho cp (~4.1e6 J m-3 K-1) x 13 degC x 25..200 m
    assert 5e8 < np.nanmin(mlhc) and np.nanmax(mlhc) < 2e10
    # consistency: MLHC = rho0 cp0 h * (mixed-layer mean Theta)
    np.testing.assert_allclose(mlhc, RHO0 * CP0 * mld * b["theta_ml"].values, rtol=1e-10)
    assert b["dmlhc_dt"].attrs["units"] == "W m-2"
    assert {"q_adv", "q_geo", "residual"} <= set(b.data_vars)


def test_nemo_names_map_to_schema():
    t = np.arange(3)
    ds = xr.Dataset(
        {
            "somxl010": (("time_counter", "y", "x"), np.ones((3, 2, 2)), {"units": "m"}),
            "sosstsst": (("time_counter", "y", "x"), np.ones((3, 2, 2)), {"units": "degC"}),
            "sossheig": (("time_counter", "y", "x"), np.ones((3, 2, 2)), {"units": "m"}),
            "sohefldo": (("time_counter", "y", "x"), np.ones((3, 2, 2)), {"units": "W/m2"}),
        },
        coords={"time_counter": t},
    )
    out, renamed = rename_to_study(ds)
    assert renamed == {
        "somxl010": "mld",
        "sosstsst": "sst",
        "sossheig": "zos",
        "sohefldo": "qnet",
        "time_counter": "time",
    }
    assert {"mld", "sst", "zos", "qnet"} <= set(out.data_vars)
    assert "time" in out.dims
    assert out["sst"].attrs["units"] == "degree_Celsius" and out["qnet"].attrs["units"] == "W m-2"


def test_budget_needs_temperature_and_salinity():
    from scimech.errors import MissingVariableError

    ds = budget.open_xoa_sample().drop_vars("so")
    with pytest.raises(MissingVariableError, match="so"):
        budget.budget_terms(ds)


def test_real_file_entrainment_and_diffusion_close_the_listed_budget(ibi):
    ds, b = ibi
    assert b.residual.attrs["terms"] == "q_adv,q_entr,q_diff,q_mass"
    known = sum(b[k] for k in ("q_adv", "q_entr", "q_diff", "q_mass"))
    np.testing.assert_allclose(b["residual"].values, (b["dmlhc_dt"] - known).values, rtol=1e-12, atol=1e-6)
    # w_e at an interior point by hand: dh/dt (two daily means) + div(h u) with centred differences
    h, i, j = b["mld"].values, 3, 6
    bounds = budget.level_bounds(ds["depth"].values.astype(float))

    def ml_mean(field, ii, jj):
        w = np.clip(np.minimum(bounds[1:], h[:, ii, jj, None]) - bounds[:-1], 0, None)
        return (ds[field].values[:, :, ii, jj] * w).sum(1) / w.sum(1)

    phi = np.deg2rad(ds["latitude"].values.astype(float))
    lam = np.deg2rad(ds["longitude"].values.astype(float))
    hu = {jj: h[:, i, jj] * ml_mean("uo", i, jj) for jj in (j - 1, j + 1)}
    hv = {ii: h[:, ii, j] * np.cos(phi[ii]) * ml_mean("vo", ii, j) for ii in (i - 1, i + 1)}
    div = (
        (hu[j + 1] - hu[j - 1]) / (lam[j + 1] - lam[j - 1]) + (hv[i + 1] - hv[i - 1]) / (phi[i + 1] - phi[i - 1])
    ) / (6.371e6 * np.cos(phi[i]))
    w_e = (h[1, i, j] - h[0, i, j]) / 86400.0 + div
    np.testing.assert_allclose(b["w_e"].values[:, i, j], w_e, rtol=1e-6)
    t_e = np.where(w_e > 0, b["t_below"].values[:, i, j], b["theta_ml"].values[:, i, j])
    np.testing.assert_allclose(b["q_entr"].values[:, i, j], RHO0 * CP0 * w_e * t_e, rtol=1e-9)
    np.testing.assert_allclose(
        b["q_mass"].values[:, i, j], -RHO0 * CP0 * b["theta_ml"].values[:, i, j] * div, rtol=1e-6
    )
    assert b["q_diff"].attrs["units"] == "W m-2" and "kappa" in b["q_diff"].attrs["formula"]
