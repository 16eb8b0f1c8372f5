"""An independent trial of the astro reader on files laid out as real products are, each answer checked
against a hand count or astropy, one regression test per fix.

Conventions from the products' documentation:

* Legacy Surveys DR10 catalogue and files pages (legacysurvey.org/dr10/catalogs, /dr10/files,
  /dr10/description): ``BRICK_PRIMARY`` is True "if the object is within the brick boundary"; the sweeps hold
  only ``BRICK_PRIMARY==T`` sources, a Tractor catalogue also its neighbours' sources near the edges;
  ``TYPE`` "DUP" is a "Gaia source fit by different model": "no optical flux is assigned to DUP sources";
  ``SHAPE_R`` is the half-light radius "of galaxy model" (0 for PSF); ``MW_TRANSMISSION`` "can slightly
  exceed unity owing to noise in the SFD98 maps, although it is never below 0", from ``EBV`` and
  A/E(B-V) = 3.214, 2.165, 1.592, 1.211 (g, r, i, z); the i band only in part of the south (DR9 and the
  north have no FLUX_I).
* DESI data model, zcatalog (desidatamodel.readthedocs.io; DR1 zall-pix): one row per spectrum; a
  TARGETID observed more than once has several rows, ``ZCAT_PRIMARY`` True on the best one.
* Cut-out cubes stored channels last ``(N, H, W, 4)`` (the numpy / TensorFlow image convention) and
  multi-extension FITS with one ``(N, H, W)`` image HDU per band.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import warnings

import astropy.units as u
import numpy as np
import pytest
from astropy.io import fits

from astro.data.catalog import read_legacy_survey
from astro.data.splits import split_catalogue
from astro.synthetic import make_galaxies
from scimech.errors import DataValidationError, MissingVariableError, UnitsError

from .product_fixtures import R_DECAM, dr10_columns, write_cube, write_table

N = 48
AB = u.zero_point_flux(3631 * u.Jy)  # maggies are fluxes relative to the AB zero point (1 nmgy = 3.631e-6 Jy)


@pytest.fixture(scope="module")
def galaxies():
    return make_galaxies(N, seed=11)


def read(path, images=None):
    """The documented door; the dropped-rows warning is checked through ``meta`` and the reading."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return read_legacy_survey(path, images)


def column(cols, name):
    return next(c for c in cols if c.name == name)


def setcol(cols, name, array, fmt=None):
    """``cols`` with column ``name`` replaced (or appended) by ``array``."""
    out = [c for c in cols if c.name != name]
    old = next((c for c in cols if c.name == name), None)
    out.append(fits.Column(name=name, format=fmt or old.format, array=array, unit=None if old is None else old.unit))
    return out


def test_tractor_rows_outside_their_brick_are_dropped_and_cannot_leak_into_the_test_set(galaxies, tmp_path):
    # a Tractor catalogue: 10 sources near the edge appear again as seen from the neighbouring brick
    rows = np.concatenate([np.arange(N), np.arange(10)])
    cols = dr10_columns(galaxies.catalog, rows)
    bid, oid = column(cols, "BRICKID").array.copy(), column(cols, "OBJID").array.copy()
    bid[N:] += 1
    oid[N:] += 500
    primary = np.arange(len(rows)) < N
    cols = setcol(setcol(setcol(cols, "BRICKID", bid), "OBJID", oid), "BRICK_PRIMARY", primary, "L")
    s = read(write_table(tmp_path / "tractor.fits", cols))
    assert len(s) == N and s.meta["n_rejected"] == 10
    assert [k for k, v in s.meta["rejected"].items() if v] == [
        next(k for k in s.meta["rejected"] if "BRICK_PRIMARY" in k)
    ]
    np.testing.assert_array_equal(s.catalog["row"], np.arange(N))
    # the same sky position (the independent identity of a source) is never on both sides of the split
    train, test = split_catalogue(s, 0.25, 0)
    ra = column(cols, "RA").array[np.asarray(s.catalog["row"])]
    assert not set(np.round(ra[train], 9)) & set(np.round(ra[test], 9))


def test_dup_sources_are_dropped_as_dup_and_psf_sources_are_kept_and_said(galaxies, tmp_path):
    cols = dr10_columns(galaxies.catalog)
    typ = np.array(["EXP", "DEV", "SER", "REX"])[np.arange(N) % 4].astype("U3")
    typ[:5], typ[5:8] = "PSF", "DUP"
    cols = setcol(cols, "TYPE", typ)
    for b in "GRIZ":  # DR10: no optical flux assigned to DUP sources
        for name in (f"FLUX_{b}", f"FLUX_IVAR_{b}"):
            a = column(cols, name).array.copy()
            a[5:8] = 0
            cols = setcol(cols, name, a)
    s = read(write_table(tmp_path / "dup.fits", cols))
    dup = next(k for k in s.meta["rejected"] if k.startswith("TYPE DUP"))
    assert s.meta["rejected"][dup] == 3 and s.meta["rejected"]["non-positive inverse variance"] == 0
    assert len(s) == N - 3
    r = s.meta["reading"]
    assert r.sections["rows"]["TYPE (kept)"].split(", ")[2] == "PSF 5"
    assert any(n.startswith("5 kept rows are TYPE PSF") for n in r.notes)


def test_desi_spectra_that_are_not_zcat_primary_are_dropped_and_the_primary_redshift_kept(galaxies, tmp_path):
    rows = np.concatenate([np.arange(N), np.arange(12)])  # 12 targets observed twice
    cols = dr10_columns(galaxies.catalog, rows, desi=True)
    z = column(cols, "Z").array.copy()
    z[N:] += 0.3  # the second spectrum: another, worse redshift
    primary = np.arange(len(rows)) < N
    cols = setcol(setcol(cols, "Z", z), "ZCAT_PRIMARY", primary, "L")
    s = read(write_table(tmp_path / "zall.fits", cols))
    assert len(s) == N and sum(s.meta["rejected"].values()) == 12
    assert "ZCAT_PRIMARY False" in next(k for k, v in s.meta["rejected"].items() if v)
    np.testing.assert_allclose(np.asarray(s.catalog["z"]), np.asarray(galaxies.catalog["z"]), rtol=0, atol=0)


def test_psf_sources_with_nan_shapes_are_point_sources_and_other_nan_shapes_are_dropped(galaxies, tmp_path):
    cols = dr10_columns(galaxies.catalog)
    typ = np.array(["EXP", "DEV", "SER", "REX"])[np.arange(N) % 4].astype("U3")
    typ[:6] = "PSF"
    cols = setcol(cols, "TYPE", typ)
    for name in ("SHAPE_R", "SHAPE_E1", "SHAPE_E2"):
        a = column(cols, name).array.copy()
        a[:6] = np.nan  # 6 PSF sources
        a[6:8] = np.nan if name == "SHAPE_R" else a[6:8]  # 2 galaxies (EXP, DEV) without a size
        cols = setcol(cols, name, a)
    s = read(write_table(tmp_path / "psf.fits", cols))
    assert s.meta["rejected"]["masked or non-finite value"] == 2 and len(s) == N - 2
    psf = np.asarray(s.catalog["row"]) < 6
    assert psf.sum() == 6
    assert np.all(s.catalog["shape_r"][psf] == 0 * u.arcsec) and np.all(np.asarray(s.catalog["shape_e1"])[psf] == 0)
    assert s.meta["reading"].sections["rows"]["PSF shape"].startswith("6 TYPE PSF rows")


def test_mw_transmission_above_one_where_ebv_is_negative_is_read_against_astropy_magnitudes(galaxies, tmp_path):
    cols = dr10_columns(galaxies.catalog)
    ebv = column(cols, "EBV").array.copy()
    ebv[:3] = -0.004  # SFD98 noise: T slightly above 1
    cols = setcol(cols, "EBV", ebv)
    for b in "griz":
        cols = setcol(
            cols, f"MW_TRANSMISSION_{b.upper()}", (10 ** (-0.4 * R_DECAM[b] * ebv.astype(float))).astype(np.float32)
        )
    assert column(cols, "MW_TRANSMISSION_G").array[0] > 1.01
    s = read(write_table(tmp_path / "mw.fits", cols))
    assert len(s) == N
    observed = (column(cols, "FLUX_G").array.astype(float) * u.nmgy).to(u.Jy, AB).to(u.ABmag)
    corrected = observed.value - R_DECAM["g"] * ebv.astype(float)  # m - A_g [AB mag], by astropy
    assert np.isfinite(corrected).sum() > N - 5
    np.testing.assert_allclose(s.catalog["flux_g"].to(u.Jy, AB).to(u.ABmag).value, corrected, atol=2e-6)


def test_mw_transmission_columns_holding_magnitudes_are_refused_in_one_line(galaxies, tmp_path):
    cols = dr10_columns(galaxies.catalog)
    ebv = column(cols, "EBV").array.astype(float)
    for b in "griz":  # A_b in mag, all in (0, 1]: the range cannot tell
        cols = setcol(cols, f"MW_TRANSMISSION_{b.upper()}", (R_DECAM[b] * ebv).astype(np.float32))
    assert np.all(column(cols, "MW_TRANSMISSION_G").array <= 1)
    with pytest.raises(
        UnitsError, match=r"MW_TRANSMISSION_G does not follow the table's EBV.*T = 10\*\*\(-0\.4 \* A\)"
    ):
        read(write_table(tmp_path / "mags.fits", cols))


def test_the_catalogue_table_is_found_in_a_later_hdu_and_said(galaxies, tmp_path):
    meta = fits.BinTableHDU.from_columns(
        [fits.Column(name="BRICKNAME", format="8A", array=np.array(["1500p020"]))], name="BRICKS"
    )
    path = tmp_path / "hdu2.fits"
    fits.HDUList(
        [fits.PrimaryHDU(), meta, fits.BinTableHDU.from_columns(dr10_columns(galaxies.catalog), name="CATALOG")]
    ).writeto(path)
    s = read(path)
    assert len(s) == N
    np.testing.assert_allclose(
        s.catalog["flux_r"].value * fits.getdata(path, 2)["MW_TRANSMISSION_R"],
        galaxies.catalog["flux_r"].to_value(u.nmgy),
        rtol=1e-6,
    )
    assert s.meta["reading"].sections["rows"]["table"] == "HDU 2 (CATALOG)"


def test_a_north_sweep_without_the_i_band_is_refused_naming_the_south(galaxies, tmp_path):
    path = write_table(
        tmp_path / "north.fits", dr10_columns(galaxies.catalog, drop=("FLUX_I", "FLUX_IVAR_I", "MW_TRANSMISSION_I"))
    )
    with pytest.raises(MissingVariableError, match=r"\['FLUX_I', 'FLUX_IVAR_I'\].*no i band.*DR10 south"):
        read(path)


def test_rows_without_i_band_imaging_and_negative_fluxes(galaxies, tmp_path):
    cols = dr10_columns(galaxies.catalog)
    fi, ii = column(cols, "FLUX_I").array.copy(), column(cols, "FLUX_IVAR_I").array.copy()
    fi[:7], ii[:7] = 0, 0  # 7 rows outside the i-band footprint
    fg, ig = column(cols, "FLUX_G").array.copy(), column(cols, "FLUX_IVAR_G").array.copy()
    fg[10:16] = -0.4  # 6 faint objects measured negative in g: real
    ig[14:16] = 0  # 2 of them without a measurement
    for name, a in (("FLUX_I", fi), ("FLUX_IVAR_I", ii), ("FLUX_G", fg), ("FLUX_IVAR_G", ig)):
        cols = setcol(cols, name, a)
    s = read(write_table(tmp_path / "noi.fits", cols))
    assert s.meta["rejected"]["non-positive inverse variance"] == 9 and len(s) == N - 9
    rows = s.meta["reading"].sections["rows"]
    assert rows["dropped for FLUX_IVAR_I <= 0"].startswith("7 ") and rows["dropped for FLUX_IVAR_G <= 0"].startswith(
        "2 "
    )
    assert int((s.catalog["flux_g"].value < 0).sum()) == 4


@pytest.mark.parametrize("kind", ["npy", "fits"])
def test_channels_last_cubes_are_read_as_the_same_cut_outs(galaxies, tmp_path, kind):
    cat = write_table(tmp_path / "cat.fits", dr10_columns(galaxies.catalog, mw=False))
    last = np.ascontiguousarray(np.transpose(galaxies.images, (0, 2, 3, 1)), np.float32)  # (N, H, W, 4)
    if kind == "npy":
        cube = tmp_path / "last.npy"
        np.save(cube, last)
    else:
        cube = tmp_path / "last.fits"
        h = fits.ImageHDU(last)
        h.header["BANDS"] = "griz"
        fits.HDUList([fits.PrimaryHDU(), h]).writeto(cube)
    s = read(cat, cube)
    np.testing.assert_array_equal(s.images, galaxies.images.astype(np.float32))
    facts = s.meta["reading"].sections["bands"]
    assert "channels last" in facts["cut-outs"] and "band order confirmed" in facts["flux cross-check"]


def test_one_image_hdu_per_band_in_any_order_is_stacked_by_its_names(galaxies, tmp_path):
    cat = write_table(tmp_path / "cat.fits", dr10_columns(galaxies.catalog, mw=False))
    hdus = [fits.PrimaryHDU()]
    for b in "zgir":  # not g, r, i, z: the names decide
        hdus.append(fits.ImageHDU(galaxies.images[:, "griz".index(b)].astype(np.float32), name=f"IMAGE_{b.upper()}"))
        hdus[-1].header["BUNIT"] = "nanomaggy"
    fits.HDUList(hdus).writeto(tmp_path / "mef.fits")
    s = read(cat, tmp_path / "mef.fits")
    np.testing.assert_array_equal(s.images, galaxies.images.astype(np.float32))
    said = s.meta["reading"].sections["bands"]["cut-outs"]
    assert said.startswith("z, g, i, r (one image HDU per band (IMAGE_Z: z") and said.endswith(
        "reordered to g, r, i, z"
    )
    # an HDU that names no band: refused with the fix
    hdus[2].name = "EXTRA"
    fits.HDUList(hdus).writeto(tmp_path / "unnamed.fits")
    with pytest.raises(DataValidationError, match=r"name no band; give each a BAND card"):
        read(cat, tmp_path / "unnamed.fits")


def test_cut_outs_hold_right_answers_or_one_line_refusals(galaxies, tmp_path):
    cat = write_table(tmp_path / "cat.fits", dr10_columns(galaxies.catalog, mw=False))
    s = read(cat, write_cube(tmp_path / "maggy.fits", galaxies.images, bunit="maggy", scale=1e-9))
    np.testing.assert_allclose(s.images, galaxies.images, rtol=1e-5, atol=1e-7)
    with pytest.raises(UnitsError, match="in maggies"):
        read(cat, write_cube(tmp_path / "maggy_nobunit.fits", galaxies.images, bunit=None, scale=1e-9))
    h = fits.ImageHDU(np.ascontiguousarray(galaxies.images[:, [0, 1, 3]], np.float32))
    h.header["BANDS"] = "grz"
    fits.HDUList([fits.PrimaryHDU(), h]).writeto(tmp_path / "grz.fits")
    with pytest.raises(DataValidationError, match=r"without \['i'\]"):
        read(cat, tmp_path / "grz.fits")
    perm = np.random.default_rng(0).permutation(N)
    with pytest.raises(DataValidationError, match="row by row"):
        read(cat, write_cube(tmp_path / "perm.fits", galaxies.images[perm]))


def test_inspect_answers_each_trial_file_or_refuses_it_in_one_line(galaxies, tmp_path):
    plain = write_table(tmp_path / "plain.fits", dr10_columns(galaxies.catalog, desi=True))
    with open(plain, "rb") as f, gzip.open(tmp_path / "sweep.fits.gz", "wb") as o:
        o.write(f.read())
    lower = [
        fits.Column(name=c.name.lower(), format=c.format, array=c.array, unit=c.unit)
        for c in dr10_columns(galaxies.catalog, desi=True)
    ]
    write_table(tmp_path / "lower.fits", lower)
    write_table(tmp_path / "empty.fits", dr10_columns(galaxies.catalog, np.array([], int)))
    np.save(tmp_path / "last.npy", np.transpose(galaxies.images, (0, 2, 3, 1)).astype(np.float32))
    code = "import sys\nfrom scimech.cli.commands import main\nsys.exit(main(sys.argv[1:]))"
    for args, rc in (
        ([tmp_path / "sweep.fits.gz"], 0),
        ([tmp_path / "lower.fits"], 0),
        ([plain, "--images", tmp_path / "last.npy"], 0),
        ([tmp_path / "empty.fits"], 2),
    ):
        done = subprocess.run(
            [sys.executable, "-c", code, "astro", "inspect", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == rc, (args, done.stderr)
        if rc:
            assert len(done.stderr.strip().splitlines()) == 1 and "empty (0 rows)" in done.stderr
            assert "Traceback" not in done.stderr
        else:
            assert f"kept: {N}" in done.stdout


def test_north_and_south_photometry_of_one_galaxy_is_one_object(galaxies, tmp_path):
    # DR10 south (RELEASE 10000) and north (9010) sweeps concatenated: 8 galaxies of the overlap twice, under other
    # RELEASE, BRICKID and OBJID, 0.05" apart
    rows = np.concatenate([np.arange(N), np.arange(8)])
    cols = dr10_columns(galaxies.catalog, rows)
    rel, bid, ra = (column(cols, c).array.copy() for c in ("RELEASE", "BRICKID", "RA"))
    rel[N:], bid[N:], ra[N:] = 9010, bid[N:] + 7, ra[N:] + 0.05 / 3600
    cols = setcol(setcol(setcol(cols, "RELEASE", rel), "BRICKID", bid), "RA", ra)
    s = read(write_table(tmp_path / "north_south.fits", cols))
    assert len(s) == N + 8 and len(np.unique(s.catalog["object"])) == N
    assert s.meta["reading"].sections["rows"]["one source in two releases"].startswith("16 rows")
    train, test = split_catalogue(s, 0.25, 0)
    src = rows[np.asarray(s.catalog["row"])]  # the galaxy each row was written from
    assert not set(src[train]) & set(src[test])
    # two deblended sources of one release 0.05" apart stay two
    rel[N:] = 10000
    s = read(write_table(tmp_path / "one_release.fits", setcol(cols, "RELEASE", rel)))
    assert len(np.unique(s.catalog["object"])) == N + 8


@pytest.mark.parametrize(
    "column_name, tunit", [("SHAPE_R", "arcseconds"), ("FLUX_G", "NANOMAGGY"), ("EBV", "magnitude")]
)
def test_unit_cards_in_other_spellings_are_read(galaxies, tmp_path, column_name, tunit):
    cols = [
        fits.Column(name=c.name, format=c.format, array=c.array, unit=tunit if c.name == column_name else c.unit)
        for c in dr10_columns(galaxies.catalog, mw=False)
    ]
    s = read(write_table(tmp_path / "spelled.fits", cols))
    key = {"SHAPE_R": "shape_r", "FLUX_G": "flux_g", "EBV": "ebv"}[column_name]
    np.testing.assert_allclose(
        np.asarray(u.Quantity(s.catalog[key]).value), np.asarray(u.Quantity(galaxies.catalog[key]).value), rtol=1e-6
    )


def test_unit_cards_astropy_cannot_read_are_refused_in_one_line(galaxies, tmp_path):
    cols = [
        fits.Column(
            name=c.name, format=c.format, array=c.array, unit="nanomaggies per object" if c.name == "FLUX_R" else c.unit
        )
        for c in dr10_columns(galaxies.catalog)
    ]
    with pytest.raises(
        UnitsError,
        match=r"FLUX_R has TUNIT 'nanomaggies per object'.*fix its TUNIT card \(the "
        r"survey's: 'nanomaggy'\)",
    ):
        read(write_table(tmp_path / "junk_unit.fits", cols))
    cat = write_table(tmp_path / "cat.fits", dr10_columns(galaxies.catalog, mw=False))
    s = read(cat, write_cube(tmp_path / "per_pixel.fits", galaxies.images, bunit="nanomaggy/pixel"))
    np.testing.assert_array_equal(s.images, galaxies.images.astype(np.float32))
    with pytest.raises(UnitsError, match=r"BUNIT 'counts' is not a unit astropy reads; set BUNIT = 'nanomaggy'"):
        read(cat, write_cube(tmp_path / "counts.fits", galaxies.images, bunit="counts"))
