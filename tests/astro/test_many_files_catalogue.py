"""A Legacy Survey catalogue in many files, a folder of per-galaxy cut-outs and a redshift in km/s.

Layouts from the products' own documentation (tests/astro/many_files_fixtures.py): DR10 sweep files named
``sweep-<ramin><decmin>-<ramax><decmax>.fits`` (legacysurvey.org/dr10/files, "Sweep Catalogs"), south and
north sweeps of one name, cut-outs as the viewer's ``fits-cutout`` writes them (legacysurvey.org/viewer).
Each result is compared with the synthetic galaxies written (their fluxes, redshifts and images), hand
counts, or a one-line refusal naming the fix.
"""

from __future__ import annotations

import argparse
import warnings

import astropy.units as u
import numpy as np
import pytest
from astropy.io import fits

from astro.data.catalog import REASON_NO_CUTOUT, read_legacy_survey
from astro.plan import data_files
from astro.synthetic import make_galaxies
from scimech.errors import ConfigError, DataValidationError, UnitsError

from .many_files_fixtures import positions, sweep_name, with_columns, write_cutout, write_sweep
from .product_fixtures import dr10_columns, write_table

N = 60
C_KMS = 299792.458  # the speed of light in km/s (exact, SI definition)


@pytest.fixture(scope="module")
def galaxies():
    return make_galaxies(N, seed=7)


def read(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the dropped-rows warning; counts asserted below
        return read_legacy_survey(*args, **kw)


def two_sweeps(tmp_path, galaxies, **kw):
    south = tmp_path / "south"
    a = write_sweep(south, sweep_name(150, 0, 160, 5), galaxies.catalog, np.arange(0, 30), 150, 0, **kw)
    b = write_sweep(south, sweep_name(160, 0, 170, 5), galaxies.catalog, np.arange(30, 60), 160, 0, **kw)
    return south, a, b


@pytest.mark.parametrize("how", ["list", "glob", "folder"])
def test_sweep_files_read_as_one_catalogue(tmp_path, galaxies, how):
    south, a, b = two_sweeps(tmp_path, galaxies, mw=False)
    source = {"list": [a, b], "glob": str(south / "sweep-*.fits"), "folder": south}[how]
    s = read(source)
    cat = s.catalog
    assert len(cat) == N and list(cat["file"]) == [0] * 30 + [1] * 30 and list(cat["row"]) == [*range(30)] * 2
    truth = galaxies.catalog
    for b_ in "griz":  # float32 in the file: 1e-6 relative
        np.testing.assert_allclose(cat[f"flux_{b_}"].to_value(u.nmgy), truth[f"flux_{b_}"].to_value(u.nmgy), rtol=1e-6)
    np.testing.assert_allclose(cat["z"], np.asarray(truth["z"]), rtol=1e-12)
    assert len(np.unique(cat["object"])) == N
    files = s.meta["reading"].sections["files"]
    assert "DR10 sweep of RA 150..160, Dec 0..5 deg (from its name); every row inside it" in files[a.name]
    assert "DR10 sweep of RA 160..170, Dec 0..5 deg" in files[b.name]
    assert files["how combined"].startswith("2 files read as one catalogue")


def test_north_and_south_sweeps_of_one_patch_merge_their_overlap(tmp_path, galaxies):
    name = sweep_name(150, 30, 160, 35)
    south = write_sweep(tmp_path / "south", name, galaxies.catalog, np.arange(0, 20), 150, 30, release=10000)
    north = write_sweep(tmp_path / "north", name, galaxies.catalog, np.arange(10, 25), 150, 30, release=9010)
    s = read([south, north])
    # by hand: objects 0..24; 10..19 in both sweeps (same position, other RELEASE): 20 rows on 10 objects
    assert len(s.catalog) == 35 and len(np.unique(s.catalog["object"])) == 25
    rows = s.meta["reading"].sections["rows"]
    assert rows["one source in two releases"].startswith("20 rows of different RELEASE")
    assert rows["duplicates"].startswith("20 rows share their object with another row (10 objects)")


def test_a_sweep_whose_rows_lie_outside_its_named_patch_is_said(tmp_path, galaxies):
    # rows placed at RA 160.5.. (the next patch) in a file named for RA 150..160
    path = write_sweep(tmp_path, sweep_name(150, 0, 160, 5), galaxies.catalog, np.arange(10), 160, 0)
    said = read(path).meta["reading"].sections["files"][path.name]
    assert said.endswith("10 rows outside it (RA/DEC): a file renamed, or of another patch?)")


def test_files_that_do_not_belong_together_are_refused(tmp_path, galaxies):
    a = write_sweep(tmp_path, sweep_name(150, 0, 160, 5), galaxies.catalog, np.arange(0, 30), 150, 0)
    b = write_sweep(tmp_path, sweep_name(160, 0, 170, 5), galaxies.catalog, np.arange(30, 60), 160, 0, desi=True)
    with pytest.raises(DataValidationError, match="do not hold the same columns"):
        read([a, b])
    with pytest.raises(ConfigError, match="given twice"):
        read([a, a])
    with pytest.raises(FileNotFoundError, match="No file matches"):
        read(str(tmp_path / "sweep-999*.fits"))


# --------------------------------------------------------------------------- a redshift in km/s
def _with_z(tmp_path, galaxies, name: str, values, unit: str | None):
    cols = [c for c in dr10_columns(galaxies.catalog) if c.name != "Z"]
    cols.append(fits.Column(name=name, format="D", array=np.asarray(values, float), unit=unit))
    return write_table(tmp_path / f"cat-{name}-{unit}.fits".replace("/", "_"), cols)


@pytest.mark.parametrize("unit, per_kms", [("km/s", 1.0), ("m/s", 1000.0), ("km s-1", 1.0)])
def test_a_redshift_in_km_s_is_read_as_cz_over_c(tmp_path, galaxies, unit, per_kms):
    z = np.asarray(galaxies.catalog["z"], float)
    path = _with_z(tmp_path, galaxies, "Z", z * C_KMS * per_kms, unit)
    s = read(path)
    np.testing.assert_allclose(s.catalog["z"], z, rtol=1e-12)
    row = s.meta["reading"].row("redshift")
    assert row.units_found == unit and row.conversion.startswith(f"cz [{unit}] / c -> z")


def test_a_velocity_without_units_is_refused_naming_the_fix(tmp_path, galaxies):
    cz = np.asarray(galaxies.catalog["z"], float) * C_KMS
    with pytest.raises(UnitsError, match=r"velocity cz in km/s without units\? Set its TUNIT to 'km/s'"):
        read(_with_z(tmp_path, galaxies, "Z", cz, None))
    with pytest.raises(UnitsError, match="CZ is a velocity without units"):
        read(_with_z(tmp_path, galaxies, "CZ", cz, None))
    s = read(_with_z(tmp_path, galaxies, "CZ", cz, "km/s"))  # with its unit, CZ serves as the redshift
    np.testing.assert_allclose(s.catalog["z"], np.asarray(galaxies.catalog["z"]), rtol=1e-12)


# --------------------------------------------------------------------------- a folder of per-galaxy cut-outs
def test_cutout_folder_matched_by_sky_position(tmp_path, galaxies):
    path = write_sweep(tmp_path, sweep_name(150, 0, 160, 5), galaxies.catalog, np.arange(30), 150, 0, mw=False)
    folder = tmp_path / "cutouts"
    folder.mkdir()
    ra, dec = positions(np.arange(30), 150, 0)
    for k in range(25):  # rows 25..29 have none; one cut-out far from every row
        write_cutout(folder / f"cutout_{k:03d}.fits", galaxies.images[k], ra[k], dec[k])
    write_cutout(folder / "cutout_far.fits", galaxies.images[0], 200.0, -10.0)
    s = read(path, folder)
    assert list(s.catalog["row"]) == list(range(25))
    np.testing.assert_array_equal(s.images, galaxies.images[:25].astype(np.float32))
    assert s.meta["rejected"][REASON_NO_CUTOUT] == 5
    said = s.meta["reading"].sections["files"]["cut-outs"]
    assert "by sky position" in said and '1"' in said
    assert "25 of 30 rows matched, 5 without a cut-out (dropped), 1 cut-outs match no row (cutout_far.fits)" in said


def test_cutout_folder_matched_by_targetid(tmp_path, galaxies):
    path = write_sweep(tmp_path, "catalog.fits", galaxies.catalog, np.arange(20), 150, 0, mw=False, desi=True)
    folder = tmp_path / "cutouts"
    folder.mkdir()
    targetid = 39627000000000000 + np.arange(20)  # product_fixtures: TARGETID of object k
    for k in range(0, 20, 2):  # every other galaxy; positions 1 deg off: only the identifier can match them
        write_cutout(folder / f"{targetid[k]}.fits", galaxies.images[k], 10.0 + k, 1.0)
    s = read(path, folder)
    assert list(s.catalog["row"]) == list(range(0, 20, 2))
    np.testing.assert_array_equal(s.images, galaxies.images[0:20:2].astype(np.float32))
    assert "by identifier" in s.meta["reading"].sections["files"]["cut-outs"]


def test_data_folder_and_inspect_list_the_files(tmp_path, galaxies):
    from astro.study import AstroStudy

    south, a, b = two_sweeps(tmp_path, galaxies)
    (south / "cutouts").mkdir()
    ra, dec = positions(np.arange(30), 150, 0)
    for k in range(30):
        write_cutout(south / "cutouts" / f"c{k}.fits", galaxies.images[k], ra[k], dec[k])
    catalog, images = data_files(south)
    assert catalog == south and images == south / "cutouts"
    reading = AstroStudy().inspect(south, argparse.Namespace(images=None, test_fraction=0.25, seed=0))
    files = reading.sections["files"]
    assert set(files) >= {a.name, b.name, "how combined", "cut-outs"}
    assert "30 of 60 rows matched, 30 without a cut-out (dropped)" in files["cut-outs"]
    with pytest.raises(ConfigError, match="folder without a catalogue"):
        data_files(tmp_path / "south" / "cutouts")


def test_repeated_positions_share_one_cutout(tmp_path, galaxies):
    rows = np.array([0, 1, 2, 1])  # object 1 twice (overlapping sweeps): both rows take its cut-out
    path = tmp_path / "cat.fits"
    ra, dec = positions(rows, 150, 0)
    write_table(path, with_columns(dr10_columns(galaxies.catalog, rows, mw=False), RA=ra, DEC=dec))
    folder = tmp_path / "cutouts"
    folder.mkdir()
    for k in (0, 1, 2):
        pra, pdec = positions(np.array([k]), 150, 0)
        write_cutout(folder / f"g{k}.fits", galaxies.images[k], pra[0], pdec[0])
    s = read(path, folder)
    np.testing.assert_array_equal(s.images, galaxies.images[rows].astype(np.float32))


def test_a_study_s_catalogue_unit_reads_the_sweep_folder(tmp_path, galaxies):
    import json

    from astro.plan import resolve_settings
    from astro.units import catalog_unit

    south, a, b = two_sweeps(tmp_path, galaxies)
    settings = resolve_settings(tmp_path / "run", catalog=south)
    assert settings.source == "catalog" and settings.catalog == south.resolve()
    glob_settings = resolve_settings(tmp_path / "run2", catalog=str(south / "sweep-*.fits"))
    assert str(glob_settings.catalog).endswith("sweep-*.fits")
    with pytest.raises(FileNotFoundError, match="No file matches"):
        resolve_settings(tmp_path / "run3", catalog=str(south / "nothing-*.fits"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = catalog_unit(
            str(settings.catalog), None, str(tmp_path / "tr.fits"), str(tmp_path / "te.fits"), 0.25, 0, None
        )
    assert out["n_train"] + out["n_test"] == N  # both sweeps' rows, split by object
    files = json.loads(out["reading"])["sections"]["files"]
    assert a.name in files and b.name in files


def test_cli_takes_several_sweep_files_and_a_glob(tmp_path, galaxies, capsys):
    from astro.plan import settings_from_args
    from astro.study import AstroStudy
    from scimech.cli.commands import main

    south, a, b = two_sweeps(tmp_path, galaxies)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert main(["astro", "inspect", str(a), str(b)]) == 0
        out = capsys.readouterr().out
        assert a.name in out and b.name in out and "2 files read as one catalogue" in out
        assert main(["astro", "inspect", str(south / "sweep-*.fits")]) == 0
        assert "2 files read as one catalogue" in capsys.readouterr().out
    parser = AstroStudy().study_parser()
    args = parser.parse_args(["--data", str(a), str(b), "--out", str(tmp_path / "run")])
    s = settings_from_args(args)
    assert s.record["catalog"] == [str(a.resolve()), str(b.resolve())] and "(2 files)" in str(s.catalog)
    args = parser.parse_args(["--data", str(south / "sweep-*.fits"), "--out", str(tmp_path / "run")])
    assert settings_from_args(args).record["catalog"] == str((south / "sweep-*.fits").resolve())
    with pytest.raises(SystemExit):
        parser.parse_args(["--data", str(south / "nothing-*.fits"), "--out", str(tmp_path / "run")])
    assert "no file or folder matches" in capsys.readouterr().err
