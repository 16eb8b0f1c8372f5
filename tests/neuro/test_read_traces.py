"""Recordings as they come (issue 36): ZAPBench-like products (tests/neuro/product_fixtures.py)
read right, each against an independent truth (a sampling interval computed by hand or by
pandas, labels expanded by hand from ZAPBench's offsets, numpy statistics of the kept
neurons), or refused in one line that names the fix."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import neuro.data as nd
from neuro.data import from_traces
from scimech.errors import (
    ConfigError,
    DataValidationError,
    DimensionError,
    MissingVariableError,
    UnitsError,
)
from scimech.studies.reading import Reading

from . import product_fixtures as pf

DT = pf.STEP_MS / 1000.0  # 914 ms, by hand
SMALL = dict(context=2, horizon=2, max_windows=20)  # windows that fit the 5-step val split of a 50-step block


def read_recording(*args, **kwargs):
    """:func:`neuro.data.reading.read_recording`, imported when called (so that each test fails on its own
    where the reader is missing, rather than the whole file at import)."""
    from neuro.data.reading import read_recording as read

    return read(*args, **kwargs)


def _reading(task) -> Reading:
    return Reading.from_dict(json.loads(task.meta["reading"]))


# ----------------------------------------------------------------------------- time in any unit
def _cf_ms():
    t = pd.Timestamp("2024-09-30") + pd.to_timedelta(np.arange(pf.T) * pf.STEP_MS, unit="ms")
    return t.values, {}, {"time": {"units": "milliseconds since 2024-09-30", "dtype": "int64"}}


def _cf_s_noleap():
    # a CF 'seconds since' on a noleap calendar: xarray decodes it through cftime
    return np.arange(pf.T) * DT, {"units": "seconds since 2001-01-01", "calendar": "noleap"}, {}


def _jittered_s():
    # timestamps of an acquisition clock: 914 ms steps jittering by +-2 ms (0.2 %, within the reader's 1 %)
    rng = np.random.default_rng(3)
    return np.arange(pf.T) * DT + rng.uniform(-0.002, 0.002, pf.T), {"units": "s"}, {}


TIMES = {
    "ms": (lambda: (np.arange(pf.T) * pf.STEP_MS, {"units": "ms"}, {}), DT),
    "milliseconds": (lambda: (np.arange(pf.T) * pf.STEP_MS, {"units": "milliseconds"}, {}), DT),
    "min": (lambda: (np.arange(pf.T) * pf.STEP_MS / 60000.0, {"units": "min"}, {}), DT),  # 914 ms = 0.015233 min
    "cf_ms_since": (_cf_ms, DT),
    "cf_s_since_noleap": (_cf_s_noleap, DT),
    "s_jittered": (_jittered_s, None),  # truth: pandas' median step
}


@pytest.mark.parametrize("case", list(TIMES))
def test_time_in_any_unit_gives_the_sampling_interval_in_seconds(case, tmp_path):
    make, want = TIMES[case]
    values, attrs, encoding = make()
    path = pf.group(tmp_path / f"{case}.zarr", pf.dataset(values, attrs), encoding)
    if want is None:
        want = pd.Series(values).diff().median()
    task = from_traces(path, **SMALL)
    # before: the raw numbers' step (914 for ms, 9.1e8 for CF datetimes read as ns, 0.0152 for min)
    assert task.dt == pytest.approx(want, rel=1e-9)
    row = _reading(task).row("time")
    assert row.units_used == "s" and row.found_by == "coordinate" and row.units_found
    assert f"{want:.6g} s" in _reading(task).sections["time"]["dt used"]


def test_a_duration_coordinate_written_by_xarray_is_decoded(tmp_path):
    t = pd.to_timedelta(np.arange(pf.T) * pf.STEP_MS, unit="ms")
    path = pf.group(tmp_path / "td.zarr", pf.dataset(t.values))
    ds, reading = read_recording(path)
    assert ds.attrs["dt"] == pytest.approx(pd.Timedelta(milliseconds=pf.STEP_MS).total_seconds(), rel=1e-12)
    assert "timedelta64" in reading.row("time").conversion


def test_a_time_axis_without_units_needs_dt(tmp_path):
    path = pf.group(tmp_path / "bare_time.zarr", pf.dataset(np.arange(pf.T) * pf.STEP_MS))  # ms, but unsaid
    with pytest.raises(ConfigError, match=r"no units attribute.*give dt="):
        from_traces(path, **SMALL)
    assert from_traces(path, dt=DT, **SMALL).dt == DT
    ms = pf.group(tmp_path / "ms.zarr", pf.dataset(np.arange(pf.T) * pf.STEP_MS, {"units": "ms"}))
    with pytest.raises(ConfigError, match=r"dt=0.5 s but the time coordinate \(ms\) steps every 0.914 s"):
        from_traces(ms, dt=0.5, **SMALL)


def test_units_that_are_not_a_time_are_refused(tmp_path):
    for units, words in (
        ("m", "are not a time"),
        ("furlongs per fortnight", "are not a time"),
        ("parsecs_of_doom", "not units pint reads"),
    ):
        ds = pf.dataset(np.arange(pf.T) * 1.0, {"units": units})
        with pytest.raises(UnitsError, match=words):
            from_traces(ds, **SMALL)


def test_irregular_or_backward_time_is_refused(tmp_path):
    t = np.arange(pf.T) * DT
    t[100:] += DT  # one lost volume: a step of 1.828 s at step 100
    path = pf.group(tmp_path / "gap.zarr", pf.dataset(t, {"units": "s"}))
    with pytest.raises(DataValidationError, match=r"irregular: steps from 0.914 to 1.828 s .*at step 100.*regular"):
        from_traces(path, **SMALL)
    back = np.arange(pf.T) * DT
    back[[10, 11]] = back[[11, 10]]
    with pytest.raises(DataValidationError, match="does not increase at step 11"):
        read_recording(pf.dataset(back, {"units": "s"}))


# ----------------------------------------------------------------------------- ZAPBench's bare array
def test_zapbench_bare_array_with_its_conditions_beside(tmp_path):
    X = pf.traces(seed=1)
    path = pf.bare_array(tmp_path / "traces", X)  # ZAPBench names it 'traces', no suffix
    pf.zapbench_conditions_json(tmp_path / "traces.conditions.json")
    with pytest.raises(ConfigError, match="no time coordinate.*give dt="):
        read_recording(path)
    ds, reading = read_recording(path, dt=DT)
    np.testing.assert_array_equal(ds["activity"].values, X)
    np.testing.assert_array_equal(ds["condition"].values, pf.labels())
    assert ds.attrs["dt"] == DT
    assert reading.product.startswith("bare zarr v3 array (240, 30)")
    assert "beside the store" in reading.sections["conditions"]["where from"]
    task = from_traces(path, dt=DT, held_out=["taxis"], **SMALL)
    assert list(task.ood) == ["held_out_condition"] and task.n_neurons == pf.N


@pytest.mark.parametrize("names, transpose", [(("t", "f"), False), (("f", "t"), True), (None, False)])
def test_a_bare_arrays_axes_are_read_from_its_dimension_names(names, transpose, tmp_path):
    X = pf.traces(seed=2)
    path = pf.bare_array(tmp_path / "a.zarr", X.T.copy() if transpose else X, dimension_names=names)
    ds, reading = read_recording(path, conditions=pf.labels(), dt=DT)
    np.testing.assert_array_equal(ds["activity"].values, X)  # (time, neuron) whatever the order stored
    assert ("ZAPBench's order" if names is None else "dimension_names") in reading.sections["traces"]["dims"]


def test_a_bare_array_with_unknown_axes_is_refused(tmp_path):
    path = pf.bare_array(tmp_path / "xy.zarr", dimension_names=("x", "y"))
    with pytest.raises(DimensionError, match=r"names its axes \('x', 'y'\); expected a time axis"):
        read_recording(path, conditions=pf.labels(), dt=DT)


# ----------------------------------------------------------------------------- conditions
def test_conditions_from_a_file_given_as_an_option(tmp_path):
    path = pf.bare_array(tmp_path / "traces.zarr")
    ranges = pf.conditions_csv(tmp_path / "protocol.csv")
    ds, reading = read_recording(path, conditions=ranges, dt=DT)
    np.testing.assert_array_equal(ds["condition"].values, pf.labels())
    assert reading.sections["conditions"]["where from"] == str(ranges)
    per_step = tmp_path / "labels.csv"
    pd.DataFrame({"condition": pf.labels()}).to_csv(per_step, index=False)
    np.testing.assert_array_equal(read_recording(path, conditions=per_step, dt=DT)[0]["condition"].values, pf.labels())
    gap = tmp_path / "gap.csv"
    gap.write_text("condition,start,stop\ngain,0,70\ndots,80,240\n")
    with pytest.raises(DataValidationError, match=r"steps 70, 71, .*\(10 in all\) have no condition"):
        read_recording(path, conditions=gap, dt=DT)


def test_zapbench_offsets_by_name(tmp_path):
    # ZAPBench's CONDITION_OFFSETS and CONDITION_NAMES, copied by hand from zapbench/constants.py
    offsets = [0, 649, 2422, 3078, 3735, 5047, 5638, 6623, 7279, 7879]
    names = ["gain", "dots", "flash", "taxis", "turning", "position", "open loop", "rotation", "dark"]
    X = np.random.default_rng(0).normal(size=(7879, 2)).astype(np.float32)
    ds, reading = read_recording(X, conditions="zapbench", dt=DT)
    np.testing.assert_array_equal(ds["condition"].values, np.repeat(names, np.diff(offsets)))
    with pytest.raises(DataValidationError, match="cover 7879 steps; these traces have 240"):
        read_recording(pf.traces(), conditions="zapbench", dt=DT)


def test_condition_files_beside_the_store(tmp_path):
    path = pf.bare_array(tmp_path / "traces.zarr")
    with pytest.raises(MissingVariableError, match=r"--conditions FILE.*conditions.csv beside"):
        read_recording(path, dt=DT)
    pf.conditions_csv(tmp_path / "conditions.csv")
    assert read_recording(path, dt=DT)[1].sections["conditions"]["where from"].endswith("(beside the store)")
    pf.zapbench_conditions_json(tmp_path / "traces.conditions.json")
    with pytest.raises(ConfigError, match="Several condition files beside traces.zarr"):
        read_recording(path, dt=DT)


# ----------------------------------------------------------------------------- neurons dropped
def test_nan_and_constant_neurons_are_dropped_and_named(tmp_path):
    X = pf.traces(seed=4)
    X[17, 2] = np.nan
    X[:, 7] = np.nan  # a neuron the segmentation lost
    X[:, 5] = 0.25  # a constant (dead) ROI
    path = pf.group(tmp_path / "nan.zarr", pf.dataset(np.arange(pf.T) * DT, {"units": "s"}, X=X))
    with pytest.warns(UserWarning, match="3 of 30 neurons dropped"):
        task = from_traces(path, **SMALL)
    rows = _reading(task).sections["rows"]
    assert rows["neurons dropped (NaN/inf)"] == "2: n002, n007"
    assert rows["neurons dropped (constant)"] == "1: n005"
    assert rows["neurons kept"] == "27 of 30"
    keep = [k for k in range(pf.N) if k not in (2, 5, 7)]
    assert list(task.meta["name"]) == [f"n{k:03d}" for k in keep]
    # the z-scoring statistics: numpy on the kept neurons' training steps (first 70 % of each block, by hand)
    train = np.r_[0:49, 70:119, 140:175, 190:225]
    np.testing.assert_allclose(task.meta["mean"], X[train][:, keep].astype(np.float64).mean(0), rtol=1e-6)


# ----------------------------------------------------------------------------- formats
@pytest.mark.parametrize("fmt", ["zarr2", "zarr3", "netcdf"])
def test_group_stores_and_netcdf_say_what_they_are(fmt, tmp_path):
    ds = pf.dataset(np.arange(pf.T) * pf.STEP_MS, {"units": "ms"})
    if fmt == "netcdf":
        path = tmp_path / "rec.nc"
        ds.to_netcdf(path)
    else:
        path = pf.group(tmp_path / "rec.zarr", ds, zarr_format=int(fmt[-1]))
    reading = nd.inspect_traces(path, held_out=["taxis"])
    assert reading.product.startswith(
        {"zarr2": "zarr v2 group", "zarr3": "zarr v3 group", "netcdf": "netCDF file"}[fmt]
    )
    xr.testing.assert_equal(
        read_recording(path)[0]["activity"].load().drop_vars("neuron"), ds["activity"].drop_vars("neuron")
    )
    steps = reading.sections["splits"]["steps"]
    assert "held_out_condition 50" in steps and "train 133" in steps  # 70 % of 70, 70 and 50 (taxis held out), by hand
