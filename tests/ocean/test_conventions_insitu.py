"""In-situ temperature read as in-situ: converted to potential temperature with gsw before the MLD and the
temperatures the study reads are taken from it.

HYCOM's GOFS 3.1 output (the THREDDS / OPeNDAP metadata of GLBy0.08 ``expt_93.0``) gives ``water_temp``
(``standard_name: sea_water_temperature``, ``units: degC``) and ``salinity`` (``sea_water_salinity``,
``psu``) on ``depth`` (m, positive down); CF's ``sea_water_temperature`` is the in-situ temperature, which
warms with pressure in a column of uniform potential temperature (about 0.02 K per 100 m here). Read as
potential temperature, sigma0 falls with depth in a well-mixed layer and the threshold MLD comes out tens of
metres deep. The independent truth is gsw called directly on the column's own Conservative Temperature
(``gsw.t_from_CT`` made the in-situ values; ``gsw.pt0_from_t`` and ``gsw.sigma0`` read them back) and the
sigma0-threshold crossing (0.03 kg m-3 from 10 m, de Boyer Montegut et al. 2004) written out here.
"""

import gsw
import numpy as np
import xarray as xr

from ocean.data import open_store
from scimech.studies.reading import Reading

LAT = np.array([10.0, 25.0, 40.0])
LON = np.array([150.0, 160.0, 170.0, 180.0])
DEPTH = np.arange(0.0, 401.0, 5.0)  # m: every 5 m, the 10 m reference level among them
NT = 3
SP = 35.0


def _columns():
    """Conservative Temperature (time, depth, lat, lon): 22 degC down to a mixed-layer base D (60..140 m), then
    cooling weakly (0.004 K m-1, a density step of ~0.03 kg m-3 over ~30 m), and the in-situ temperature gsw makes of it."""
    k = np.arange(NT)[:, None, None, None]
    la = LAT[None, None, :, None]
    lo = LON[None, None, None, :]
    base = 60 + 20 * k + 0.5 * (la - 10) + 0.2 * (lo - 150)
    z = DEPTH[None, :, None, None]
    ct = 22.0 - 0.004 * np.clip(z - base, 0, None) + 0 * lo
    p = gsw.p_from_z(-z, la)
    sa = gsw.SA_from_SP(SP, p, lo, la)
    return ct, sa, p, gsw.t_from_CT(sa, ct, p)


def _hycom(t_insitu: np.ndarray) -> xr.Dataset:
    dims = ("time", "depth", "lat", "lon")
    return xr.Dataset(
        {
            "water_temp": (
                dims,
                t_insitu,
                {"long_name": "Water Temperature", "standard_name": "sea_water_temperature", "units": "degC"},
            ),
            "salinity": (
                dims,
                np.full(t_insitu.shape, SP),
                {"long_name": "Salinity", "standard_name": "sea_water_salinity", "units": "psu"},
            ),
        },
        coords={
            "time": ("time", np.asarray(xr.date_range("2020-01-01", periods=NT, freq="D"))),
            "depth": ("depth", DEPTH, {"standard_name": "depth", "units": "m", "positive": "down", "axis": "Z"}),
            "lat": ("lat", LAT, {"standard_name": "latitude", "units": "degrees_north"}),
            "lon": ("lon", LON, {"standard_name": "longitude", "units": "degrees_east"}),
        },
        attrs={"title": "HYCOM + NCODA Global 1/12 Analysis (GLBy0.08), layout copied", "source": "HYCOM archive"},
    )


def _threshold_depth(sigma0: np.ndarray, ref: float = 10.0, step: float = 0.03) -> np.ndarray:
    """The first depth below ``ref`` where sigma0 reaches sigma0(ref) + step, linear between the levels either
    side (the levels are ascending; ``ref`` is one of them)."""
    out = np.full(sigma0.shape[:1] + sigma0.shape[2:], np.nan)
    i_ref = int(np.nonzero(DEPTH == ref)[0][0])
    for idx in np.ndindex(out.shape):
        col = sigma0[(idx[0], slice(None), *idx[1:])]
        target = col[i_ref] + step
        k = i_ref + 1 + int(np.nonzero(col[i_ref + 1 :] >= target)[0][0])
        out[idx] = DEPTH[k - 1] + (target - col[k - 1]) * (DEPTH[k] - DEPTH[k - 1]) / (col[k] - col[k - 1])
    return out


def test_in_situ_temperature_is_converted_with_gsw_before_the_mld_and_the_temperatures(tmp_path):
    ct, sa, p, t = _columns()
    _hycom(t).to_netcdf(tmp_path / "hycom.nc")
    reading = Reading("HYCOM")
    out = open_store(tmp_path / "hycom.nc", validate_schema=False, reading=reading).isel(member=0).load()

    mld_truth = _threshold_depth(gsw.sigma0(sa, ct))
    # gsw.t_from_CT then gsw.CT_from_t return CT to ~1e-10 K: the crossings agree to far below a millimetre;
    # reading the in-situ values as potential temperature moves them by 10 m and more
    np.testing.assert_allclose(out["mld"].transpose("time", "lat", "lon").values, mld_truth, rtol=0, atol=1e-3)

    pt0 = gsw.pt0_from_t(sa, t, p)
    np.testing.assert_allclose(out["sst"].transpose("time", "lat", "lon").values, pt0[:, 0], rtol=0, atol=1e-9)
    below = (DEPTH[None, :, None, None] > mld_truth[:, None]).argmax(axis=1)
    want = np.take_along_axis(pt0, below[:, None], axis=1)[:, 0]
    np.testing.assert_allclose(out["t_sub"].transpose("time", "lat", "lon").values, want, rtol=0, atol=1e-9)
    assert out["t_sub"].attrs["standard_name"] == "sea_water_potential_temperature"

    said = reading.row("thetao").conversion
    assert "sea_water_temperature" in said and "gsw.pt0_from_t" in said and "gsw.SA_from_SP" in said


def test_the_teos10_of_in_situ_temperature_is_gsw_ct_from_t():
    from ocean import budget

    ct, sa, p, t = _columns()
    da = _hycom(t)
    temp = da["water_temp"]
    so = da["salinity"].assign_attrs(standard_name="sea_water_practical_salinity")
    got = budget.teos10(temp, so)
    np.testing.assert_allclose(got["CT"].transpose(*temp.dims).values, gsw.CT_from_t(sa, t, p), rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["sigma0"].transpose(*temp.dims).values, gsw.sigma0(sa, ct), rtol=0, atol=1e-9)
