"""Your own ocean data: a store in ORAS5 / NEMO layout (2-D nav_lat / nav_lon, time_counter,
deptht, temperatures in K) maps back onto the synthetic ocean it was written from; the CMEMS
sample shipped by xoa maps; each bad input gives one clear error."""

import numpy as np
import pytest
import xarray as xr

from ocean import budget, data, synthetic
from scimech.cli.commands import main
from scimech.errors import DataValidationError, MissingVariableError, UnitsError

DEPTHT = np.array([0.5, 5.0, 15.0, 30.0, 60.0, 100.0, 200.0, 400.0])  # m, below every synthetic MLD (< 210 m)
STUDY = [*synthetic.INPUTS, *synthetic.CONCEPTS, "dmlhc_dt", "mlhc"]


@pytest.fixture(scope="module")
def cf():
    """The synthetic ocean (one member): the truth every mapping is compared with."""
    return synthetic.generate(n_members=1, years=3, ny=6, nx=8, seed=5)


def nemo_layout(cf: xr.Dataset, *, depth_up: bool = False, kelvin: bool = True) -> xr.Dataset:
    """The synthetic ocean as NEMO writes it: votemper (K) on (time_counter, deptht, y, x) equal to
    sst down to the MLD and to t_sub below it, somxl010, sohefldo, sossheig, sozotaux, sometauy,
    2-D nav_lat / nav_lon, land as NaN, no member dim. The budget terms keep the study's names."""
    one = cf.isel(member=0, drop=True).rename(time="time_counter", lat="y", lon="x")
    depth = xr.DataArray(DEPTHT, dims="deptht")
    temp = xr.where(depth <= one["mld"], one["sst"], one["t_sub"]).transpose("time_counter", "deptht", "y", "x")
    temp = temp + (273.15 if kelvin else 0.0)
    lat2, lon2 = np.meshgrid(cf["lat"].values, cf["lon"].values, indexing="ij")
    ds = xr.Dataset(
        {
            "votemper": (temp.dims, temp.values, {"units": "K" if kelvin else "degC"}),
            "vosaline": (temp.dims, np.full(temp.shape, 35.0), {"units": "1e-3"}),
            "somxl010": (one["mld"].dims, one["mld"].values, {"units": "m"}),
            "sohefldo": (one["qnet"].dims, one["qnet"].values, {"units": "W/m2"}),
            "sossheig": (one["zos"].dims, one["zos"].values, {"units": "m"}),
            "sozotaux": (one["tauu"].dims, one["tauu"].values, {"units": "N/m2"}),
            "sometauy": (one["tauv"].dims, one["tauv"].values, {"units": "N/m2"}),
            **{
                k: (one[k].dims, one[k].values, {"units": one[k].attrs["units"]})
                for k in [*synthetic.CONCEPTS, "dmlhc_dt", "mlhc"]
            },
        },
        coords={
            "time_counter": one["time_counter"].values,
            "deptht": (
                "deptht",
                -DEPTHT if depth_up else DEPTHT,
                {"units": "m", "positive": "up" if depth_up else "down"},
            ),
            "nav_lat": (("y", "x"), lat2.astype(np.float32)),
            "nav_lon": (("y", "x"), lon2.astype(np.float32)),
        },
    )
    return ds


def assert_same_fields(got: xr.Dataset, cf: xr.Dataset) -> None:
    # float32 nav_lat / nav_lon: 1e-5 degrees; K -> degC: 273.15 added and taken away in float64
    np.testing.assert_allclose(got["lat"].values, cf["lat"].values, atol=1e-5)
    np.testing.assert_allclose(got["lon"].values, cf["lon"].values, atol=1e-5)
    np.testing.assert_array_equal(got["time"].values, cf["time"].values)
    np.testing.assert_array_equal(got["mask"].values, cf["mask"].values)
    for v in STUDY:
        assert got[v].dims == data.DIMS
        np.testing.assert_allclose(got[v].values, cf[v].values, rtol=1e-12, atol=1e-9, err_msg=v)
    assert got["sst"].attrs["units"] == "degree_Celsius" and got["qnet"].attrs["units"] == "W m-2"


@pytest.mark.parametrize("fmt", ["nc", "zarr"])
def test_nemo_store_round_trips_to_the_synthetic_fields(cf, tmp_path, fmt):
    path = tmp_path / f"oras5.{fmt}"
    ds = nemo_layout(cf)
    ds.to_netcdf(path) if fmt == "nc" else ds.to_zarr(path, zarr_format=3, consolidated=False)
    got = data.open_store(path, check_nans=True)
    assert_same_fields(got, cf)
    assert "votemper -> thetao" in got.attrs["mapping"] and "thetao: K -> degree_Celsius (pint)" in got.attrs["mapping"]


def test_depth_positive_up_and_celsius_map_the_same(cf):
    got = data.from_nemo(nemo_layout(cf, depth_up=True, kelvin=False))
    assert "depth positive up -> positive down" in got.attrs["mapping"]
    assert_same_fields(data.validate(got), cf)


def test_a_study_layout_store_is_left_as_it_is(cf):
    got = data.from_nemo(cf)
    assert got.attrs["mapping"] == ""
    assert_same_fields(got, cf)


def test_train_cli_reads_a_nemo_file(tmp_path, capsys):
    cf = synthetic.generate(n_members=1, years=4, ny=6, nx=8, seed=5)  # 4 years: a training year and the splits
    nc = tmp_path / "oras5.nc"
    nemo_layout(cf).to_netcdf(nc)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("window: 3\nwidth: 4\nbatch_size: 16\n")
    out = tmp_path / "run"
    assert main(["ocean", "train", "--data", str(nc), "--config", str(cfg), "--epochs", "1", "--out", str(out)]) == 0
    assert "RMSE" in capsys.readouterr().out
    stored = xr.open_zarr(out / "ocean.zarr", consolidated=False)
    assert stored.attrs["mapped_from"] == str(nc.resolve())
    assert_same_fields(stored.load(), cf)
    # the same folder with another dataset is refused, not mixed
    other = tmp_path / "other.nc"
    nemo_layout(cf.isel(time=slice(1, None))).to_netcdf(other)
    assert main(["ocean", "train", "--data", str(other), "--config", str(cfg), "--epochs", "1", "--out", str(out)]) == 2
    assert "holds a study of" in capsys.readouterr().err


def test_xoa_cmems_sample_maps(tmp_path):
    ds = budget.open_xoa_sample()  # CMEMS IBI: thetao (degrees_C), so, uo, vo, zos on depth / latitude / longitude
    got = data.from_nemo(ds)
    assert {"sst", "zos", "mld", "t_sub", "mask"} <= set(got.data_vars)
    th = ds["thetao"].values  # (time, depth, lat, lon), depth increasing
    np.testing.assert_array_equal(got["sst"].values[0], th[:, 0])
    mld = got["mld"].values[0]
    np.testing.assert_allclose(mld, budget.budget_terms(ds)["mld"].values)  # same TEOS-10 criterion
    depth = ds["depth"].values
    for t, i, j in [(0, 0, 0), (1, 3, 7), (0, 7, 12)]:  # by hand: the first level deeper than the MLD
        k = int(np.nonzero(depth > mld[t, i, j])[0][0])
        assert got["t_sub"].values[0, t, i, j] == th[t, k, i, j]
    # what the study still needs is named, with the product names and where budget terms come from
    path = tmp_path / "ibi.nc"
    ds.to_netcdf(path)
    with pytest.raises(MissingVariableError, match=r"qnet \(sohefldo/hfds[^)]*\).*q_surf from qnet"):
        data.open_store(path)


def test_wrong_units_are_one_clear_error(cf):
    """Units of another dimension are refused naming the variable; units pint converts are converted."""
    bad = nemo_layout(cf)
    bad["votemper"].attrs["units"] = "m"
    with pytest.raises(UnitsError, match=r"'thetao' \(votemper\) has units 'm', which are not 'degree_Celsius'"):
        data.from_nemo(bad)
    bad = nemo_layout(cf)
    bad["deptht"].attrs["units"] = "degC"
    with pytest.raises(UnitsError, match="Depth 'depth' \\(deptht\\) has units 'degC'"):
        data.from_nemo(bad)


def test_a_field_without_units_is_refused_not_assumed(cf):
    """A mixed-layer depth in cm with no units attribute was labelled 'm' and read 100x too deep."""
    bad = nemo_layout(cf)
    bad["somxl010"] = bad["somxl010"] * 100.0  # in cm, with no units
    bad["somxl010"].attrs.clear()
    bad["sohefldo"].attrs.pop("units")
    with pytest.raises(
        UnitsError,
        match=r"'mld' \(somxl010\) \(expected 'm'\), 'qnet' \(sohefldo\) "
        r"\(expected 'W m-2'\) have no units attribute",
    ):
        data.from_nemo(bad)
    assert data.from_nemo(nemo_layout(cf))["mld"].attrs["units"] == "m"  # given units are kept


def test_missing_variable_is_one_clear_error(cf, tmp_path):
    path = tmp_path / "no_flux.nc"
    nemo_layout(cf).drop_vars("sohefldo").to_netcdf(path)
    with pytest.raises(MissingVariableError, match=r"lacks qnet \(sohefldo/hfds[^)]*\)\. "):
        data.open_store(path)
    with pytest.raises(MissingVariableError, match="No latitude / longitude"):
        data.from_nemo(nemo_layout(cf).drop_vars(["nav_lat", "nav_lon"]))


def test_empty_or_unreadable_file_is_one_clear_error(cf, tmp_path):
    empty = tmp_path / "empty.nc"
    xr.Dataset().to_netcdf(empty)
    with pytest.raises(DataValidationError, match="empty.*no data variables"):
        data.open_store(empty)
    with pytest.raises(DataValidationError, match=r"dims \['time_counter'\] have length 0"):
        data.from_nemo(nemo_layout(cf).isel(time_counter=slice(0, 0)))
    junk = tmp_path / "junk.nc"
    junk.write_bytes(b"not netcdf")
    with pytest.raises(DataValidationError, match="not a zarr store or a netCDF file"):
        data.open_store(junk)
    with pytest.raises(DataValidationError, match="No ocean data"):
        data.open_store(tmp_path / "absent.nc")


def test_curvilinear_grid_is_kept_with_scale_factors_from_its_positions(cf):
    bad = nemo_layout(cf)
    bad["nav_lat"] = bad["nav_lat"] + 0.5 * np.arange(bad.sizes["x"])[None, :]  # rotated rows, as ORCA's north
    got = data.from_nemo(bad)
    assert "curvilinear grid" in got.attrs["mapping"] and "great-circle" in got.attrs["mapping"]
    np.testing.assert_array_equal(got["nav_lat"].values, bad["nav_lat"].values)
    # e2t along j (the y dim): the distance between rows, here 6 degrees of latitude, by hand
    dlat = float(cf["lat"][1] - cf["lat"][0])
    np.testing.assert_allclose(got["e2t"].values[:, 0], 6.371e6 * np.deg2rad(dlat), rtol=1e-6)
    assert got["sst"].dims == data.DIMS


def _attr_text(da: xr.DataArray) -> str:
    return " ".join(f"{k}={v}" for k, v in da.attrs.items())


def test_derived_fields_are_labelled_for_what_they_are(cf):
    got = data.from_nemo(budget.open_xoa_sample())  # thetao: sea_water_potential_temperature; so: unit_long PSU
    mld = got["mld"].attrs
    assert "Salinity" not in _attr_text(got["mld"]) and "unit_long" not in mld
    assert mld["units"] == "m" and mld["standard_name"] == "ocean_mixed_layer_thickness_defined_by_sigma_theta"
    assert "0.03 kg m-3" in mld["long_name"] and "'thetao' and 'so'" in mld["comment"]
    for v in ("t_sub", "sst"):
        assert got[v].attrs["standard_name"] == "sea_water_potential_temperature", v
        assert "potential temperature" in got[v].attrs["long_name"]
    # a NEMO product's votemper has no standard_name: t_sub is potential temperature and says so
    nemo = nemo_layout(cf).drop_vars("somxl010")
    got = data.from_nemo(nemo)
    assert got["t_sub"].attrs["standard_name"] == "sea_water_potential_temperature"
    assert "(votemper)" in got["t_sub"].attrs["comment"]
    # a product that stores conservative temperature gets it labelled so
    nemo["votemper"].attrs["standard_name"] = "sea_water_conservative_temperature"
    assert data.from_nemo(nemo)["t_sub"].attrs["standard_name"] == "sea_water_conservative_temperature"
    # a t_sub the product gives without a standard_name is not claimed to be either
    t_sub = cf["t_sub"].isel(member=0, drop=True).rename(time="time_counter", lat="y", lon="x")
    given = nemo_layout(cf).assign(t_sub=(t_sub.dims, t_sub.values, {"units": "degC"}))
    assert "standard_name" not in data.from_nemo(given)["t_sub"].attrs


def test_budget_terms_keep_the_products_coordinate_names():
    ds = budget.open_xoa_sample()
    b = budget.budget_terms(ds)
    assert {"latitude", "longitude", "time"} <= set(b.dims) and not {"lat", "lon"} & set(b.variables)
    np.testing.assert_array_equal(b["latitude"].values, ds["latitude"].values)
    assert "latitude -> lat -> latitude" in b.attrs["renamed"]
    assert "Salinity" not in _attr_text(b["mld"]) and "Salinity" not in _attr_text(b["theta_ml"])
