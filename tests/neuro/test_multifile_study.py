"""``scimech neuro study`` on suite2p's output as suite2p writes it: two plane folders given on the command line.

Layout (tests/neuro/many_files_fixtures.py cites suite2p's ``docs/outputs.rst`` and ``docs/settings.rst``): one
folder per imaging plane with ``F.npy``, ``Fneu.npy``, ``iscell.npy``, ``stat.npy`` and ``ops.npy``. The
independent truth is the one-file path: the traces of the cells by suite2p's own neuropil correction
(``F - neucoeff * Fneu``, float32, ``neucoeff`` 0.7), written by hand as one netCDF file (activity (time, neuron),
time in s) and made into a task by :func:`neuro.data.from_traces` with the study's settings; the study saves the
task it searched (``units/store/task-*.json``), which must hold the same arrays.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from neuro.data import from_traces
from neuro.data.taskstore import load_task
from neuro.run import task_fingerprint
from scimech.cli.commands import main
from scimech.run.fingerprint import read_fingerprint

from . import many_files_fixtures as mf

FRAMES = 400  # every plane whole: 400 frames at 2 Hz
SETTINGS = {"context": 4, "horizon": 8, "max_windows": 40, "seed": 0}


def _one_file(path, planes: tuple[int, ...]):
    """The cells of ``planes`` as one netCDF file of traces, by suite2p's neuropil correction."""
    cols, names = [], []
    for j in planes:
        F, Fneu = mf.plane_arrays(j, FRAMES)
        for i in np.flatnonzero(mf.ISCELL[j]):
            cols.append(F[i] - np.float32(0.7) * Fneu[i])
            names.append(f"plane{j}/roi{i}")
    time = xr.DataArray(np.arange(FRAMES) / mf.FS, dims="time", attrs={"units": "s"})
    ds = xr.Dataset({"activity": (("time", "neuron"), np.stack(cols, 1))}, coords={"time": time, "neuron": names})
    ds.to_netcdf(path)
    return path


@pytest.mark.slow  # a whole study (baselines and a two-node program search)
def test_the_study_reads_two_plane_folders_as_the_same_traces_in_one_file(tmp_path):
    run = mf.write_run(tmp_path, frames=(FRAMES,) * mf.NPLANES)
    conditions = tmp_path / "conditions.csv"
    conditions.write_text("condition,start,stop\ndark,0,200\ngain,200,400\n")
    planes = [run / "plane0", run / "plane2"]  # two of the three planes
    out = tmp_path / "study"
    argv = ["neuro", "study", "--data", *map(str, planes), "--conditions", str(conditions), "--out", str(out)]
    sizes = ["--context", "4", "--horizon", "8", "--max-windows", "40", "--seed", "0"]
    assert main([*argv, *sizes, "--nodes", "2", "--long-context", "0", "--search-seconds", "30"]) == 0

    report = (out / "report.md").read_text()
    sections = [line for line in report.splitlines() if line.startswith("## ")]
    assert sections[:2] == ["## Is the model competent?", "## What was read"]  # the files right after competence
    read = report.split("## What was read", 1)[1].split("\n## ", 1)[0]
    assert "suite2p output, 2 of 3 planes" in read
    for p in planes:  # every plane folder and the files read in it
        assert f"- {p.name}: {p}: F.npy, Fneu.npy, iscell.npy, ops.npy" in read
    assert "plane1" not in read
    assert "2 plane folders joined along the neurons" in read

    one = from_traces(_one_file(tmp_path / "traces.nc", (0, 2)), conditions=conditions, **SETTINGS)
    (manifest,) = out.rglob("task-*.json")
    got = load_task(manifest)
    want_arrays, got_arrays = one.data_arrays("full"), got.data_arrays("full")
    assert sorted(got_arrays) == sorted(want_arrays)
    for k, v in want_arrays.items():  # the same float32 traces through two readers: the same arrays
        np.testing.assert_array_equal(np.asarray(got_arrays[k]), np.asarray(v), err_msg=k)
    assert list(got.meta["name"]) == list(one.meta["name"])
    assert read_fingerprint(out, "task_fingerprint.txt") == task_fingerprint([one])  # what the units are keyed by
