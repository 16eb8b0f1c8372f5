"""The astro reader on files laid out as the products are (tests/astro/product_fixtures.py: a Legacy
Survey DR10 catalogue, DESI redshift columns, cut-out cubes as the Legacy Survey viewer writes
them): each case right against an independent truth (a hand grouping, astropy magnitudes, the
cube written) or refused in one line that names the fix."""

from __future__ import annotations

import warnings

import astropy.units as u
import numpy as np
import pytest
from astropy.io import fits

from astro import constants
from astro.data.catalog import read_legacy_survey
from astro.synthetic import make_galaxies
from scimech.errors import DataValidationError, MissingVariableError, UnitsError

from .product_fixtures import (
    R_DECAM,
    dr10_columns,
    repeat_rows,
    write_cube,
    write_dr10,
    write_table,
)

AB = u.zero_point_flux(3631 * u.Jy)  # maggies are fluxes relative to the AB zero point
N = 80  # synthetic galaxies (objects)
REPEATED = 24  # of them on two rows each: 104 rows


@pytest.fixture(scope="module")
def galaxies():
    return make_galaxies(N, seed=5)


@pytest.fixture(scope="module")
def rows():
    return repeat_rows(N, REPEATED, seed=1)


def read(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the dropped-rows warning; counts asserted below
        return read_legacy_survey(*args, **kw)


def identities(path, cols=("RELEASE", "BRICKID", "OBJID")):
    """Each row's identity tuple, read with astropy alone."""
    with fits.open(path) as hdul:
        d = hdul[1].data
        return [tuple(int(d[c][i]) for c in cols) for i in range(len(d))]


# --------------------------------------------------------------------------- split by object identity
@pytest.mark.parametrize("desi", [False, True], ids=["dr10-brickid-objid", "desi-targetid"])
def test_no_object_lands_in_both_training_and_test(galaxies, rows, tmp_path, desi):
    """A catalogue with 24 objects on two rows each (overlapping sweeps; a DESI target observed twice):
    the study's split keeps each object on one side, and holds out 25% of the objects."""
    from astro.data.files import load_sample
    from astro.units import catalog_unit

    path = write_dr10(tmp_path / "cat.fits", galaxies.catalog, rows, desi=desi)
    got = catalog_unit(str(path), None, str(tmp_path / "train.fits"), str(tmp_path / "test.fits"), 0.25, 0, None)
    ident = identities(path, ("TARGETID",) if desi else ("RELEASE", "BRICKID", "OBJID"))
    train = {ident[r] for r in np.asarray(load_sample(tmp_path / "train.fits").catalog["row"])}
    test = {ident[r] for r in np.asarray(load_sample(tmp_path / "test.fits").catalog["row"])}
    assert not train & test
    assert len(train | test) == N
    assert len(test) == int(np.ceil(0.25 * N))  # GroupShuffleSplit rounds the test objects up
    assert got["n_train"] + got["n_test"] == len(rows)


def test_grouping_matches_a_hand_count_and_is_said_back(galaxies, rows, tmp_path):
    path = write_dr10(tmp_path / "cat.fits", galaxies.catalog, rows)
    s = read(path)
    ident = identities(path)
    # by hand: rows whose (RELEASE, BRICKID, OBJID) occur more than once
    counts = {k: ident.count(k) for k in set(ident)}
    dup_rows = sum(c for c in counts.values() if c > 1)
    assert dup_rows == 2 * REPEATED
    obj = np.asarray(s.catalog["object"])
    for i in range(len(rows)):  # same object number <=> same identity
        same = obj == obj[i]
        assert {ident[j] for j in np.flatnonzero(same)} == {ident[i]}
    r = s.meta["reading"]
    assert r.row("identity").variable == "RELEASE+BRICKID+OBJID"
    assert r.sections["rows"]["duplicates"].startswith(f"{dup_rows} rows share their object")
    assert r.sections["rows"]["objects"] == f"{N} by RELEASE+BRICKID+OBJID"


# --------------------------------------------------------------------------- cut-outs: band order
@pytest.mark.parametrize("header", ["BANDS", "BAND", "FILTER"])
def test_cube_band_order_read_from_its_header(galaxies, tmp_path, header):
    """A cube written g, r, z, i and saying so (BANDS = 'grzi', the cut-out service's BAND0..3, or DECam
    FILTER1..4 cards) is read back in the catalogue's g, r, i, z."""
    path = write_dr10(tmp_path / "cat.fits", galaxies.catalog, mw=False)
    cube = write_cube(tmp_path / "cube.fits", galaxies.images, order="grzi", header=header)
    s = read(path, cube)
    np.testing.assert_array_equal(s.images, galaxies.images)
    assert s.meta["reading"].sections["bands"]["cut-outs"].startswith("g, r, z, i (")
    assert "reordered to g, r, i, z" in s.meta["reading"].sections["bands"]["cut-outs"]


def test_cube_in_another_band_order_without_a_header_is_refused(galaxies, tmp_path):
    path = write_dr10(tmp_path / "cat.fits", galaxies.catalog, mw=False)
    cube = write_cube(tmp_path / "cube.npy", galaxies.images, order="grzi")
    with pytest.raises(
        DataValidationError, match=r"bands follow the catalogue's g, r, z, i.*cube\[:, \[0, 1, 3, 2\]\]"
    ):
        read(path, cube)
    # the fix it names works
    np.save(tmp_path / "fixed.npy", np.load(cube)[:, [0, 1, 3, 2]])
    np.testing.assert_array_equal(read(path, tmp_path / "fixed.npy").images, galaxies.images)


def test_header_without_the_i_band_is_refused(galaxies, tmp_path):
    path = write_dr10(tmp_path / "cat.fits", galaxies.catalog, mw=False)
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(galaxies.images)]).writeto(tmp_path / "c.fits")
    with fits.open(tmp_path / "c.fits", mode="update") as h:
        h[1].header["BANDS"] = "grzY"
    with pytest.raises(DataValidationError, match=r"without \['i'\].*bands=griz"):
        read(path, tmp_path / "c.fits")


# --------------------------------------------------------------------------- cut-outs: fluxes and pixel scale
@pytest.mark.parametrize("scale, cause", [(100.0, "neither maggies"), (1e-9, "in maggies"), (3.631e-6, "in Jy")])
def test_cube_fluxes_beyond_the_stated_factor_are_refused_naming_the_cause(galaxies, tmp_path, scale, cause):
    """Cut-outs 100x the catalogue, or in maggies / Jy without a BUNIT saying so: the summed flux
    is compared with FLUX_G..Z (median over S/N > 10 galaxies) and refused beyond a factor 3."""
    path = write_dr10(tmp_path / "cat.fits", galaxies.catalog, mw=False)
    cube = write_cube(tmp_path / "cube.fits", galaxies.images, scale=scale, bunit=None)
    with pytest.raises(
        UnitsError, match=f"summed g flux is .* x the catalogue's FLUX_G .*likely cause: .*{cause}"
    ) as err:
        read(path, cube)
    # the ratio it names is the cube's over the catalogue's, by hand (median over S/N > 10 in every band)
    flux = np.stack([galaxies.catalog[f"flux_{b}"].to_value(u.nmgy) for b in constants.BANDS], 1)
    ivar = np.stack([galaxies.catalog[f"flux_ivar_{b}"].value for b in constants.BANDS], 1)
    ok = (flux * np.sqrt(ivar) > 10).all(1)
    hand = np.median(scale * galaxies.images[ok, 0].sum((1, 2)) / flux[ok, 0])
    assert f"is {hand:.3g} x" in str(err.value)


@pytest.mark.parametrize("bunit, scale, factor", [("maggy", 1e-9, "1e+09"), ("Jy", 3.631e-6, "275406")])
def test_cube_with_the_bunit_the_refusal_names_is_converted_and_said_back(galaxies, tmp_path, bunit, scale, factor):
    path = write_dr10(tmp_path / "cat.fits", galaxies.catalog, mw=False)
    cube = write_cube(tmp_path / "cube.fits", galaxies.images, scale=scale, bunit=bunit)
    s = read(path, cube)
    np.testing.assert_allclose(s.images, galaxies.images, rtol=1e-5)  # float32 scaled twice: float32 round-off
    assert f"{bunit} -> nanomaggy (x {factor}" in s.meta["reading"].row("images").conversion
    # the ratios said back are the cube's summed flux over the catalogue's, by hand
    total = galaxies.images.sum((2, 3))
    flux = np.stack([galaxies.catalog[f"flux_{b}"].to_value(u.nmgy) for b in constants.BANDS], 1)
    ivar = np.stack([galaxies.catalog[f"flux_ivar_{b}"].value for b in constants.BANDS], 1)
    ok = (flux * np.sqrt(ivar) > 10).all(1)
    g_ratio = np.median(total[ok, 0] / flux[ok, 0])
    assert f"g {g_ratio:.3f}" in s.meta["reading"].sections["bands"]["flux cross-check"]


def test_cube_at_another_pixel_scale_is_refused(galaxies, tmp_path):
    path = write_dr10(tmp_path / "cat.fits", galaxies.catalog, mw=False)
    cube = write_cube(tmp_path / "cube.fits", galaxies.images, pixscale=0.524)
    with pytest.raises(DataValidationError, match=r"0\.524\"/pixel .*pixscale=0\.262"):
        read(path, cube)


def test_cube_in_another_row_order_is_refused(galaxies, tmp_path):
    path = write_dr10(tmp_path / "cat.fits", galaxies.catalog, mw=False)
    shuffled = galaxies.images[np.random.default_rng(0).permutation(N)]
    cube = write_cube(tmp_path / "cube.fits", shuffled)
    with pytest.raises(DataValidationError, match="do not follow the catalogue's fluxes row by row"):
        read(path, cube)


# --------------------------------------------------------------------------- quality columns
def test_desi_zwarn_and_spectype_rows_dropped_and_counted(galaxies, tmp_path):
    zwarn = {3: 4, 10: 1 << 9, 11: 4}  # ZWARN bits (SMALL_DELTA_CHI2 = 4, ...): not trusted
    spectype = {11: "STAR", 20: "QSO", 21: "STAR"}
    path = write_dr10(tmp_path / "desi.fits", galaxies.catalog, desi=True, zwarn=zwarn, spectype=spectype)
    with pytest.warns(UserWarning, match="dropped 5 of 80 rows"):
        s = read_legacy_survey(path)
    # by hand: 3 rows with ZWARN != 0; of SPECTYPE not GALAXY, row 11 is already dropped for its ZWARN
    assert s.meta["rejected"]["ZWARN != 0 (DESI redshift warning)"] == 3
    assert s.meta["rejected"]["SPECTYPE not GALAXY"] == 2
    assert not {3, 10, 11, 20, 21} & set(np.asarray(s.catalog["row"]).tolist()) and len(s) == N - 5
    assert s.meta["reading"].sections["rows"]["dropped: ZWARN != 0 (DESI redshift warning)"] == "3"


def test_mw_transmission_corrects_fluxes_once_against_astropy_magnitudes(galaxies, tmp_path):
    """m_corr = m_obs - A_b with A_b = R_b E(B-V) (DR10's coefficients); astropy's AB magnitudes of the
    fluxes read must equal it, the inverse variances scale as T^2, and the sample says it is corrected."""
    path = write_dr10(tmp_path / "cat.fits", galaxies.catalog, mw=True)
    s = read(path)
    ebv = galaxies.catalog["ebv"].to_value(u.mag)
    for b in constants.BANDS:
        f_obs = galaxies.catalog[f"flux_{b}"].to(u.nmgy)
        bright = f_obs.value > 1
        m_obs = f_obs[bright].to(u.Jy, AB).to(u.ABmag)  # astropy: 1 nmgy = 3.631e-6 Jy
        m_read = s.catalog[f"flux_{b}"][bright].to(u.Jy, AB).to(u.ABmag)
        # float32 columns: 1e-6 relative in flux is about 1e-6 mag
        np.testing.assert_allclose(m_read.value, m_obs.value - R_DECAM[b] * ebv[bright], atol=2e-5)
        t = 10 ** (-0.4 * R_DECAM[b] * ebv)
        np.testing.assert_allclose(
            s.catalog[f"flux_ivar_{b}"].value, galaxies.catalog[f"flux_ivar_{b}"].value * t**2, rtol=2e-6
        )
    assert s.meta["mw_corrected"] is True
    row = s.meta["reading"].row("milky_way_extinction")
    assert row.variable == "MW_TRANSMISSION_G/R/I/Z" and "not corrected twice" in row.conversion
    # without the columns: fluxes as observed, and the reading says EBV serves instead
    plain = read(write_dr10(tmp_path / "plain.fits", galaxies.catalog, mw=False))
    np.testing.assert_allclose(plain.catalog["flux_g"].value, galaxies.catalog["flux_g"].to_value(u.nmgy), rtol=1e-6)
    assert plain.meta["mw_corrected"] is False and plain.meta["reading"].row("milky_way_extinction").variable == "EBV"


def test_mw_corrected_sample_keeps_the_flag_through_the_study_files(galaxies, tmp_path):
    """The template photo-z reads ``meta['mw_corrected']`` from the test file to take E(B-V) = 0: the flag
    survives the train/test files the study writes."""
    from astro.data.files import load_sample, save_sample

    s = read(write_dr10(tmp_path / "cat.fits", galaxies.catalog, mw=True))
    back = load_sample(save_sample(s[:10], tmp_path / "test.fits"))
    assert back.meta["mw_corrected"] is True
    assert back.meta["identity"] == "RELEASE+BRICKID+OBJID"


def test_template_photoz_takes_no_ebv_once_the_fluxes_are_corrected(galaxies, tmp_path, monkeypatch):
    """Not corrected twice: with MW_TRANSMISSION applied the template photo-z is given no E(B-V); without,
    it is given the catalogue's EBV (the model that sees them is not needed to check the wiring)."""
    from astro.measures import inputs

    seen = []

    class Template:  # records what the study hands the template fit
        def __init__(self, **kw):
            pass

        def fit(self):
            return self

        def predict(self, flux, ivar, ebv_mw=None):
            seen.append(ebv_mw)
            return np.zeros(len(flux))

    class Adapter:  # no tokens needed for the yardsticks
        def tokenize(self, catalog, images):
            return {}

        def batch(self, tokens, masked=()):
            return {}

    monkeypatch.setattr(inputs.photoz, "TemplatePhotoZ", Template)
    for mw in (True, False):
        s = read(write_dr10(tmp_path / f"mw_{mw}.fits", galaxies.catalog, mw=mw))
        inputs.study_inputs(Adapter(), s, s)
    assert seen[0] is None
    np.testing.assert_allclose(seen[1], galaxies.catalog["ebv"].to_value(u.mag), rtol=1e-6)  # float32 column
    # the probes' folds get each test row's object: rows of one object share a group, others do not
    rows = repeat_rows(N, REPEATED, seed=1)
    path = write_dr10(tmp_path / "repeats.fits", galaxies.catalog, rows)
    inp = inputs.study_inputs(Adapter(), read(path), read(path))
    ident = identities(path)
    same_group = inp.groups[:, None] == inp.groups[None, :]
    same_object = np.array([[a == b for b in ident] for a in ident])
    np.testing.assert_array_equal(same_group, same_object)


def test_some_mw_transmission_columns_or_magnitudes_are_refused(galaxies, tmp_path):
    cat = galaxies.catalog
    partial = write_table(tmp_path / "partial.fits", dr10_columns(cat, drop=("MW_TRANSMISSION_I",)))
    with pytest.raises(MissingVariableError, match=r"not \['MW_TRANSMISSION_I'\].*Give all four"):
        read(partial)
    cols = dr10_columns(cat)
    for c in cols:
        if c.name == "MW_TRANSMISSION_G":  # an extinction in magnitudes where a transmission belongs
            c.array[:] = R_DECAM["g"] * cat["ebv"].to_value(u.mag) + 1.0
    with pytest.raises(UnitsError, match=r"MW_TRANSMISSION_G has 80 values outside 0 < T <= 1.*10\*\*\(-0\.4 \* A\)"):
        read(write_table(tmp_path / "mags.fits", cols))


def test_the_reading_names_every_column_that_served_and_its_units(galaxies, tmp_path):
    path = write_dr10(tmp_path / "cat.fits", galaxies.catalog, desi=True, flux_unit="maggy")
    s = read(path)
    r = s.meta["reading"]
    assert r.row("flux_g").variable == "FLUX_G" and r.row("flux_g").units_found == "maggy"
    assert r.row("flux_g").units_used == "nanomaggy" and "(x 1e+09)" in r.row("flux_g").conversion
    # fluxes in maggies are read back in nanomaggies (float32 columns: 1e-6 relative), then MW-corrected
    t = 10 ** (-0.4 * R_DECAM["r"] * galaxies.catalog["ebv"].to_value(u.mag))
    np.testing.assert_allclose(s.catalog["flux_r"].value, galaxies.catalog["flux_r"].to_value(u.nmgy) / t, rtol=2e-6)
    assert r.row("redshift").variable == "Z" and r.row("redshift_warning").variable == "ZWARN"
    assert r.row("identity").variable == "TARGETID" and r.row("shape_r").units_used == "arcsec"
    assert r.product.startswith("Legacy Surveys DR10 catalogue") and r.source == str(path)


# --------------------------------------------------------------------------- the study on your catalogue
def test_study_report_on_a_catalogue_opens_with_the_reading_and_has_no_planted_truth(galaxies, rows, tmp_path):
    from scimech.cli.commands import main

    path = write_dr10(tmp_path / "dr10.fits", galaxies.catalog, rows, desi=True)
    cube = write_cube(tmp_path / "cutouts.fits", galaxies.images[rows], order="grzi", header="BAND")
    out = tmp_path / "run"
    assert (
        main(
            [
                "astro",
                "study",
                "--data",
                str(path),
                "--images",
                str(cube),
                "--out",
                str(out),
                "--epochs",
                "1",
                "--batch-size",
                "40",
                "--n-bootstrap",
                "20",
                "--chunk-size",
                "20",
            ]
        )
        == 0
    )
    report = (out / "report.md").read_text()
    sections = [line for line in report.splitlines() if line.startswith("## ")]
    assert sections[:2] == ["## Is the model competent?", "## What was read"]  # competence, then what was read
    assert "**Product:** Legacy Surveys DR10 catalogue" in report and "TARGETID" in report
    assert "planted" not in report.lower()
    assert not (out / "recovery.txt").exists()
    assert "planted" not in (out / "findings.txt").read_text().lower()
    assert "each object's rows on one side" in report
    # redrawn from the saved results: the same opening, still no planted truth
    (out / "report.md").unlink()
    assert main(["astro", "redraw", str(out)]) == 0
    assert (out / "report.md").read_text().count("## What was read") == 1 and not (out / "recovery.txt").exists()
