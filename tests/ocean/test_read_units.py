"""Variables, units and signs of real products as the reader reads them: each product-like dataset
(tests/ocean/product_fixtures.py, written from the CMIP6 CMOR tables, ORAS5 / NEMO, Copernicus Marine,
MOM6 and CESM POP2 documentation) is read back to the synthetic ocean it was written from, with every
unit conversion checked against a hand conversion or gsw, or refused in one line naming the problem
and the fix."""

import sys
from pathlib import Path

import gsw
import numpy as np
import pytest
import xarray as xr

sys.path.insert(0, str(Path(__file__).parent))  # the fixtures beside this file (pytest runs --import-mode=importlib)
import product_fixtures as pf  # noqa: E402

from ocean import budget, data  # noqa: E402
from scimech.errors import ConfigError, DataValidationError, DimensionError, UnitsError  # noqa: E402
from scimech.studies.reading import Reading  # noqa: E402

# values pass through float64 unchanged or through one multiplication / offset (pint): 1e-12 relative
RTOL = 1e-12


@pytest.fixture(scope="module")
def truth():
    return pf.truth(years=3)


def read(ds: xr.Dataset, **kw) -> tuple[xr.Dataset, Reading]:
    reading = Reading("")
    return data.from_nemo(ds, reading=reading, **kw), reading


def same(got: xr.Dataset, truth: xr.Dataset, names=("sst", "zos", "tauu", "tauv", "qnet", "mld")) -> None:
    for v in names:
        np.testing.assert_allclose(
            got[v].isel(member=0).values, truth[v].isel(member=0).values, rtol=RTOL, atol=1e-12, err_msg=v
        )


# --- CF standard names and product names --------------------------------------------------------------
def test_cmip6_variables_are_found_by_standard_name_and_read_as_the_truth(truth):
    got, reading = read(pf.cmip6(truth))
    same(got, truth)
    assert reading.row("sst").variable == "tos" and reading.row("sst").found_by.startswith("standard_name")
    assert reading.row("mld").variable == "mlotst" and reading.row("depth").variable == "lev"


def test_a_variable_under_a_name_no_table_knows_is_found_by_its_standard_name(truth):
    ds = pf.cmip6(truth, with_3d=False).rename(tos="my_sea_surface_temp", hfds="net_flux")
    got, reading = read(ds)
    same(got, truth, ("sst", "qnet"))
    assert reading.row("qnet").found_by == "standard_name (surface_downward_heat_flux_in_sea_water)"


def test_cmip6_lev_with_thetao_gives_t_sub_not_a_lacks_t_sub(truth):
    """CMIP6's vertical axis is `lev` (axis Z): t_sub is thetao at the first level below the MLD, which the
    fixture's two-layer column makes the truth's t_sub exactly."""
    got, reading = read(pf.cmip6(truth))
    same(got, truth, ("t_sub",))
    assert reading.row("t_sub").found_by == "derived"


def test_copernicus_marine_degrees_c_and_depth_read(truth):
    got, reading = read(pf.cmems(truth))
    same(got, truth, ("sst", "mld", "zos", "t_sub"))  # sst = thetao at 0.5 m: the truth's sst in the column
    assert reading.row("thetao").units_found == "degrees_C" and reading.row("thetao").units_used == "degree_Celsius"


def test_mom6_native_names_read(truth):
    got, reading = read(pf.mom6(truth, names="native"))
    same(got, truth, ("sst", "zos", "qnet", "mld"))
    assert reading.row("zos").variable == "SSH" and reading.row("depth").variable == "z_l"


def test_oras5_in_kelvin_converted_by_pint_and_said(truth):
    got, reading = read(pf.oras5(truth, kelvin=True))
    same(got, truth, ("sst", "t_sub"))
    assert reading.row("sst").conversion == "K -> degree_Celsius (pint)"


# --- units: converted by pint, checked here by hand -----------------------------------------------------
@pytest.mark.parametrize(
    "var, quantity, units, factor",
    [
        ("mlotst", "mld", "cm", 100.0),  # 1 m = 100 cm
        ("zos", "zos", "mm", 1000.0),  # 1 m = 1000 mm
        ("tauuo", "tauu", "mN m-2", 1000.0),  # 1 N m-2 = 1000 mN m-2
        ("tauvo", "tauv", "dyn cm-2", 10.0),  # 1 N m-2 = 1e5 dyn / 1e4 cm2 = 10 dyn cm-2
        ("hfds", "qnet", "mW m-2", 1000.0),
    ],
)
def test_units_are_converted_to_the_studys(truth, var, quantity, units, factor):
    ds = pf.cmip6(truth, with_3d=False)
    ds[var] = (ds[var] * factor).assign_attrs({**ds[var].attrs, "units": units})
    got, reading = read(ds)
    same(got, truth, (quantity,))
    assert reading.row(quantity).units_found == units and "(pint)" in reading.row(quantity).conversion


def test_kelvin_and_fahrenheit_sst_converted(truth):
    for units, to in (("K", lambda c: c + 273.15), ("degF", lambda c: c * 9 / 5 + 32)):
        ds = pf.cmip6(truth, with_3d=False)
        ds["tos"] = to(ds["tos"]).assign_attrs({**ds["tos"].attrs, "units": units})
        got, _ = read(ds)
        # F -> C: (F - 32) 5 / 9 in float64: 1e-12 relative of values ~ 20
        np.testing.assert_allclose(got["sst"].values, truth["sst"].values, rtol=1e-12, atol=1e-12, err_msg=units)


def test_pop2_centimetres_and_dynes_converted(truth):
    """POP2 writes SSH and HMXL in cm, TAUX in dyne/centimeter^2 and z_t in centimeters."""
    got, reading = read(pf.cesm_pop(truth))
    same(got, truth, ("zos", "mld", "tauu", "tauv", "qnet", "t_sub"))
    assert reading.row("depth").units_found == "centimeters" and reading.row("depth").units_used == "m"


def test_a_field_without_units_is_refused_naming_it_and_the_unit_expected(truth):
    ds = pf.cmip6(truth, with_3d=False)
    ds = pf.without(ds.assign(mlotst=ds["mlotst"] * 100.0), "mlotst", "units")  # cm, no units: never read as m
    with pytest.raises(UnitsError, match=r"^'mld' \(mlotst\) \(expected 'm'\) has no units attribute"):
        read(ds)


def test_depth_in_cm_without_units_is_refused_not_read_as_metres(truth):
    ds = pf.without(pf.cmip6(truth), "lev", "units")
    ds = ds.assign_coords(lev=("lev", ds["lev"].values * 100.0, ds["lev"].attrs))
    with pytest.raises(UnitsError, match=r"^Depth 'depth' \(lev\) has no units attribute.*expected 'm'"):
        read(ds)


def test_depth_in_cm_with_units_gives_the_truths_t_sub(truth):
    ds = pf.cmip6(truth)
    ds = ds.assign_coords(lev=("lev", ds["lev"].values * 100.0, {**ds["lev"].attrs, "units": "cm"}))
    got, reading = read(ds.drop_vars("mlotst").assign(mlotst=ds["mlotst"]))
    same(got, truth, ("t_sub",))
    assert reading.row("depth").conversion == "cm -> m (pint)"


def test_units_of_another_quantity_or_unreadable_are_refused(truth):
    ds = pf.cmip6(truth, with_3d=False)
    ds["tos"].attrs["units"] = "m"
    with pytest.raises(UnitsError, match=r"'sst' \(tos\) has units 'm', which are not 'degree_Celsius'"):
        read(ds)
    ds = pf.cmip6(truth, with_3d=False)
    ds["hfds"].attrs["units"] = "watts per banana"
    with pytest.raises(
        UnitsError, match=r"'qnet' \(hfds\) has units 'watts per banana', which are not units pint reads"
    ):
        read(ds)


# --- signs ------------------------------------------------------------------------------------------
def test_an_upward_heat_flux_is_flipped_to_downward_into_the_sea(truth):
    ds = pf.upward(pf.cmip6(truth, with_3d=False), "hfds", "surface_upward_heat_flux_in_air")
    got, reading = read(ds)
    same(got, truth, ("qnet",))
    ok = np.isfinite(truth["q_surf"].values)
    assert np.corrcoef(got["q_surf"].values[ok], truth["q_surf"].values[ok])[0, 1] > 1 - 1e-12  # +1, not -1
    assert "sign flipped to downward" in reading.row("qnet").conversion


def test_positive_up_alone_flips_a_stress_and_a_flux(truth):
    ds = pf.cmip6(truth, with_3d=False)
    for v in ("hfds", "tauuo"):
        ds = pf.upward(ds, v)
        ds[v].attrs.pop("standard_name")
    got, reading = read(ds)
    same(got, truth, ("qnet", "tauu"))
    assert reading.row("tauu").conversion == "positive: up: sign flipped to downward into the sea"


def test_a_sign_the_attributes_contradict_is_refused(truth):
    ds = pf.upward(pf.cmip6(truth, with_3d=False), "hfds")  # standard_name says downward, positive says up
    with pytest.raises(
        UnitsError,
        match=r"'qnet' \(hfds\): its standard_name .* says downward but its positive "
        r"attribute says 'up'.*Fix: correct",
    ):
        read(ds)


def test_depth_and_mld_positive_up_are_flipped(truth):
    ds = pf.upward(pf.upward(pf.cmip6(truth), "lev"), "mlotst")
    got, reading = read(ds)
    same(got, truth, ("mld", "t_sub"))
    assert "positive up -> positive down" in reading.row("depth").conversion
    assert "positive up -> positive down" in reading.row("mld").conversion


# --- salinity ---------------------------------------------------------------------------------------
def _mld_by_hand(sst: float, t_sub: float, sa: float, mld: float) -> float:
    """The sigma0-threshold MLD (0.03 kg m-3 from 10 m) of the fixture's two-layer column on DEPTHT, by gsw:
    sigma0 is sst's down to the last level above the truth's MLD and t_sub's below; linear between them."""
    z = pf.DEPTHT
    k = int(np.nonzero(z > mld)[0][0])  # first level in the lower layer
    s_up = gsw.sigma0(sa, gsw.CT_from_pt(sa, sst))
    s_dn = gsw.sigma0(sa, gsw.CT_from_pt(sa, t_sub))
    if s_dn < s_up + 0.03:
        return float(z[-1])
    top = max(z[k - 1], 10.0)
    return float(top + 0.03 * (z[k] - top) / (s_dn - s_up))


def test_a_mass_fraction_salinity_gives_the_mld_of_g_per_kg_and_of_gsw(truth):
    """Salinity in kg kg-1 (0.035) was read as practical salinity 0.035: MLD 53 m instead of 20 m."""
    base = pf.cmip6(truth).drop_vars("mlotst")
    grams = base.assign(so=base["so"].assign_attrs(units="g/kg", standard_name="sea_water_absolute_salinity"))
    fraction = base.assign(so=(base["so"] / 1000).assign_attrs(units="kg kg-1", standard_name="sea_water_salinity"))
    got_g, _ = read(grams)
    got_f, reading = read(fraction)
    np.testing.assert_allclose(got_f["mld"].values, got_g["mld"].values, rtol=1e-12, equal_nan=True)
    assert reading.row("so").units_used == "g kg-1" and "x1000" in reading.row("so").conversion
    one = truth.isel(member=0)
    for t, i, j in [(0, 2, 3), (7, 4, 5), (20, 1, 6)]:
        want = _mld_by_hand(float(one["sst"][t, i, j]), float(one["t_sub"][t, i, j]), 35.0, float(one["mld"][t, i, j]))
        # gsw's sigma0 in both; the reader interpolates as _mld_by_hand: 1e-9 relative
        assert float(got_f["mld"][0, t, i, j]) == pytest.approx(want, rel=1e-9)


def test_units_one_with_values_below_one_is_a_mass_fraction(truth):
    base = pf.cmip6(truth).drop_vars("mlotst")
    frac = base.assign(so=(base["so"] / 1000).assign_attrs(units="1", standard_name="sea_water_salinity"))
    grams = base.assign(so=base["so"].assign_attrs(units="g kg-1"))
    np.testing.assert_allclose(read(frac)[0]["mld"].values, read(grams)[0]["mld"].values, rtol=1e-12, equal_nan=True)


def test_practical_and_absolute_salinity_reach_gsw_as_what_they_are(truth):
    """Practical salinity goes through gsw.SA_from_SP; Absolute Salinity (g/kg) is SA as given."""
    ds = pf.cmip6(truth).isel(time=slice(0, 2))
    thetao = ds["thetao"].rename(lev="depth")
    practical = ds["so"].rename(lev="depth").assign_attrs(units="1", standard_name="sea_water_practical_salinity")
    absolute = practical.assign_attrs(units="g kg-1", standard_name="sea_water_absolute_salinity")
    sa_p = budget.teos10(thetao, practical)["SA"]
    sa_a = budget.teos10(thetao, absolute)["SA"]
    np.testing.assert_array_equal(sa_a.values, absolute.values)
    p = gsw.p_from_z(-pf.DEPTHT[1], float(ds["lat"][2]))
    want = gsw.SA_from_SP(35.0, p, float(ds["lon"][3]), float(ds["lat"][2]))
    assert float(sa_p[0, 1, 2, 3]) == pytest.approx(float(want), rel=1e-12)


def test_salinity_without_units_refused_unless_cf_calls_it_dimensionless(truth):
    ds = pf.cmip6(truth).drop_vars("mlotst")
    ds = pf.without(ds, "so", "units")
    with pytest.raises(UnitsError, match=r"'so' has no units attribute, so practical salinity .* cannot be told apart"):
        read(ds)
    ds["so"].attrs["standard_name"] = "sea_water_practical_salinity"  # CF canonical units "1"
    got, reading = read(ds)
    assert reading.row("so").units_used == "1" and np.isfinite(got["mld"].values).any()


# --- extra dims ------------------------------------------------------------------------------------
def test_a_realization_dim_is_read_as_members_not_lacks_sst(truth):
    ds = pf.cmip6(truth, realization=2, with_3d=False)
    ds["tos"] = ds["tos"] + xr.DataArray([0.0, 1.0], dims="realization")  # members differ by 1 degC
    got, reading = read(ds)
    assert got.sizes["member"] == 2
    np.testing.assert_allclose(got["sst"].isel(member=1).values, truth["sst"].isel(member=0).values + 1.0, rtol=RTOL)
    one, _ = read(ds, member=1)
    np.testing.assert_allclose(one["sst"].isel(member=0).values, truth["sst"].isel(member=0).values + 1.0, rtol=RTOL)
    assert "realization" in reading.sections["dims"]["ensemble"]


def test_an_extra_dim_is_refused_naming_it_and_the_option_or_chosen(truth):
    ds = pf.cmip6(truth, with_3d=False)
    ds = xr.concat([ds, ds.assign(tos=ds["tos"] + 2.0)], dim="experiment")
    ds["time_bnds"] = ds["time_bnds"].isel(experiment=0, drop=True)
    with pytest.raises(
        DimensionError,
        match=r"^'sst' \(tos\) has the dim 'experiment' \(2 values\).*"
        r"--select experiment=INDEX",
    ):
        read(ds)
    got, _ = read(ds, select={"experiment": 1})
    np.testing.assert_allclose(got["sst"].values, truth["sst"].values + 2.0, rtol=RTOL)
    with pytest.raises(ConfigError, match=r"--select depth=0: the product has no dim 'depth'"):
        read(ds, select={"depth": 0})
    with pytest.raises(ConfigError, match=r"--member 0: the product has no ensemble dim"):
        read(ds, member=0, select={"experiment": 0})


# --- the mask --------------------------------------------------------------------------------------
def test_nemo_mesh_mask_with_3d_tmask_gives_the_truths_mask(truth, tmp_path):
    bottom = np.where(truth["mask"].values == 1, 3, 0)  # ocean columns 3 levels deep: land below
    path = pf.write_netcdf(pf.oras5(truth), tmp_path / "oras5.nc")
    mesh = pf.mesh_mask(truth, bottom=bottom)
    got = data.open_store(path, mesh_mask=mesh, validate_schema=False)
    np.testing.assert_array_equal(got["mask"].values, truth["mask"].values)


def test_a_mask_that_counts_land_as_ocean_is_refused_naming_the_mask(truth):
    ds = pf.oras5(truth)
    ds["tmaskutil"] = (("y", "x"), np.ones(truth["mask"].shape, np.int8))  # every point "ocean"
    land = int((truth["mask"] == 0).sum())
    with pytest.raises(DataValidationError, match=rf"The mask .* counts {land} point\(s\) as ocean where sst is NaN"):
        read(ds)


def test_conservative_temperature_is_used_as_ct_not_converted_again(truth):
    """A product storing Conservative Temperature (standard_name says so) reaches gsw.sigma0 as CT."""
    ds = pf.cmip6(truth).isel(time=slice(0, 2))
    thetao = ds["thetao"].rename(lev="depth").assign_attrs(standard_name="sea_water_conservative_temperature")
    so = ds["so"].rename(lev="depth").assign_attrs(units="g kg-1", standard_name="sea_water_absolute_salinity")
    got = budget.teos10(thetao, so)
    ct = float(thetao[1, 2, 2, 3])
    assert float(got["CT"][1, 2, 2, 3]) == ct
    assert float(got["sigma0"][1, 2, 2, 3]) == pytest.approx(float(gsw.sigma0(35.0, ct)), rel=1e-12)
