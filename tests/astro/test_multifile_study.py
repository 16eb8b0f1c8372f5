"""``scimech astro study`` on a Legacy Survey product as it is distributed: three DR10 sweep files and a folder
of per-galaxy cut-outs, given on the command line.

Layouts from the products' documentation (tests/astro/many_files_fixtures.py): sweep files named
``sweep-<ramin><decmin>-<ramax><decmax>.fits`` (legacysurvey.org/dr10/files, "Sweep Catalogs"), cut-outs as the
viewer's ``fits-cutout`` writes them (legacysurvey.org/viewer). The independent truth is the one-file path: the
three sweep tables stacked by astropy (:func:`astropy.table.vstack`) into one catalogue and the cut-outs written
as one (N, 4, H, W) cube in its row order, read and split as the study reads one file.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from astropy.table import Table, vstack

from astro.data.catalog import read_legacy_survey
from astro.data.files import load_sample
from astro.data.splits import split_catalogue
from astro.plan import STANDIN_STAMP
from astro.resume import input_fingerprint
from astro.synthetic import make_galaxies
from scimech.cli.commands import main

from .many_files_fixtures import positions, sweep_name, write_cutout, write_sweep

PER_SWEEP, N_SWEEPS = 30, 3
N = PER_SWEEP * N_SWEEPS
#: the study's columns compared with the one-file path (``row`` / ``file`` say where a row came from: they differ)
COLUMNS = (
    *(f"flux_{b}" for b in "griz"),
    *(f"flux_ivar_{b}" for b in "griz"),
    "shape_r",
    "shape_e1",
    "shape_e2",
    "ebv",
    "z",
    "a_v",
    "object",
)


def _product(tmp_path, galaxies, per_sweep: int = PER_SWEEP):
    """Three sweeps of ``per_sweep`` galaxies each (10 deg apart in RA) and a cut-out folder, one FITS per galaxy centred on
    its row's position; returns the sweep paths, the folder, and the row order of the galaxies."""
    sweeps, order = [], []
    cutouts = tmp_path / "cutouts"
    cutouts.mkdir()
    for k in range(N_SWEEPS):
        rows = np.arange(k * per_sweep, (k + 1) * per_sweep)
        ra0 = 150 + 10 * k
        sweeps.append(write_sweep(tmp_path / "south", sweep_name(ra0, 0, ra0 + 10, 5), galaxies.catalog, rows, ra0, 0))
        ra, dec = positions(rows, ra0, 0)
        for i, r in enumerate(rows):
            write_cutout(cutouts / f"cutout_{r:04d}.fits", galaxies.images[r], ra[i], dec[i])
        order += list(rows)
    return sweeps, cutouts, np.array(order)


def _one_file(tmp_path, sweeps, galaxies, order):
    """The same product as one catalogue and one cube (the independent path), read and split as the study does."""
    one = tmp_path / "one" / "catalog.fits"
    one.parent.mkdir()
    vstack([Table.read(p) for p in sweeps]).write(one)
    cube = tmp_path / "one" / "images.npy"
    np.save(cube, galaxies.images[order].astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        sample = read_legacy_survey(one, cube, stamp=STANDIN_STAMP)
    train, test = split_catalogue(sample, 0.25, 0)
    return sample[train], sample[test]


@pytest.mark.slow  # a whole study (a stand-in trained for one epoch, the head interventions)
def test_the_study_reads_sweeps_and_a_cutout_folder_as_the_same_galaxies_in_one_file(tmp_path):
    galaxies = make_galaxies(N, seed=11)
    sweeps, cutouts, order = _product(tmp_path, galaxies)
    out = tmp_path / "study"
    argv = ["astro", "study", "--data", *map(str, sweeps), "--images", str(cutouts), "--out", str(out)]
    sizes = ["--epochs", "1", "--batch-size", "40", "--n-bootstrap", "20", "--chunk-size", "30"]
    assert main([*argv, *sizes]) == 0

    report = (out / "report.md").read_text()
    sections = [line for line in report.splitlines() if line.startswith("## ")]
    assert sections[:2] == ["## Is the model competent?", "## What was read"]  # the files right after competence
    read = report.split("## What was read", 1)[1].split("\n## ", 1)[0]
    for p in sweeps:  # every file, with its rows and the sky patch its name gives
        assert f"- {p.name}: {p} ({PER_SWEEP} rows" in read and "DR10 sweep of RA" in read
    assert f"- how combined: {N_SWEEPS} files read as one catalogue, rows one after another ({N} rows)" in read
    assert f"- cut-outs: {N} files in {cutouts}, matched by sky position" in read
    assert f"{N} of {N} rows matched, 0 without a cut-out" in read

    want_train, want_test = _one_file(tmp_path, sweeps, galaxies, order)
    for name, want in (("train", want_train), ("test", want_test)):
        got = load_sample(out / f"{name}.fits")
        assert len(got) == len(want)
        for c in COLUMNS:  # float32 columns written and read back: exact
            np.testing.assert_array_equal(np.asarray(got.catalog[c]), np.asarray(want.catalog[c]), err_msg=c)
        np.testing.assert_array_equal(got.images, want.images)  # cut-outs matched by position = the cube's rows
        # each row says the sweep it came from and its row there: row r of file k is row 30 k + r of the one file
        at = PER_SWEEP * np.asarray(got.catalog["file"]) + np.asarray(got.catalog["row"])
        np.testing.assert_array_equal(at, np.asarray(want.catalog["row"]))


def test_inspect_takes_the_sweeps_and_a_cutout_folder_and_a_glob_keys_the_run_as_its_files(tmp_path, capsys):
    """The same product on the command line without a study: ``inspect`` with the sweeps and ``--images FOLDER``
    lists every file, and a run folder is keyed by the content of the files a glob names (as by the list)."""
    galaxies = make_galaxies(15, seed=11)
    sweeps, cutouts, _ = _product(tmp_path, galaxies, per_sweep=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert main(["astro", "inspect", *map(str, sweeps), "--images", str(cutouts)]) == 0
    printed = capsys.readouterr().out
    assert all(p.name in printed for p in sweeps) and "3 files read as one catalogue" in printed
    assert f"cut-outs: 15 files in {cutouts}, matched by sky position" in printed
    listed = input_fingerprint({"source": "catalog", "catalog": [str(p) for p in sweeps]})
    globbed = input_fingerprint({"source": "catalog", "catalog": str(tmp_path / "south" / "sweep-*.fits")})
    first = input_fingerprint({"source": "catalog", "catalog": str(sweeps[0])})
    assert listed == globbed and first[0] != listed[0]
