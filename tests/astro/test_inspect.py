"""``scimech astro inspect CATALOGUE [--images CUBE] [--json FILE]``: what the study would read from a
DR10 + DESI catalogue, said back without torch, in seconds; a bad cube refused in one line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from astro.synthetic import make_galaxies
from scimech.studies.reading import Reading

from .product_fixtures import repeat_rows, write_cube, write_dr10

N, REPEATED = 60, 12


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inspect")
    g = make_galaxies(N, seed=7)
    rows = repeat_rows(N, REPEATED, seed=2)
    cat = write_dr10(tmp / "dr10_desi.fits", g.catalog, rows, desi=True, zwarn={0: 4})
    cube = write_cube(tmp / "cutouts.fits", g.images[rows], order="grzi", header="BAND")
    bad = write_cube(tmp / "bright.fits", g.images[rows], scale=100.0)
    return tmp, rows, cat, cube, bad


def run_cli(args: list[str]) -> subprocess.CompletedProcess:
    """The CLI in a fresh interpreter; it prints whether torch was imported, last."""
    code = (
        "import sys\nfrom scimech.cli.commands import main\nrc = main(sys.argv[1:])\n"
        "print('TORCH', 'torch' in sys.modules)\nsys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    return done


def test_inspect_prints_and_saves_the_reading_without_torch(files):
    tmp, rows, cat, cube, _ = files
    out = tmp / "reading.json"
    done = run_cli(["astro", "inspect", str(cat), "--images", str(cube), "--json", str(out)])
    assert done.returncode == 0, done.stderr
    # no wall-time bound here: a loaded machine would fail it (speed belongs to bench/); torch unimported is the check
    assert done.stdout.strip().endswith("TORCH False")
    text = done.stdout
    for quantity, column in (
        ("flux_g", "FLUX_G"),
        ("flux_ivar_z", "FLUX_IVAR_Z"),
        ("shape_r", "SHAPE_R"),
        ("milky_way_extinction", "MW_TRANSMISSION_G/R/I/Z"),
        ("redshift", "Z"),
        ("redshift_warning", "ZWARN"),
        ("identity", "TARGETID"),
    ):
        assert any(line.split()[:2] == [quantity, column] for line in text.splitlines()), quantity
    r = Reading.load(out)
    # rows: 72 read; 1 with ZWARN != 0 (hand-planted); 60 objects, 24 rows on 12 repeated objects
    assert r.sections["rows"]["read"] == str(len(rows)) == "72"
    assert r.sections["rows"]["dropped: ZWARN != 0 (DESI redshift warning)"] == "1"
    obj0 = rows[0]  # the dropped row's object: still there if repeated
    n_objects = N - (0 if (rows[1:] == obj0).any() else 1)
    assert r.sections["rows"]["objects"] == f"{n_objects} by TARGETID"
    assert r.sections["bands"]["cut-outs"] == "g, r, z, i (BAND0..BAND3); reordered to g, r, i, z"
    assert r.sections["split"]["by"].startswith("object identity TARGETID (scikit-learn GroupShuffleSplit")
    n_test = int(np.ceil(0.25 * n_objects))  # GroupShuffleSplit rounds the test objects up
    assert r.sections["split"]["test"].startswith(f"{n_test} of {n_objects} objects (25%")
    assert "Saved:" in text and "split:" in text and "bands:" in text and "rows:" in text


def test_inspect_refuses_a_cube_at_100_times_the_catalogue_in_one_line(files):
    tmp, _, cat, _, bad = files
    done = run_cli(["astro", "inspect", str(cat), "--images", str(bad)])
    assert done.returncode == 2
    err = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and "Traceback" not in done.stderr
    assert "x the catalogue's FLUX_G" in err[0] and "likely cause" in err[0]
