"""Photo-z metrics, template fitting and the bias signatures against hand-computed truths."""

from __future__ import annotations

import numpy as np
import pytest

from astro import constants, measures, photoz, synthetic


def test_metrics_on_a_hand_computed_case():
    zt = np.array([0.0, 0.5, 1.0, 0.2, 0.4])
    zp = np.array([0.1, 0.5, 1.4, 0.2, 0.1])
    d = np.array([0.1, 0.0, 0.2, 0.0, -0.3 / 1.4])  # (zp - zt) / (1 + zt) by hand
    np.testing.assert_allclose(photoz.dz(zt, zp), d)
    assert photoz.bias(zt, zp) == pytest.approx(0.0)  # median of d
    # |d - 0| sorted: 0, 0, 0.1, 0.2, 0.214 -> median 0.1
    assert photoz.sigma_nmad(zt, zp) == pytest.approx(1.4826 * 0.1)
    assert photoz.outlier_fraction(zt, zp) == pytest.approx(2 / 5)  # 0.2 and 0.214 exceed 0.15
    with pytest.raises(ValueError, match="matching"):
        photoz.dz(zt, zp[:3])


def test_template_fit_recovers_z_of_noiseless_template_galaxies():
    wave, tmpl = synthetic.unit_templates()
    zs = [0.1, 0.3, 0.52, 0.7, 0.9]
    lum = constants.AB_ZERO_POINT_JY * 1e-23 * 10 ** (-0.4 * -21.0) * 2.99792458e18 / 5500.0**2  # M = -21
    flux, truth = [], []
    for t in (0, 1, 3):
        for z in zs:
            flam = lum * synthetic.observed_sed(wave, tmpl[t], z)
            flux.append(synthetic.ab_maggies(synthetic.OBS_WAVE, flam)[0] * constants.NMGY_PER_MAGGY)
            truth.append(z)
    flux = np.array(flux)
    ivar = 1.0 / (1e-3 * flux) ** 2  # 0.1% errors: essentially noiseless
    zp = photoz.TemplatePhotoZ(floor=0.0).fit().predict(flux, ivar)
    # the grid step is 0.02 (refined by a parabola): recover within one step
    np.testing.assert_allclose(zp, truth, atol=0.02)


def test_colour_regressor_follows_the_sklearn_contract():
    s = synthetic.make_galaxies(120, seed=5, images=False)
    X = photoz.colour_features(s.catalog)
    z = np.asarray(s.catalog["z"])
    m = photoz.ColourPhotoZ(n_neighbors=5).fit(X[:80], z[:80])
    pred = m.predict(X[80:])
    assert pred.shape == (40,) and np.all((pred >= 0) & (pred <= 1))
    # better than predicting the training mean (colours carry redshift)
    assert np.mean(np.abs(pred - z[80:])) < np.mean(np.abs(z[:80].mean() - z[80:]))
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        photoz.ColourPhotoZ().predict(X)


def test_metrics_table_dims_and_intervals():
    rng = np.random.default_rng(0)
    z = rng.uniform(0.1, 1.0, 200)
    pred = {"a": z + 0.01 * rng.standard_normal(200), "b": z + 0.05 * rng.standard_normal(200)}
    masks = {"all": np.ones(200, bool), "half": np.arange(200) < 100}
    ds = photoz.metrics_table(z, pred, masks, n_bootstrap=100)
    assert ds["value"].dims == ("mode", "population", "metric")
    v = ds["value"].sel(metric="sigma_nmad")
    assert float(v.sel(mode="a", population="all")) < float(v.sel(mode="b", population="all"))
    assert np.all(ds["ci_low"] <= ds["value"] + 1e-12) and np.all(ds["value"] <= ds["ci_high"] + 1e-12)


def test_attenuation_bias_signatures_on_constructed_predictions():
    rng = np.random.default_rng(1)
    n = 600
    colours = rng.standard_normal((n, 3))
    z = np.clip(0.5 + 0.15 * colours[:, 0] + 0.1 * rng.standard_normal(n), 0.05, 1.0)
    a_v = rng.uniform(0, 2, n)
    cells = measures.colour_cells(colours, 6, seed=0)
    cell_mean = np.array([z[cells == c].mean() for c in cells])
    preds = {"perfect": z, "cell_mean": cell_mean, "dusty": z + 0.1 * a_v * (1 + z)}
    pops = {"all": np.ones(n, bool)}
    ds = measures.attenuation_bias(z, a_v, colours, preds, pops, n_cells=6, seed=0)
    # slope 1 within every cell -> dilution 0; the cell mean ignores z -> dilution 1
    assert float(ds["dilution"].sel(prediction="perfect", population="all")) == pytest.approx(0.0, abs=1e-9)
    assert float(ds["dilution"].sel(prediction="cell_mean", population="all")) == pytest.approx(1.0, abs=1e-9)
    # dz = 0.1 A_V exactly
    assert float(ds["dust_slope"].sel(prediction="dusty", population="all")) == pytest.approx(0.1, abs=1e-9)
    assert float(ds["dust_slope"].sel(prediction="perfect", population="all")) == pytest.approx(0.0, abs=1e-9)


def test_advantage_is_the_paired_mean_difference():
    z = np.linspace(0.1, 0.9, 50)
    phot = z + 0.1 * (1 + z)  # |dz| = 0.1
    multi = z + 0.04 * (1 + z)  # |dz| = 0.04
    pops = {
        "all": np.ones(50, bool),
        "extended": np.arange(50) < 20,
        "compact": np.arange(50) >= 20,
        "dusty": np.arange(50) % 2 == 0,
        "clean": np.arange(50) % 2 == 1,
    }
    ds = measures.multimodal_advantage(z, {"photometry": phot, "multimodal": multi}, pops, n_bootstrap=50)
    np.testing.assert_allclose(ds["advantage"].values, 0.06, atol=1e-12)


def test_localised_block_is_the_first_big_increase():
    import xarray as xr

    gain = xr.DataArray(
        [[0.30, 0.32, 0.31], [0.0, 0.1, 0.1]],
        dims=("target", "layer"),
        coords=dict(target=["z", "a_v"], layer=[0, 1, 2]),
    )
    assert measures.localised_block(xr.Dataset({"gain": gain})) == 0
    assert measures.localised_block(xr.Dataset({"gain": gain}), target="a_v") == 1


def test_chunk_bounds_by_hand():
    assert measures.chunk_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert measures.chunk_bounds(5, None) == [(0, 5)]
    assert measures.chunk_bounds(3, 10) == [(0, 3)]
    assert measures.chunk_seed(7, 0) == 7 and measures.chunk_seed(7, 40) == 47
    with pytest.raises(ValueError, match="no test galaxies"):
        measures.chunk_bounds(0, 4)
    with pytest.raises(ValueError, match="positive"):
        measures.chunk_bounds(5, -1)


def _raw(z, z_multi, z_phot, z_int, start=0):
    import xarray as xr

    return xr.Dataset(
        {
            "z_ablated": (("intervention", "head", "sample"), z_int[None, None]),
            "z_multi": ("sample", z_multi),
            "z_phot": ("sample", z_phot),
        },
        coords=dict(
            intervention=["zero"],
            head=[0],
            sample=np.arange(start, start + len(z)),
            site=("head", ["encoder.0.attn.heads[0]"]),
        ),
        attrs={"block": 0, "seed": 0},
    )


def test_summarised_interventions_on_a_hand_computed_case():
    import xarray as xr

    z = np.array([0.5, 1.0, 0.2, 0.8])
    one = 1 + z
    # |dz|: photometry 0.10, multimodal 0.04, intervened 0.07 for every galaxy
    phot, multi, inter = z + 0.10 * one, z - 0.04 * one, z + 0.07 * one
    pops = {"all": np.ones(4, bool), "first": np.array([True, True, False, False])}
    # two chunks, as the CLI would produce them
    raw = xr.concat(
        [_raw(z[:2], multi[:2], phot[:2], inter[:2]), _raw(z[2:], multi[2:], phot[2:], inter[2:], start=2)], "sample"
    )
    ds = measures.summarise_interventions(raw, z, pops)
    # advantage left = (0.10 - 0.07) / (0.10 - 0.04) = 0.5; change of mean|dz| = 0.07 - 0.04
    np.testing.assert_allclose(ds["advantage_left"].values, 0.5, rtol=1e-12)
    np.testing.assert_allclose(ds["delta_abs_dz"].values, 0.03, rtol=1e-12)
    assert ds.attrs["block"] == 0
    with pytest.raises(ValueError, match="chunk is missing or repeated"):
        measures.summarise_interventions(raw.isel(sample=slice(0, 2)), z, pops)
