"""Your own galaxies: a Legacy Survey DR10 FITS table (real column names, uppercase, TUNIT cards)
and a cut-out cube read back as the values they were written from; bad rows dropped and
counted; each bad input one clear error; the study CLI runs on them."""

from __future__ import annotations

import astropy.units as u
import numpy as np
import pytest
from astropy.io import fits

from astro import constants
from astro.data.catalog import read_legacy_survey
from astro.synthetic import make_galaxies
from scimech.errors import DataValidationError, DimensionError, MissingVariableError, UnitsError

N = 120
BAD_IVAR, BAD_SHAPE, BAD_PIXEL = 3, 7, 11  # planted bad rows


@pytest.fixture(scope="module")
def truth():
    return make_galaxies(N, seed=3)


def legacy_columns(cat, *, lower=False, drop=(), units=None, z=True, av=True):
    """FITS columns as a DR10 sweep writes them (float32 'E', nanomaggy TUNITs) plus Tractor
    bookkeeping the reader must ignore, and DESI-style Z and FastSpecFit-style AV."""
    units = {"flux": "nanomaggy", "ivar": "1/nanomaggy^2", "shape_r": "arcsec", **(units or {})}

    def col(name, fmt, array, unit=None):
        return fits.Column(name=name.lower() if lower else name, format=fmt, array=array, unit=unit)

    cols = [
        col("RELEASE", "I", np.full(N, 10000)),
        col("BRICKID", "J", np.arange(N)),
        col("OBJID", "J", np.arange(N)),
        col("TYPE", "3A", np.array(["EXP"] * N)),
        col("RA", "D", np.linspace(150, 151, N), "deg"),
        col("DEC", "D", np.linspace(2, 3, N), "deg"),
    ]
    for b in constants.BANDS:
        cols.append(col(f"FLUX_{b.upper()}", "E", cat[f"flux_{b}"].to_value(u.nmgy), units["flux"]))
    for b in constants.BANDS:
        iv = cat[f"flux_ivar_{b}"].to_value(u.nmgy**-2).copy()
        if b == "r":
            iv[BAD_IVAR] = 0.0  # no r-band measurement
        cols.append(col(f"FLUX_IVAR_{b.upper()}", "E", iv, units["ivar"]))
    e1 = np.asarray(cat["shape_e1"], float).copy()
    e1[BAD_SHAPE] = np.nan  # a null (masked) value
    cols += [
        col(
            "SHAPE_R",
            "E",
            cat["shape_r"].to_value(u.arcsec)
            * (60 if units["shape_r"] == "arcmin" else 1)
            / (3600 if units["shape_r"] == "arcmin" else 1),
            units["shape_r"],
        ),
        col("SHAPE_E1", "E", e1),
        col("SHAPE_E2", "E", np.asarray(cat["shape_e2"], float)),
        col("EBV", "E", cat["ebv"].to_value(u.mag), "mag"),
    ]
    if z:
        cols.append(col("Z", "D", np.asarray(cat["z"], float)))
    if av:
        cols.append(col("AV", "E", cat["a_v"].to_value(u.mag), "mag"))
    return [c for c in cols if c.name.upper() not in drop]


def write_catalog(path, cat, **kw):
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(legacy_columns(cat, **kw))]).writeto(path)
    return path


def write_cube(path, images):
    cube = images.copy()
    cube[BAD_PIXEL, 2, 5, 5] = np.nan
    if path.suffix == ".npy":
        np.save(path, cube)
    else:
        hdu = fits.ImageHDU(cube, name="IMAGES")
        hdu.header["BUNIT"] = "nanomaggy"
        fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    return path


@pytest.mark.parametrize("cube_suffix", [".npy", ".fits"])
def test_catalogue_and_cutouts_read_back_with_units(truth, tmp_path, cube_suffix):
    path = write_catalog(tmp_path / "dr10.fits", truth.catalog)
    cube = write_cube(tmp_path / f"cutouts{cube_suffix}", truth.images)
    with pytest.warns(UserWarning, match="dropped 3 of 120 rows"):
        s = read_legacy_survey(path, cube)
    keep = np.setdiff1d(np.arange(N), [BAD_IVAR, BAD_SHAPE, BAD_PIXEL])
    assert s.meta["n_rejected"] == 3
    assert s.meta["rejected"] == {"non-positive inverse variance": 1, "masked or non-finite value": 2}
    np.testing.assert_array_equal(s.catalog["row"], keep)
    cat = truth.catalog[keep]
    for b in constants.BANDS:  # float32 columns: 1e-6 relative is float32 round-off
        assert s.catalog[f"flux_{b}"].unit == u.nmgy and s.catalog[f"flux_ivar_{b}"].unit == u.nmgy**-2
        np.testing.assert_allclose(s.catalog[f"flux_{b}"].value, cat[f"flux_{b}"].to_value(u.nmgy), rtol=1e-6)
        np.testing.assert_allclose(s.catalog[f"flux_ivar_{b}"].value, cat[f"flux_ivar_{b}"].value, rtol=1e-6)
    assert s.catalog["shape_r"].unit == u.arcsec and s.catalog["ebv"].unit == u.mag and s.catalog["a_v"].unit == u.mag
    np.testing.assert_allclose(s.catalog["shape_r"].value, cat["shape_r"].to_value(u.arcsec), rtol=1e-6)
    np.testing.assert_allclose(s.catalog["shape_e1"], np.asarray(cat["shape_e1"]), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(s.catalog["z"], np.asarray(cat["z"]))  # float64 column
    np.testing.assert_array_equal(s.images, truth.images[keep])
    # the study's population cuts work on it
    pops = s.populations()
    np.testing.assert_array_equal(pops["extended"], cat["shape_r"].to_value(u.arcsec) > 0.8)


def test_lowercase_names_units_converted_and_crop(truth, tmp_path):
    path = write_catalog(tmp_path / "lower.fits", truth.catalog, lower=True, units={"shape_r": "arcmin"})
    cube = write_cube(tmp_path / "c.npy", truth.images)
    with pytest.warns(UserWarning):
        s = read_legacy_survey(path, cube, stamp=16)
    keep = s.catalog["row"]
    # SHAPE_R written in arcmin (arcsec / 60): read back in arcsec
    np.testing.assert_allclose(
        s.catalog["shape_r"].to_value(u.arcsec), truth.catalog["shape_r"][keep].to_value(u.arcsec), rtol=1e-6
    )
    np.testing.assert_array_equal(s.images, truth.images[keep][:, :, 4:20, 4:20])  # centre 16 of 24


def test_bad_inputs_are_one_clear_error_each(truth, tmp_path):
    cat = truth.catalog
    with pytest.raises(MissingVariableError, match=r"lacks the Legacy Survey column\(s\) \['SHAPE_R'\]"):
        read_legacy_survey(write_catalog(tmp_path / "a.fits", cat, drop=("SHAPE_R",)))
    with pytest.raises(UnitsError, match="FLUX_G is in Jy, which does not convert to nmgy"):
        read_legacy_survey(write_catalog(tmp_path / "b.fits", cat, units={"flux": "Jy"}))
    good = write_catalog(tmp_path / "good.fits", cat)
    np.save(tmp_path / "three_bands.npy", truth.images[:, :3])
    with pytest.raises(DimensionError, match=r"expected \(N, 4, H, W\)"):
        read_legacy_survey(good, tmp_path / "three_bands.npy")
    np.save(tmp_path / "short.npy", truth.images[:10])
    with pytest.raises(DimensionError, match="holds 10 cut-outs but .* has 120 rows"):
        read_legacy_survey(good, tmp_path / "short.npy")
    empty = tmp_path / "empty.fits"
    fits.HDUList(
        [
            fits.PrimaryHDU(),
            fits.BinTableHDU.from_columns(
                [fits.Column(name=c.name, format=c.format, array=c.array[:0]) for c in legacy_columns(cat)]
            ),
        ]
    ).writeto(empty)
    with pytest.raises(DataValidationError, match="empty"):
        read_legacy_survey(empty)
    (tmp_path / "junk.fits").write_bytes(b"SIMPLE  = junk")
    with pytest.raises(DataValidationError, match="not a readable FITS catalogue"):
        read_legacy_survey(tmp_path / "junk.fits")
    with pytest.raises(FileNotFoundError, match="No catalogue"):
        read_legacy_survey(tmp_path / "absent.fits")


def test_study_cli_runs_on_a_catalogue(truth, tmp_path, capsys):
    from astro.data import files
    from scimech.cli.commands import main

    path = write_catalog(tmp_path / "dr10.fits", truth.catalog)
    cube = write_cube(tmp_path / "cutouts.npy", truth.images)
    out = tmp_path / "run"
    args = [
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
    assert main(args) == 0
    assert "Galaxies: the Legacy Survey catalogue" in (out / "report.md").read_text()
    train = read_rows(out / "train.fits")
    test = read_rows(out / "test.fits")
    kept = np.setdiff1d(np.arange(N), [BAD_IVAR, BAD_SHAPE, BAD_PIXEL])
    # one object per row here (BRICKID = OBJID = row): 25% of the objects, rounded up as scikit-learn's
    # GroupShuffleSplit does
    assert len(test) == int(np.ceil(0.25 * len(kept))) and not set(train) & set(test)
    np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), kept)
    res = files.load_study(out / "study")
    np.testing.assert_array_equal(res["predictions"]["z_true"].values, np.asarray(truth.catalog["z"])[test])
    # without a redshift column the study says what it needs
    nz = write_catalog(tmp_path / "no_z.fits", truth.catalog, z=False)
    assert main(["astro", "study", "--data", str(nz), "--out", str(tmp_path / "nz")]) == 2
    assert "needs a redshift column Z" in capsys.readouterr().err


def read_rows(path):
    from astro.data.files import load_sample

    return np.asarray(load_sample(path).catalog["row"])


def test_written_catalogue_reads_back_as_the_sample_it_was_written_from(truth, tmp_path):
    from astro.data.catalog import LEGACY_COLUMNS, write_legacy_survey

    path = write_legacy_survey(tmp_path / "written.fits", truth.catalog)
    with fits.open(path) as hdul:  # the survey's names and TUNITs, as a sweep file has them
        cols = {c.name: c.unit for c in hdul[1].columns}
    assert cols["FLUX_G"] == "nanomaggy" and cols["FLUX_IVAR_Z"] == "1/nanomaggy^2" and cols["SHAPE_R"] == "arcsec"
    s = read_legacy_survey(path)
    assert s.meta["n_rejected"] == 0 and len(s) == N
    for k, (_, unit) in LEGACY_COLUMNS.items():  # float32 columns: float32 round-off
        want = truth.catalog[k].to_value(unit) if unit is not None else np.asarray(truth.catalog[k], float)
        got = s.catalog[k].to_value(unit) if unit is not None else np.asarray(s.catalog[k], float)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(s.catalog["z"], np.asarray(truth.catalog["z"]))
    np.testing.assert_allclose(s.catalog["a_v"].to_value(u.mag), truth.catalog["a_v"].to_value(u.mag), rtol=1e-6)


def test_negative_redshifts_are_dropped_and_a_truncated_cube_is_named(truth, tmp_path):
    # z = -1 is the usual "no redshift" sentinel: kept, it made the stand-in's training loss NaN
    # (its targets' width 0.01 (1 + z) is 0); a cube cut short raised astropy's TypeError
    from copy import deepcopy

    cat = deepcopy(truth.catalog)
    z = np.asarray(cat["z"], float).copy()
    z[[50, 51, 52]] = -1.0  # rows no other check drops
    z[53] = -0.05
    cat["z"] = z
    with pytest.warns(UserWarning, match="negative redshift"):
        s = read_legacy_survey(write_catalog(tmp_path / "z.fits", cat))
    assert s.meta["rejected"]["negative redshift (a star, or a sentinel such as -1)"] == 4
    assert not {50, 51, 52, 53} & set(np.asarray(s.catalog["row"]).tolist())
    assert (np.asarray(s.catalog["z"]) >= 0).all()
    cube = write_cube(tmp_path / "cube.fits", truth.images)
    data = cube.read_bytes()
    (tmp_path / "cut.fits").write_bytes(data[: int(len(data) * 0.6)])
    with pytest.raises(DataValidationError, match="cut.fits is not a readable .npy or FITS image cube"):
        read_legacy_survey(write_catalog(tmp_path / "good.fits", truth.catalog), tmp_path / "cut.fits")
