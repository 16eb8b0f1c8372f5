"""``scimech ocean study`` on a product as ESGF serves it: CMIP6 one variable per file in time chunks, given on the
command line as a quoted glob.

Layout (tests/ocean/distributed_layouts.py cites it): the CMIP6 Data Reference Syntax file names
``<variable>_Omon_<source>_historical_<member>_<grid>_<start>-<end>.nc``, eight variables in three chunks each.
The independent truth is the one-file path: the same product written as one netCDF file and read by
:func:`ocean.data.open_store`, compared with the store the study mapped from the files and trained on.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

sys.path.insert(0, str(Path(__file__).parent))  # the fixtures beside this file (pytest runs --import-mode=importlib)
import distributed_layouts as dl  # noqa: E402
import product_fixtures as pf  # noqa: E402

from ocean import data  # noqa: E402
from scimech.cli.commands import main  # noqa: E402


@pytest.mark.slow  # a whole study (the quick size needs 75 months: seven years of a small grid)
def test_the_study_reads_esgf_time_chunks_given_as_a_glob_as_the_same_product_in_one_file(tmp_path):
    product = pf.cmip6(pf.truth(years=7, ny=4, nx=5), calendar="noleap")
    files = dl.write_cmip6_drs(product, tmp_path / "esgf", chunk=36)  # 8 variables x 3 chunks (36, 36, 12 months)
    assert len(files) == 24
    out = tmp_path / "study"
    argv = ["ocean", "study", "--data", str(tmp_path / "esgf" / "*_Omon_*.nc"), "--quick", "--out", str(out)]
    assert main([*argv, "--seeds", "0", "--regimes", "mixed", "--epochs", "1"]) == 0

    report = (out / "report.md").read_text()
    sections = [line for line in report.splitlines() if line.startswith("## ")]
    assert sections[:2] == ["## Is the model competent?", "## What was read"]  # the files right after competence
    read = report.split("## What was read", 1)[1].split("\n## ", 1)[0]
    assert "found: 24 file(s), 8 group(s) of variables" in read
    for f in files:  # every file, under its variable's group
        assert f.name in read, f.name
    assert "time chunks: checked: no overlap, no duplicate step, no gap between files" in read

    (tmp_path / "one").mkdir()
    one = pf.write_netcdf(product, tmp_path / "one" / "cmip6.nc")
    want = data.open_store(one)
    got = xr.open_zarr(out / "ocean.zarr", consolidated=False)
    assert set(got.data_vars) == set(want.data_vars)
    for v in want.data_vars:  # the same bytes read through two paths: equal, NaN (land) where NaN
        np.testing.assert_array_equal(got[v].values, want[v].values, err_msg=v)
    np.testing.assert_array_equal(got["time"].values, want["time"].values)
