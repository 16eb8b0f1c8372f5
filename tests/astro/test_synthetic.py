"""Synthetic galaxies against independent truths (AB definition, Calzetti formula, break, Sersic integral)."""

from __future__ import annotations

import astropy.units as u
import numpy as np
import pytest
import speclite.filters as sf

from astro import constants, synthetic

C_A = 2.99792458e18  # speed of light [A s-1]


def _flat_fnu_flam(wave, jy=3631.0):
    return jy * 1e-23 * C_A / wave**2


def _calzetti_by_hand(lam_angstrom, rv=4.05):
    """Calzetti et al. (2000) eq. 4, written out here independently of the `extinction` package."""
    x = lam_angstrom / 1e4
    k = np.where(
        x < 0.63, 2.659 * (-2.156 + 1.509 / x - 0.198 / x**2 + 0.011 / x**3) + rv, 2.659 * (-1.857 + 1.040 / x) + rv
    )
    return k / rv  # A(lambda) / A_V


@pytest.fixture(scope="module")
def eff_wave():
    f = sf.load_filters(*constants.SPECLITE_FILTERS)
    return np.array([x.effective_wavelength.to_value(u.AA) for x in f])


def test_flat_fnu_3631_jy_is_ab_zero_in_every_band():
    mags = synthetic.ab_magnitudes(synthetic.OBS_WAVE, _flat_fnu_flam(synthetic.OBS_WAVE))[0]
    # AB magnitude is defined so; 1e-3 mag allows the quadrature of a 4 A sampled grid
    np.testing.assert_allclose(mags, 0.0, atol=1e-3)
    np.testing.assert_allclose(synthetic.nmgy_to_mag(synthetic.mag_to_nmgy(np.array([18.0, 22.5]))), [18.0, 22.5])
    assert synthetic.nmgy_to_mag(np.array([1.0]))[0] == pytest.approx(22.5)


@pytest.mark.parametrize("z", [0.1, 0.45, 0.8])
def test_intrinsic_dust_reddens_g_minus_r_as_calzetti_at_redshifted_bands(z, eff_wave):
    wrest = np.linspace(1000, 12000, 6000)
    fr = _flat_fnu_flam(wrest)
    m0 = synthetic.ab_magnitudes(synthetic.OBS_WAVE, synthetic.observed_sed(wrest, fr, z, a_v=0.0, distance=False))[0]
    a_v = 1.0
    m1 = synthetic.ab_magnitudes(synthetic.OBS_WAVE, synthetic.observed_sed(wrest, fr, z, a_v=a_v, distance=False))[0]
    reddening = (m1[0] - m1[1]) - (m0[0] - m0[1])
    k = _calzetti_by_hand(eff_wave / (1 + z))
    expected = a_v * (k[0] - k[1])
    assert reddening > 0
    # 0.02 mag: the law is averaged over ~1300 A wide bands, not taken at one wavelength (~3%)
    assert reddening == pytest.approx(expected, abs=0.02)


def test_4000_angstrom_break_moves_redward_through_the_bands(eff_wave):
    wave, tmpl = synthetic.unit_templates()
    old = tmpl[0]  # the oldest kcorrect template: strongest break
    zs = np.arange(0.02, 1.25, 0.01)
    mags = np.array(
        [
            synthetic.ab_magnitudes(synthetic.OBS_WAVE, synthetic.observed_sed(wave, old, z, distance=False))[0]
            for z in zs
        ]
    )
    steepest = []
    for j in range(3):
        colour = mags[:, j] - mags[:, j + 1]
        steepest.append(zs[np.argmax(np.gradient(colour, zs))])
    # the colour of adjacent bands reddens fastest when the break sits between them
    assert steepest[0] < steepest[1] < steepest[2]
    mid = (eff_wave[:-1] + eff_wave[1:]) / 2 / constants.BREAK_4000_ANGSTROM - 1
    # 0.12 in z is ~500 A at the break: the break spans 3850-4100 A and the bands are broad
    np.testing.assert_allclose(steepest, mid, atol=0.12)


def test_sersic_normalisation_is_the_analytic_total():
    # a large stamp holds (almost) all light: the analytic normalisation must give the flux back
    img = synthetic.sersic_image(
        np.array([10.0, 5.0]),
        np.array([3.0, 2.0]),
        np.array([1.0, 4.0]),
        np.array([0.3, 0.1]),
        np.array([0.4, 1.0]),
        size=128,
        oversample=5,
    )
    # n=4 profiles keep ~1-2% of their light beyond 20 r_e (64 px / 2 px = 32 r_e here: <1%)
    np.testing.assert_allclose(img.sum(axis=(1, 2)), [10.0, 5.0], rtol=0.015)


def test_images_integrate_to_catalogue_flux_within_psf_and_noise():
    cfg = synthetic.SyntheticConfig(noise=False, image_size=48)
    s = synthetic.make_galaxies(40, seed=3, config=cfg)
    flux = np.stack([s.catalog[f"flux_true_{b}"].to_value(u.nmgy) for b in constants.BANDS], 1)
    tot = s.images.sum(axis=(2, 3))
    compact = (s.catalog["r_eff_disk"].to_value(u.arcsec) < 1.0) & (s.catalog["r_eff_bulge"].to_value(u.arcsec) < 1.0)
    assert compact.sum() >= 10
    # noiseless and compact: only PSF wings and Sersic tails leave a 12.6 arcsec stamp (< 4%)
    np.testing.assert_allclose(tot[compact], flux[compact], rtol=0.04)
    noisy = synthetic.make_galaxies(40, seed=3, config=synthetic.SyntheticConfig(image_size=48))
    sig = np.array([constants.pixel_noise_nmgy(b) for b in constants.BANDS]) * 48  # sqrt(48*48) pixels of sky noise
    err = np.abs(noisy.images.sum(axis=(2, 3)) - flux)
    assert np.all(err[compact] < 5 * sig + 0.04 * flux[compact])


def test_catalogue_units_truth_and_populations():
    s = synthetic.make_galaxies(60, seed=1)
    c = s.catalog
    assert c["flux_r"].unit == u.nmgy and c["shape_r"].unit == u.arcsec and c["a_v"].unit == u.mag
    for col in ("z", "a_v", "ebv", "r_eff_bulge", "r_eff_disk", "n_bulge", "n_disk", "bulge_frac"):
        assert col in c.colnames
    assert np.all(synthetic.nmgy_to_mag(c["flux_true_r"].value) < 23.0)  # r-band selection
    assert np.all((np.asarray(c["z"]) >= 0.03) & (np.asarray(c["z"]) <= 1.0))
    pops = s.populations()
    np.testing.assert_array_equal(pops["dusty"], c["a_v"].value > 0.5)
    np.testing.assert_array_equal(pops["extended"], ~pops["compact"])
    assert s.images.shape == (60, 4, 24, 24)
    with pytest.raises(ValueError, match="positive"):
        synthetic.make_galaxies(0)


def test_dust_makes_galaxies_redder_and_fainter():
    # the same galaxies with and without dust: identical draws, only A_V differs
    rng_cfg = synthetic.SyntheticConfig(noise=False, av_mean=1e-6)
    a = synthetic.make_galaxies(30, seed=7, images=False, config=rng_cfg)
    fa = np.stack([a.catalog[f"flux_true_{b}"].value for b in "gr"], 1)
    assert np.all(np.asarray(a.catalog["a_v"].value) < 1e-3)
    gr = synthetic.nmgy_to_mag(fa[:, 0]) - synthetic.nmgy_to_mag(fa[:, 1])
    assert np.all(np.isfinite(gr))


@pytest.mark.parametrize("fmt", ["fits", "zarr"])
def test_round_trip(tmp_path, fmt):
    s = synthetic.make_galaxies(12, seed=2)
    path = tmp_path / f"sample.{fmt}"
    (s.to_fits if fmt == "fits" else s.to_zarr)(path)
    r = (synthetic.GalaxySample.from_fits if fmt == "fits" else synthetic.GalaxySample.from_zarr)(path)
    np.testing.assert_array_equal(r.images, s.images)
    for col in s.catalog.colnames:
        a, b = s.catalog[col], r.catalog[col]
        assert getattr(a, "unit", None) == getattr(b, "unit", None), col
        np.testing.assert_allclose(np.asarray(getattr(b, "value", b), float), np.asarray(getattr(a, "value", a), float))
    np.testing.assert_array_equal(r.populations()["dusty"], s.populations()["dusty"])


def test_missing_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="astro synth"):
        synthetic.GalaxySample.from_fits(tmp_path / "nope.fits")


# ---------------------------------------------------------------- damaged and interrupted files
@pytest.fixture(scope="module")
def small_sample():
    return synthetic.make_galaxies(12, seed=2)


@pytest.mark.parametrize("frac", [0.0, 0.05, 0.5, 0.93, 0.999])
def test_truncated_fits_is_a_clear_error(tmp_path, small_sample, frac):
    from scimech.errors import DataValidationError

    good = small_sample.to_fits(tmp_path / "good.fits")
    raw = good.read_bytes()
    bad = tmp_path / "bad.fits"
    bad.write_bytes(raw[: int(frac * len(raw))])  # 0.93 tears the CATALOG header, 0.999 its last rows
    with pytest.raises(DataValidationError, match=r"bad\.fits.*(truncated|corrupt).*Delete .*bad\.fits"):
        synthetic.GalaxySample.from_fits(bad)
    assert synthetic.GalaxySample.from_fits(good).catalog["z"].shape == (12,)  # the intact file still reads


def test_junk_fits_is_a_clear_error(tmp_path):
    from scimech.errors import DataValidationError

    junk = tmp_path / "junk.fits"
    junk.write_bytes(b"SIMPLE? no, just some text that is not FITS\n" * 200)
    with pytest.raises(DataValidationError, match=r"junk\.fits is not a readable FITS sample.*astro synth"):
        synthetic.GalaxySample.from_fits(junk)


def _crash_after_writing(monkeypatch):
    import xarray as xr

    original = xr.Dataset.to_zarr

    def write_then_crash(self, store, *args, **kwargs):
        original(self, store, *args, **kwargs)  # every chunk is on disk ...
        raise RuntimeError("simulated crash")  # ... but the write never finishes

    monkeypatch.setattr(xr.Dataset, "to_zarr", write_then_crash)


def test_interrupted_zarr_write_leaves_no_store(tmp_path, small_sample, monkeypatch):
    _crash_after_writing(monkeypatch)
    path = tmp_path / "s.zarr"
    with pytest.raises(RuntimeError, match="simulated crash"):
        small_sample.to_zarr(path)
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []  # the temporary sibling is cleaned up too


def test_interrupted_zarr_overwrite_keeps_the_previous_store(tmp_path, small_sample, monkeypatch):
    path = tmp_path / "s.zarr"
    small_sample.to_zarr(path)
    _crash_after_writing(monkeypatch)
    with pytest.raises(RuntimeError, match="simulated crash"):
        synthetic.make_galaxies(5, seed=9).to_zarr(path)
    back = synthetic.GalaxySample.from_zarr(path)
    assert len(back) == 12  # still the old, complete sample
    np.testing.assert_array_equal(back.images, small_sample.images)


def test_sigkill_during_zarr_write_leaves_nothing_finished_looking(tmp_path):
    """A real SIGKILL (no cleanup runs) right after the chunks are written, before the marker."""
    import subprocess
    import sys

    from scimech.errors import DataValidationError

    code = (
        "import os, signal, xarray as xr\n"
        "from astro import synthetic\n"
        "orig = xr.Dataset.to_zarr\n"
        "def killed(self, *a, **k):\n"
        "    orig(self, *a, **k)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "xr.Dataset.to_zarr = killed\n"
        f"synthetic.make_galaxies(8, seed=1).to_zarr({str(tmp_path / 's.zarr')!r})\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()[-1000:]
    assert not (tmp_path / "s.zarr").exists()  # nothing under the final name
    leftovers = list(tmp_path.glob(".s.zarr.*.tmp/store.zarr"))
    assert len(leftovers) == 1  # the torn store is a hidden temporary ...
    with pytest.raises(DataValidationError, match="no completion marker"):
        synthetic.GalaxySample.from_zarr(leftovers[0])  # ... and is refused even if opened by hand
    synthetic.GalaxySample(synthetic.make_galaxies(3, seed=0).catalog).to_zarr(tmp_path / "s.zarr")  # a rerun works
    assert len(synthetic.GalaxySample.from_zarr(tmp_path / "s.zarr")) == 3


def test_zarr_store_without_marker_is_refused(tmp_path, small_sample):
    from scimech.errors import DataValidationError
    from scimech.run.results import COMPLETE_MARKER

    path = small_sample.to_zarr(tmp_path / "s.zarr")
    (path / COMPLETE_MARKER).unlink()
    with pytest.raises(DataValidationError, match=r"s\.zarr has no completion marker.*Delete"):
        synthetic.GalaxySample.from_zarr(path)


# ---------------------------------------------------------------- worlds
def test_cos_inclination_by_hand():
    # Hubble (1926): cos^2 i = (q^2 - q0^2) / (1 - q0^2); q0 = 0.2
    np.testing.assert_allclose(
        synthetic.cos_inclination(np.array([1.0, 0.6, 0.2, 0.1]), 0.2), [1.0, np.sqrt((0.36 - 0.04) / 0.96), 0.0, 0.0]
    )


def test_surface_brightness_dims_as_tolman():
    """Fluxes from d_L and sizes from d_A: the surface brightness of one galaxy moved in z falls
    as (1+z)^-3 in f_nu for a flat-f_nu spectrum ((1+z)^-4 bolometric; Tolman 1930)."""
    wrest = np.linspace(1000, 12000, 6000)
    flat = _flat_fnu_flam(wrest)
    sb = []
    zs = np.array([0.1, 0.4, 0.9])
    for z in zs:
        f = synthetic.ab_maggies(synthetic.OBS_WAVE, synthetic.observed_sed(wrest, flat, z))[0]  # f_nu in every band
        theta = synthetic.arcsec_per_kpc(np.array([z]))[0] * 5.0  # a 5 kpc galaxy [arcsec]
        sb.append(f / theta**2)
    sb = np.array(sb)
    expected = ((1 + zs[:, None]) / (1 + zs[0])) ** -3
    # the same in every band (flat spectrum), to the 4 A sampling of the grid
    np.testing.assert_allclose(sb / sb[0], np.broadcast_to(expected, sb.shape), rtol=1e-3)


def test_standard_world_is_the_default_and_unknown_worlds_are_refused():
    a = synthetic.make_galaxies(20, seed=4, images=False)
    b = synthetic.make_galaxies(20, seed=4, images=False, world="standard")
    np.testing.assert_array_equal(np.asarray(a.catalog["flux_r"]), np.asarray(b.catalog["flux_r"]))
    assert a.meta["world"] == "standard"
    # the standard world's disk sees the fixed fraction of the central A_V
    np.testing.assert_allclose(a.catalog["a_v_disk"].value, synthetic.DISK_DUST_FRACTION * a.catalog["a_v"].value)
    from scimech.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown synthetic world 'deep'.*degenerate"):
        synthetic.make_galaxies(5, world="deep")
    with pytest.raises(ConfigError, match="give one of them"):
        synthetic.make_galaxies(5, world="degenerate", config=synthetic.SyntheticConfig())


def test_degenerate_world_disk_dust_follows_the_path_length():
    s = synthetic.make_galaxies(300, seed=8, world="degenerate", images=False)
    c = s.catalog
    assert s.meta["world"] == "degenerate"
    np.testing.assert_array_equal(c["a_v_bulge"].value, 0.0)  # a clean bulge
    np.testing.assert_array_equal(c["a_v"].value, c["a_v_disk"].value)
    cos_i = np.asarray(c["cos_i"])
    faceon = c["a_v_disk"].value * np.maximum(cos_i, 0.05)
    # A_V,disk cos i is the face-on screen, exponential with mean 0.4 mag (before the r < 23 selection,
    # which prefers clean disks) whatever the inclination: the two halves agree within the spread of a
    # 150-galaxy mean (0.4 / sqrt(150) ~ 0.03; 0.12 is 3 sigma of the difference)
    edge = cos_i < np.median(cos_i)
    assert abs(faceon[edge].mean() - faceon[~edge].mean()) < 0.12
    assert 0.25 < faceon.mean() < 0.45
    assert np.median(c["a_v_disk"].value[edge]) > 1.5 * np.median(c["a_v_disk"].value[~edge])


def test_degenerate_world_image_shows_where_the_dust_is():
    """The same galaxies rendered with and without the disk's dust (noiseless, no selection, so the
    draws match). In the red bands the clean bulge outshines the disk at the centre of the stamp, so
    there the dust reddens r-z less than in the disk-dominated outskirts, and the more dust, the
    larger the difference: a colour gradient the integrated colour does not have."""
    from scipy.stats import spearmanr

    def render(av_mean):
        cfg = synthetic.world_config("degenerate")
        cfg.noise, cfg.r_mag_limit, cfg.av_mean = False, 99.0, av_mean
        return synthetic.make_galaxies(200, seed=8, config=cfg)

    dusty, clean = render(0.4), render(1e-9)
    np.testing.assert_allclose(dusty.catalog["z"], clean.catalog["z"])  # the same galaxies
    n = dusty.images.shape[-1]
    yy, xx = np.mgrid[:n, :n]
    r = np.hypot(yy - n / 2 + 0.5, xx - n / 2 + 0.5)

    def r_minus_z(img, sel):
        f = (img * sel).sum((2, 3))
        return -2.5 * np.log10(f[:, 1] / f[:, 3])

    inner, outer = r < 1.5, (r >= 5) & (r < 11)
    gradient = (r_minus_z(dusty.images, outer) - r_minus_z(clean.images, outer)) - (
        r_minus_z(dusty.images, inner) - r_minus_z(clean.images, inner)
    )
    a_v = dusty.catalog["a_v"].value
    bulgy = np.asarray(dusty.catalog["bulge_frac"]) > 0.4  # 67 of 200 galaxies
    # measured: median 0.067 mag on the dusty ones, rank correlation with A_V 0.35 (p ~ 0.004 for 67)
    assert np.median(gradient[bulgy & (a_v > 0.5)]) > 0.03
    assert spearmanr(gradient[bulgy], a_v[bulgy]).statistic > 0.2
    # the bulge itself is clean: its light is the same with and without the dust
    np.testing.assert_allclose(dusty.catalog["bulge_flux_r"].value, clean.catalog["bulge_flux_r"].value)
