"""A NEMO-layout store written from the synthetic ocean (NEMO names, 2-D nav_lat / nav_lon, scale
factors, a grid turned by 90 degrees or rotated on the sphere, no budget terms): open_store derives
every concept and the target from the product variables alone, as the generator defines them, the
budget closes as on the regular grid, and `scimech ocean study --data` runs on the rotated store to
a report."""

import numpy as np
import pytest
import xarray as xr

from ocean import data, nemo, synthetic
from scimech.cli.commands import main

TERMS = ["q_surf", "q_ekman", "q_geo", "q_entr", "q_diff"]


@pytest.fixture(scope="module")
def truth():
    return synthetic.generate(n_members=1, years=3, ny=6, nx=8, seed=3)


def unrotate(got: xr.Dataset) -> xr.Dataset:
    """Back from the turned grid (lat dim <- west index y, lon dim <- north index x) to the generator's."""
    out = got.isel(member=0).drop_vars(["nav_lat", "nav_lon", "e1t", "e2t"]).rename(lat="j", lon="i")
    return out.isel(j=slice(None, None, -1)).rename(j="lon", i="lat").transpose("time", "lat", "lon")


def _opened(truth, tmp_path, rotate, **kw):
    path = tmp_path / f"nemo_{rotate}.zarr"
    product = nemo.nemo_layout(truth, rotate=rotate)
    assert not set(product.data_vars) & {*TERMS, "q_hidden", "dmlhc_dt", "mlhc", "sst", "t_sub"}
    product.to_zarr(path, zarr_format=3, consolidated=False)
    got = data.open_store(path, check_nans=True, **kw).load()
    assert "e1t" in got.coords and "computed ['q_surf', 'mlhc', 'dmlhc_dt', 'q_ekman'" in got.attrs["mapping"]
    return unrotate(got) if rotate else got.isel(member=0).drop_vars(["nav_lat", "nav_lon", "e1t", "e2t"])


def test_product_variables_alone_give_the_generators_budget(truth, tmp_path):
    t = truth.isel(member=0)
    got = _opened(truth, tmp_path, True, advection="upwind")
    for k in ("sst", "mld", "t_sub"):  # derived from votemper / somxl010: exact
        np.testing.assert_allclose(got[k].values, t[k].values, rtol=1e-12, atol=1e-9, err_msg=k)
    # month means: the discretisation bounds of tests/ocean/test_concepts.py (rms error / rms truth)
    for k, bound in {
        "q_surf": 1e-12,
        "q_entr": 0.2,
        "q_diff": 0.03,
        "q_ekman": 0.15,
        "q_geo": 0.05,
        "dmlhc_dt": 0.25,
    }.items():
        ok = np.isfinite(t[k].values)
        err = got[k].values[ok] - t[k].values[ok]
        assert np.sqrt(np.mean(err**2)) <= bound * np.sqrt(np.mean(t[k].values[ok] ** 2)), k


def test_the_budget_closes_on_the_turned_grid_as_on_the_regular_one(truth, tmp_path):
    turned, regular = _opened(truth, tmp_path, True), _opened(truth, tmp_path, False)
    for k in [*TERMS, "dmlhc_dt"]:
        # the same numbers but q_diff's face factors (mean of T-point cos(lat) vs cos at the face)
        tol = 2e-3 if k == "q_diff" else 1e-9
        np.testing.assert_allclose(
            turned[k].values, regular[k].values, rtol=0, atol=tol * float(np.abs(regular[k]).max()), err_msg=k
        )
    hidden = truth["q_hidden"].isel(member=0).values
    for got in (turned, regular):
        residual = (got["dmlhc_dt"] - sum(got[k] for k in TERMS)).values
        ok = np.isfinite(hidden)
        # what no concept names is left: the hidden eddy flux (r 0.92 measured), plus discretisation
        assert np.corrcoef(residual[ok], hidden[ok])[0, 1] > 0.85


def test_on_a_grid_rotated_on_the_sphere_the_terms_are_the_generators(truth, tmp_path):
    from ocean.constants import coriolis

    product = nemo.nemo_layout(truth, rotate=False, tilt=25.0)
    la, lo = product["nav_lat"].values.astype(float), product["nav_lon"].values.astype(float)
    # the grid lines cross the parallels at 20-35 degrees (i lines) and the meridians alike (j lines)
    along_i = np.rad2deg(np.arctan2(np.diff(la, axis=1), np.diff(lo, axis=1) * np.cos(np.deg2rad(la[:, 1:]))))
    along_j = np.rad2deg(np.arctan2(-np.diff(lo, axis=0) * np.cos(np.deg2rad(la[1:])), np.diff(la, axis=0)))
    assert 18 < along_i.min() and along_i.max() < 37 and 18 < along_j.min() and along_j.max() < 37
    path = tmp_path / "tilted.zarr"
    product.to_zarr(path, zarr_format=3, consolidated=False)
    got = data.open_store(path, check_nans=True, advection="upwind").load().isel(member=0)
    regular = _opened(truth, tmp_path, False, advection="upwind")
    # the scale factors are the generator's (a rotation keeps distances): every term is the regular
    # grid's to round-off, but q_ekman and q_geo, which take f at the geographic latitude (nav_lat)
    # where the generator took it at its own: theirs times f(generator) / f(nav_lat), 0.78 to 1.25 here
    ratio = coriolis(truth["lat"].values)[:, None] / coriolis(got["nav_lat"].values.astype(float))
    for k in [*TERMS, "dmlhc_dt", "mlhc"]:
        want = regular[k].values * (ratio if k in ("q_ekman", "q_geo") else 1.0)
        np.testing.assert_allclose(got[k].values, want, rtol=0, atol=1e-9 * np.nanmax(np.abs(want)), err_msg=k)
    hidden = truth["q_hidden"].isel(member=0).values
    residual = (got["dmlhc_dt"] - sum(got[k] for k in TERMS)).values
    ok = np.isfinite(hidden)
    assert np.corrcoef(residual[ok], hidden[ok])[0, 1] > 0.85  # 0.952, as on the regular grid (0.952)


@pytest.mark.slow  # a whole study
def test_the_study_runs_end_to_end_on_a_nemo_store(truth, tmp_path, capsys):
    store = tmp_path / "oras5_like.zarr"
    # 7 years: the quick size (window 6, a training year, validation and test) needs 75 months
    nemo.nemo_layout(synthetic.generate(n_members=1, years=7, ny=6, nx=8, seed=3), rotate=False, tilt=25.0).to_zarr(
        store, zarr_format=3, consolidated=False
    )
    out = tmp_path / "study"
    assert (
        main(
            [
                "ocean",
                "study",
                "--data",
                str(store),
                "--out",
                str(out),
                "--seeds",
                "0",
                "--regimes",
                "mixed",
                "--epochs",
                "1",
            ]
        )
        == 0
    )
    assert (out / "report.md").exists() and (out / "findings.txt").exists()
    # the report on a product opens with what was read, names it, its frequency and the lead in its own steps,
    # and carries no planted truth (it has none): it said "the synthetic mixed-layer ocean" and "2 of 6 recovered"
    report = (out / "report.md").read_text()
    opening = report.split("## What was read", 1)
    assert len(opening) == 2 and "## " not in opening[0].replace("# OceanCBM", "").replace(
        "## Is the model competent?", ""
    )
    assert opening[0].index("## Is the model competent?") >= 0  # the model's competence first, then what was read
    assert "| sst | votemper at the shallowest level" in report or "| sst | thetao at the shallowest level" in report
    assert "1 month ahead from 6 months of inputs, on your product NEMO / ORAS5 output" in report
    assert "synthetic mixed-layer ocean" not in report and "Planted truth" not in report and "q_hidden" not in report
    recovery = (out / "recovery.txt").read_text().splitlines()
    assert recovery[0].startswith("ocean planted truth: none") and "recovered" not in recovery[0].split("(")[0]
    stored = xr.open_zarr(out / "ocean.zarr", consolidated=False)
    assert {"e1t", "e2t", "nav_lat"} <= set(stored.coords) and "q_hidden" not in stored


def test_the_product_settings_reach_the_terms_and_are_checked(truth, tmp_path):
    from ocean.plan import make_config
    from ocean.run import prepare_data
    from scimech.errors import ConfigError

    store = tmp_path / "oras5_like.nc"
    nemo.nemo_layout(truth).to_netcdf(store)
    cfg = make_config({"data": str(store), "product": {"kappa": 500.0, "advection": "upwind"}})
    mapped = xr.open_zarr(prepare_data(cfg, tmp_path / "run"), consolidated=False)
    assert mapped["q_diff"].attrs["kappa_m2_s"] == 500.0 and mapped["q_geo"].attrs["advection"] == "upwind"
    for bad, says in [
        ({"kapa": 1.0}, r"Unknown product setting\(s\) \['kapa'\]"),
        ({"kappa": -1}, "positive"),
        ({"scheme": "backward"}, "'scheme' must be one of"),
        (3, "must be a mapping"),
    ]:
        with pytest.raises(ConfigError, match=says):
            make_config({"product": bad})


def test_budget_terms_of_3d_fields_on_the_turned_grid_are_the_regular_ones(truth):
    from ocean import budget

    short = truth.isel(time=slice(0, 4))
    turned = budget.budget_terms(nemo.nemo_layout(short, rotate=True))
    regular = budget.budget_terms(nemo.nemo_layout(short, rotate=False))
    assert "curvilinear grid" in turned.attrs["renamed"] and "e1t" in turned.coords
    back = unrotate(turned.rename(time_counter="time").expand_dims(member=[0]))
    reg = regular.rename(time_counter="time").drop_vars(["nav_lat", "nav_lon", "e1t", "e2t"])
    for k in ["mld", "mlhc", "dmlhc_dt", "q_geo", "q_ekman", "q_entr", "q_diff", "residual"]:
        tol = 2e-3 if k in ("q_diff", "residual") else 1e-9  # q_diff's face factors, as above
        np.testing.assert_allclose(
            back[k].transpose(*reg[k].dims).values,
            reg[k].values,
            rtol=0,
            atol=tol * float(np.abs(reg[k]).max()),
            err_msg=k,
        )
    assert np.isfinite(regular["q_entr"].values[np.isfinite(regular["mld"].values)]).all()


def test_area_means_on_the_turned_grid_weigh_cells_by_their_scale_factors(truth, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from ocean import plots

    got = data.from_nemo(nemo.nemo_layout(truth))
    fig = plots.ensemble_spread_figure(got)
    line = fig.axes[0].lines[0].get_ydata()
    # by hand: cos(latitude)-weighted (e1t e2t = R^2 dlat dlon cos(lat) here), not cos(grid index)
    t = got["mlhc"].isel(member=0).values
    w = np.cos(np.deg2rad(got["nav_lat"].values.astype(float))) * got["mask"].values
    np.testing.assert_allclose(line, np.nansum(t * w, axis=(1, 2)) / w.sum(), rtol=1e-6)


def test_a_store_with_nan_at_ocean_points_is_refused_before_the_study_reads_it(truth, tmp_path):
    # the training reader fills NaN with the mean (0 after normalising): NaN heat fluxes at ocean
    # points used to be trained on as zeros without a word
    from ocean.plan import make_config
    from ocean.run import prepare_data
    from scimech.errors import DataValidationError

    ds = nemo.nemo_layout(truth)
    q = [v for v in ds.data_vars if v.lower() in ("sohefldo", "qnet")][0]
    vals = ds[q].values.copy()
    first = vals.reshape(-1, *vals.shape[-2:])[0]
    iy, ix = np.argwhere(np.isfinite(first) & (first != 0))[0]  # an ocean cell (land is NaN or 0)
    vals.reshape(-1, *vals.shape[-2:])[0, iy, ix] = np.nan  # at the first time
    ds[q] = (ds[q].dims, vals, ds[q].attrs)
    store = tmp_path / "nan.nc"
    ds.to_netcdf(store)
    with pytest.raises(DataValidationError, match="NaN/inf values at ocean points"):
        prepare_data(make_config({"data": str(store)}), tmp_path / "run")
