"""The prescribed concepts computed from a product's own fields (ocean.concepts) against independent
truths: the synthetic ocean's own terms, hand-computed analytic fields, and the xoa IBI sample
computed again by hand with numpy."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from ocean import budget, concepts, data, synthetic
from ocean.constants import CP0, KAPPA, R_EARTH, RHO0, G, coriolis

RC = RHO0 * CP0


def _computed(ds, scheme, advection="upwind"):
    """Every concept and the target from the generator's fields only (sst, mld, t_sub, zos, tau, qnet)."""
    fields = ds[["sst", "mld", "t_sub", "zos", "tauu", "tauv", "qnet", "mask"]]
    got, made = concepts.complete(fields, scheme=scheme, advection=advection)
    assert set(made) == {"q_surf", "q_ekman", "q_geo", "q_entr", "q_diff", "mlhc", "dmlhc_dt"}
    return got


@pytest.fixture(scope="module")
def daily():
    return synthetic.generate(n_members=1, years=0.17, ny=6, nx=8, seed=3, output="daily")


def test_daily_snapshots_give_the_generators_terms_to_round_off(daily):
    # daily output stores each day's state and that day's terms: forward differences in time and
    # the generator's upwind advection reproduce every term (the last day has no next state)
    got = _computed(daily, "forward").isel(time=slice(0, -1))
    truth = daily.isel(time=slice(0, -1))
    for k in ["q_surf", "q_ekman", "q_geo", "q_entr", "q_diff", "mlhc", "dmlhc_dt"]:
        scale = float(np.abs(truth[k]).max())
        np.testing.assert_allclose(got[k].values, truth[k].values, rtol=0, atol=1e-9 * scale, err_msg=k)
        assert got[k].attrs["units"] == synthetic.VAR_ATTRS[k]["units"] and "formula" in got[k].attrs, k
    assert (truth["q_entr"] > 0).any() and (truth["q_entr"] < 0).any()  # both branches checked


def test_monthly_means_give_the_generators_terms_within_discretisation():
    # monthly output stores month means: a term of month means differs from the month mean of the
    # daily terms (products of means) and centred differences of month means approximate the month
    # tendency to second order. Measured (seed 3, 8 x 10, 3 years): rms error / rms truth 0.14
    # (q_entr), 0.015 (q_diff), 0.095 (q_ekman), 0.031 (q_geo), 0.18 (dmlhc_dt).
    ds = synthetic.generate(n_members=1, years=3, ny=8, nx=10, seed=3)
    got = _computed(ds, "centred")
    bounds = {
        "q_surf": 1e-12,
        "q_entr": 0.2,
        "q_diff": 0.03,
        "q_ekman": 0.15,
        "q_geo": 0.05,
        "dmlhc_dt": 0.25,
        "mlhc": 0.01,
    }
    for k, bound in bounds.items():
        ok = np.isfinite(ds[k].values)
        err = got[k].values[ok] - ds[k].values[ok]
        assert np.sqrt(np.mean(err**2)) <= bound * np.sqrt(np.mean(ds[k].values[ok] ** 2)), k
    # centred advection differs from the generator's upwind steps by O(dx) on this coarse grid
    cen = _computed(ds, "centred", advection="centred")
    assert (
        np.corrcoef(
            cen["q_geo"].values[np.isfinite(cen["q_geo"].values)], ds["q_geo"].values[np.isfinite(ds["q_geo"].values)]
        )[0, 1]
        > 0.8
    )


def _grid(values, lat, lon, times):
    return xr.DataArray(values, dims=("time", "lat", "lon"), coords={"time": times, "lat": lat, "lon": lon})


def test_entrainment_hand_computed():
    lat, lon = np.array([40.0, 41.0, 42.0]), np.array([0.0, 1.0, 2.0, 3.0])
    times = pd.date_range("2000-01-01", periods=3, freq="D")
    t = (np.arange(3) * 86400.0)[:, None, None]
    lam = np.deg2rad(lon)[None, None, :]
    one = np.ones((3, lat.size, lon.size))
    # deepening at 1e-5 m s-1 with h = 50 + 100 lambda carried east by u = 0.1 m s-1:
    # w_e = dh/dt + (1 / (R cos lat)) d(h u)/d lambda = 1e-5 + 10 / (R cos lat), water at T_below enters
    h = _grid(50.0 + 1e-5 * t + 100.0 * lam * one, lat, lon, times)
    t_ml, t_below = _grid(18.0 * one, lat, lon, times), _grid(12.0 * one, lat, lon, times)
    out = concepts.entrainment(h, t_ml, t_below, u=_grid(0.1 * one, lat, lon, times), v=_grid(0 * one, lat, lon, times))
    w_e = 1e-5 + 10.0 / (6.371e6 * np.cos(np.deg2rad(41.0)))
    assert float(out["w_e"][1, 1, 2]) == pytest.approx(w_e, rel=1e-9)
    assert float(out["q_entr"][1, 1, 2]) == pytest.approx(1026.0 * 3991.86795711963 * w_e * 12.0, rel=1e-9)
    # shoaling at 2e-5 m s-1, no current: the layer leaves water at its own temperature behind
    h = _grid(80.0 - 2e-5 * t * one, lat, lon, times)
    out = concepts.entrainment(h, t_ml, t_below)
    np.testing.assert_allclose(out["q_entr"].values, 1026.0 * 3991.86795711963 * -2e-5 * 18.0, rtol=1e-9)
    assert out["q_entr"].attrs["units"] == "W m-2" and "T_below where w_e > 0" in out["q_entr"].attrs["formula"]


def test_lateral_diffusion_hand_computed_and_conserving():
    lat, lon = np.array([30.0, 31.0, 32.0, 33.0]), np.linspace(-10.0, -5.0, 6)
    times = pd.date_range("2000-01-01", periods=2, freq="D")
    lam = np.deg2rad(lon)
    # T = 3 lambda^2 (radians), h = 40 m: div(h grad T) = 40 * 6 / (R cos lat)^2 away from the edges
    T = _grid(np.broadcast_to(3.0 * lam**2, (2, 4, 6)).copy(), lat, lon, times)
    h = _grid(np.full((2, 4, 6), 40.0), lat, lon, times)
    q = concepts.lateral_diffusion(T, h)
    want = 1026.0 * 3991.86795711963 * 2000.0 * 40.0 * 6.0 / (6.371e6 * np.cos(np.deg2rad(lat))) ** 2
    np.testing.assert_allclose(q.values[:, :, 1:-1], np.broadcast_to(want[:, None], (2, 4, 4)), rtol=1e-9)
    assert q.attrs["kappa_m2_s"] == KAPPA and q.attrs["units"] == "W m-2"
    # no flux through land or the edges: the area integral vanishes (heat is only moved)
    mask = np.ones((4, 6), bool)
    mask[1, 2] = mask[2, 4] = False
    rng = np.random.default_rng(0)
    T = _grid(rng.normal(15, 2, (2, 4, 6)), lat, lon, times)
    h = _grid(rng.uniform(20, 80, (2, 4, 6)), lat, lon, times)
    q = concepts.lateral_diffusion(T, h, mask=mask).values
    area = (R_EARTH**2 * np.cos(np.deg2rad(lat)) * np.deg2rad(1.0) * np.deg2rad(1.0))[:, None]
    assert np.isnan(q[:, ~mask]).all()
    assert abs(np.nansum(q * area, axis=(1, 2))).max() < 1e-9 * np.nansum(np.abs(q) * area)


def _first_below(col, depth, h):
    k = np.nonzero(depth > h)[0]
    return col[k[0]] if k.size else col[np.isfinite(col)][-1]


class _ByHand:
    """The IBI sample's terms at one interior point, from the raw arrays with numpy."""

    def __init__(self, raw, h):
        self.th, self.uo, self.vo, self.eta = (raw[v].values.astype(float) for v in ("thetao", "uo", "vo", "zos"))
        self.depth = raw["depth"].values.astype(float)
        self.phi = np.deg2rad(raw["latitude"].values.astype(float))
        self.lam = np.deg2rad(raw["longitude"].values.astype(float))
        self.bounds = budget.level_bounds(self.depth)
        self.h = h

    def ml_mean(self, field, i, j):  # cells inside [0, h], the one holding h partially
        w = np.clip(np.minimum(self.bounds[1:], self.h[:, i, j, None]) - self.bounds[:-1], 0, None)
        return (field[:, :, i, j] * w).sum(1) / w.sum(1)

    def ddx(self, a, i, j):
        return (a[:, i, j + 1] - a[:, i, j - 1]) / ((self.lam[j + 1] - self.lam[j - 1]) * R_EARTH * np.cos(self.phi[i]))

    def ddy(self, a, i, j):
        return (a[:, i + 1, j] - a[:, i - 1, j]) / ((self.phi[i + 1] - self.phi[i - 1]) * R_EARTH)

    def q_entr(self, i, j, dt):
        h, phi, lam = self.h, self.phi, self.lam
        hu = {jj: h[:, i, jj] * self.ml_mean(self.uo, i, jj) for jj in (j - 1, j + 1)}
        hv = {ii: h[:, ii, j] * np.cos(phi[ii]) * self.ml_mean(self.vo, ii, j) for ii in (i - 1, i + 1)}
        div = (
            (hu[j + 1] - hu[j - 1]) / (lam[j + 1] - lam[j - 1]) + (hv[i + 1] - hv[i - 1]) / (phi[i + 1] - phi[i - 1])
        ) / (R_EARTH * np.cos(phi[i]))
        w_e = (h[1, i, j] - h[0, i, j]) / dt + div
        t_b = np.array([_first_below(self.th[n, :, i, j], self.depth, h[n, i, j]) for n in range(2)])
        return RC * w_e * np.where(w_e > 0, t_b, self.th[:, 0, i, j])

    def q_diff(self, i, j):  # flux form, h averaged onto the faces, each face's own spacing (finite volumes)
        h, phi, lam, T = self.h, self.phi, self.lam, self.th[:, 0]
        cos = np.cos(phi[i])
        width_l, width_p = 0.5 * (lam[j + 1] - lam[j - 1]), 0.5 * (phi[i + 1] - phi[i - 1])  # the cell (rad)
        east = 0.5 * (h[:, i, j] + h[:, i, j + 1]) * (T[:, i, j + 1] - T[:, i, j]) / (lam[j + 1] - lam[j])
        west = 0.5 * (h[:, i, j - 1] + h[:, i, j]) * (T[:, i, j] - T[:, i, j - 1]) / (lam[j] - lam[j - 1])
        north = (
            0.5
            * (h[:, i, j] + h[:, i + 1, j])
            * np.cos(0.5 * (phi[i] + phi[i + 1]))
            * (T[:, i + 1, j] - T[:, i, j])
            / (phi[i + 1] - phi[i])
        )
        south = (
            0.5
            * (h[:, i - 1, j] + h[:, i, j])
            * np.cos(0.5 * (phi[i - 1] + phi[i]))
            * (T[:, i, j] - T[:, i - 1, j])
            / (phi[i] - phi[i - 1])
        )
        lap = ((east - west) / (width_l * cos**2) + (north - south) / (width_p * cos)) / R_EARTH**2
        return RC * KAPPA * lap

    def q_geo(self, i, j):
        f = coriolis(np.rad2deg(self.phi[i]))
        T = self.th[:, 0]
        u_g, v_g = -(G / f) * self.ddy(self.eta, i, j), (G / f) * self.ddx(self.eta, i, j)
        return -RC * self.h[:, i, j] * (u_g * self.ddx(T, i, j) + v_g * self.ddy(T, i, j))


def test_ibi_sample_yields_every_concept_its_variables_allow(tmp_path):
    raw = budget.open_xoa_sample()  # thetao, so, uo, vo, zos: no heat flux, no wind stress
    path = tmp_path / "ibi.nc"
    raw.to_netcdf(path)
    got = data.open_store(path, validate_schema=False).load()
    assert {"q_geo", "q_entr", "q_diff", "mlhc", "dmlhc_dt"} <= set(got.data_vars)
    assert not {"q_surf", "q_ekman"} & set(got.data_vars)
    g = got.isel(member=0)
    by_hand = _ByHand(raw, g["mld"].values)
    dt = 86400.0  # two daily means, one day apart: both ends one-sided, one tendency
    for i, j in [(2, 3), (4, 7), (5, 10)]:
        np.testing.assert_allclose(g["u_ml"].values[:, i, j], by_hand.ml_mean(by_hand.uo, i, j), rtol=1e-9)
        np.testing.assert_allclose(g["q_entr"].values[:, i, j], by_hand.q_entr(i, j, dt), rtol=1e-6)
        np.testing.assert_allclose(g["q_diff"].values[:, i, j], by_hand.q_diff(i, j), rtol=1e-6)
        np.testing.assert_allclose(g["q_geo"].values[:, i, j], by_hand.q_geo(i, j), rtol=1e-6)
        mlhc = RC * by_hand.h[:, i, j] * by_hand.th[:, 0, i, j]
        np.testing.assert_allclose(g["mlhc"].values[:, i, j], mlhc, rtol=1e-9)
        np.testing.assert_allclose(g["dmlhc_dt"].values[:, i, j], (mlhc[1] - mlhc[0]) / dt, rtol=1e-9)
    for k in ("q_geo", "q_entr", "q_diff", "dmlhc_dt"):
        assert got[k].attrs["units"] == "W m-2" and got[k].attrs["formula"], k
    assert "computed ['mlhc', 'dmlhc_dt', 'q_geo', 'q_entr', 'q_diff']" in got.attrs["mapping"]


def test_nemo_currents_on_their_own_depth_dims_enter_w_e():
    raw = budget.open_xoa_sample()
    nemo_like = raw.assign(uo=raw["uo"].rename(depth="depthu"), vo=raw["vo"].rename(depth="depthv"))
    a, b = data.from_nemo(raw), data.from_nemo(nemo_like)
    np.testing.assert_array_equal(b["u_ml"].values, a["u_ml"].values)
    np.testing.assert_array_equal(b["q_entr"].values, a["q_entr"].values)
