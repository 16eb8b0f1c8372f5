"""The neuro reader tried on recordings laid out as imaging pipelines and labs write them (an
independent trial of `neuro.data.reading`): suite2p's ``F`` (neurons, frames) with its frame rate ``fs``,
CaImAn's ``C`` (components, frames) and its HDF5 ``/estimates`` group, a (trial, time, neuron)
array, float32 timestamps late in a session, dropped or NaN-stamped frames, a time axis in ms
labelled 's', conditions as seconds, BIDS ``events.tsv``, blank labels, an empty file. Each answer
is checked against a hand computation (numpy transposes and repeats, 1 / rate, counts by hand).

Layouts: suite2p ``F.npy`` is (ROIs, frames) and ``ops['fs']`` the frame rate per plane in Hz
(suite2p docs, "Outputs"); CaImAn's ``estimates.C`` is (components, frames), saved to HDF5 under
``/estimates`` (CaImAn docs, "Estimates"); BIDS events are ``onset`` and ``duration`` in seconds
with ``trial_type`` (BIDS specification, "Task events").
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import xarray as xr

from scimech.cli.commands import main
from scimech.errors import ConfigError, DataValidationError, DimensionError, MissingVariableError

T, N = 300, 12
COND = np.repeat(["dark", "flash", "dots"], [100, 120, 80])  # 3 conditions, steps by hand


def _traces(seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((T, N)).cumsum(0) * 0.1).astype(np.float32)


def _read(*args, **kwargs):
    from neuro.data.reading import read_recording

    return read_recording(*args, **kwargs)


def _netcdf(path, ds):
    ds.to_netcdf(path)
    return path


def _neutral(time, attrs, X=None, cond=COND):
    X = _traces() if X is None else X
    return xr.Dataset(
        {"activity": (("time", "neuron"), X), "condition": ("time", cond)}, coords={"time": ("time", time, attrs)}
    )


# ----------------------------------------------------------------------------- pipelines' axes
def test_suite2p_F_neurons_by_frames_is_read_and_its_fs_named_when_dt_is_missing(tmp_path):
    X = _traces()
    ds = xr.Dataset(
        {
            "F": (("neurons", "frames"), X.T * 100 + 500),
            "iscell": ("neurons", np.ones(N)),
            "condition": ("frames", COND),
        },
        attrs={"fs": 30.0},
    )
    path = _netcdf(tmp_path / "suite2p.nc", ds)
    # before: "No 'activity' variable ...; name your traces 'activity'" (renaming alone did not fix it)
    with pytest.raises(ConfigError, match=r"attribute fs = 30 looks like a rate in Hz.*dt=0\.0333333"):
        _read(path)
    out, reading = _read(path, dt=1 / 30)
    np.testing.assert_allclose(out["activity"].values, X * 100 + 500)  # (frames, neurons): F transposed
    assert out.attrs["dt"] == 1 / 30
    assert reading.sections["traces"]["axes renamed"].startswith("neurons -> neuron, frames -> time")


def test_caiman_C_components_by_frames_with_a_frame_coordinate_in_seconds(tmp_path):
    X = _traces()
    ds = xr.Dataset(
        {"C": (("component", "frame"), X.T), "condition": ("frame", COND)},
        coords={"frame": ("frame", np.arange(T) / 15.0, {"units": "s"})},
    )
    out, reading = _read(_netcdf(tmp_path / "caiman.nc", ds))
    np.testing.assert_array_equal(out["activity"].values, X)
    assert out.attrs["dt"] == pytest.approx(1 / 15, rel=1e-12)  # 15 Hz, by hand
    assert reading.sections["traces"]["neurons"] == str(N)


def test_a_zarr_group_with_a_cell_axis_and_datetimes(tmp_path):
    X = _traces()
    ds = xr.Dataset(
        {"activity": (("time", "cell"), X), "condition": ("time", COND)},
        coords={"time": np.datetime64("2024-09-30") + np.arange(T) * np.timedelta64(914, "ms")},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(tmp_path / "cells.zarr", zarr_format=3, consolidated=False)
    out, _ = _read(tmp_path / "cells.zarr")  # before: "'activity' has dims ('time', 'cell') ... transpose"
    np.testing.assert_array_equal(out["activity"].values, X)
    assert out.attrs["dt"] == pytest.approx(0.914, rel=1e-12)


def test_hdf5_with_the_traces_in_a_group_names_the_group(tmp_path):
    import h5py

    with h5py.File(tmp_path / "caiman.hdf5", "w") as f:
        f.create_dataset("estimates/C", data=_traces().T)
    with pytest.raises(MissingVariableError, match=r"its groups: /estimates: C.*group='estimates'"):
        _read(tmp_path / "caiman.hdf5", dt=1 / 15)


# ----------------------------------------------------------------------------- trials
def test_trials_by_time_by_neuron_are_read_one_after_another(tmp_path):
    X = _traces()[:100]
    R = np.stack([X, X + 1, X + 2])  # 3 trials of 100 steps
    ds = xr.Dataset(
        {"activity": (("trial", "time", "neuron"), R), "condition": ("trial", ["dark", "flash", "dots"])},
        coords={"time": ("time", np.arange(100) * 0.1, {"units": "s"})},
    )
    path = _netcdf(tmp_path / "trials.nc", ds)
    out, reading = _read(path)  # before: "'activity' has dims ('trial', 'time', 'neuron') ... transpose"
    np.testing.assert_array_equal(out["activity"].values, np.concatenate([X, X + 1, X + 2]))
    np.testing.assert_array_equal(out["trial"].values, np.repeat([0, 1, 2], 100))
    np.testing.assert_array_equal(out["condition"].values, np.repeat(["dark", "flash", "dots"], 100))
    assert out.attrs["dt"] == pytest.approx(0.1, rel=1e-12)
    assert reading.sections["traces"]["time steps"] == "300"
    from neuro.data import from_traces

    task = from_traces(path, context=2, horizon=2, max_windows=None)
    # 0.7 / 0.1 / 0.2 of each 100-step trial: 70 training steps per trial, windows never cross trials
    assert task.train_series.shape == (3, 70, N)
    np.testing.assert_array_equal(task.val.start, np.zeros(3 * 7, int) + np.tile(np.arange(7), 3))


# ----------------------------------------------------------------------------- time
def test_float32_seconds_late_in_a_session_are_regular_within_their_rounding(tmp_path):
    t = (5000.0 + np.arange(T) / 30.0).astype(np.float32)  # stored to 2**-11 s = 0.49 ms, 1.5 % of a step
    path = _netcdf(tmp_path / "late.nc", _neutral(t, {"units": "s"}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no plausibility warning at 30 Hz
        out, reading = _read(path)  # before: refused as "irregular"
    assert out.attrs["dt"] == pytest.approx(1 / 30, rel=1e-4)  # the true frame period; the median is 0.4 % off
    assert any("float32" in n for n in reading.notes)
    lost = np.delete(5000.0 + np.arange(T + 1) / 30.0, 150).astype(np.float32)  # one frame really lost
    with pytest.raises(DataValidationError, match="irregular.*2 steps: 1 samples lost"):
        _read(_netcdf(tmp_path / "lost.nc", _neutral(lost, {"units": "s"})))


def test_dropped_frames_and_nan_timestamps_are_refused_naming_the_step(tmp_path):
    t = np.delete(np.arange(T + 3) / 30.0, [150, 151, 152])
    with pytest.raises(DataValidationError, match=r"at step 150, 4 steps: 3 samples lost\?"):
        _read(_netcdf(tmp_path / "gap.nc", _neutral(t, {"units": "s"})))
    t = np.arange(T) * 0.5
    t[40] = np.nan
    # before: "The sampling interval must be a positive number of seconds; got nan"
    with pytest.raises(DataValidationError, match=r"no value \(NaN / NaT\) at steps 40 "):
        _read(_netcdf(tmp_path / "nan_time.nc", _neutral(t, {"units": "s"})))


def test_a_time_axis_in_ms_labelled_seconds_is_said_to_be_implausible(tmp_path):
    path = _netcdf(tmp_path / "s_but_ms.nc", _neutral(np.arange(T) * 1000 / 30.0, {"units": "s"}))
    with pytest.warns(UserWarning, match=r"0\.03 Hz\) is outside.*set units 'ms': dt would be 0\.0333333 s"):
        out, reading = _read(path)
    assert out.attrs["dt"] == pytest.approx(1000 / 30)  # read as labelled, and said
    assert any("outside the sampling of neuronal recordings" in n for n in reading.notes)
    path = _netcdf(tmp_path / "ms_but_s.nc", _neutral(np.arange(T) / 30.0, {"units": "ms"}))
    with pytest.warns(UserWarning, match=r"set units 's': dt would be 0\.0333333 s"):
        _read(path)


# ----------------------------------------------------------------------------- conditions
def test_condition_ranges_in_seconds_are_refused_and_bids_events_read(tmp_path):
    np.save(tmp_path / "traces.npy", _traces())
    sec = tmp_path / "ranges_s.csv"
    sec.write_text("condition,start,stop\ndark,0,50\nflash,50,110\ndots,110,150\n")  # seconds at 2 Hz
    with pytest.raises(DataValidationError, match=r"end at 150, the recording's duration in seconds"):
        _read(tmp_path / "traces.npy", conditions=sec, dt=0.5)
    half = tmp_path / "half.csv"
    half.write_text("condition,start,stop\ndark,0,99.5\nflash,99.5,300\n")
    with pytest.raises(DataValidationError, match="whole 0-based step numbers"):  # before: truncated to 99
        _read(tmp_path / "traces.npy", conditions=half, dt=0.5)
    events = tmp_path / "events.tsv"  # BIDS: onsets off the frame grid by 0.1 s, rounded to the nearest frame
    events.write_text("onset\tduration\ttrial_type\n0.0\t49.9\tdark\n49.9\t60.1\tflash\n110.0\t40.0\tdots\n")
    out, _ = _read(tmp_path / "traces.npy", conditions=events, dt=0.5)
    np.testing.assert_array_equal(out["condition"].values, COND)  # 49.9 / 0.5 = 99.8 -> 100; 110 / 0.5 = 220


def test_blank_condition_labels_are_refused(tmp_path):
    np.save(tmp_path / "traces.npy", _traces())
    rows = ["condition"] + [str(c) for c in COND]
    rows[6] = ""  # step 5 blank: before, silently the condition "nan"
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(DataValidationError, match=r"Steps 5 have no condition label"):
        _read(tmp_path / "traces.npy", conditions=tmp_path / "labels.csv", dt=0.5)


def test_a_conditions_file_of_another_name_is_named_in_the_refusal(tmp_path):
    ds = _neutral(np.arange(T) * 0.5, {"units": "s"}).drop_vars("condition")
    path = _netcdf(tmp_path / "rec.nc", ds)
    (tmp_path / "rec_stimulus.csv").write_text("condition\n" + "\n".join(COND) + "\n")
    with pytest.raises(MissingVariableError, match=r"Beside it, not read \(other names\): rec_stimulus\.csv\."):
        _read(path)
    out, _ = _read(path, conditions=tmp_path / "rec_stimulus.csv")
    assert dict(zip(*np.unique(out["condition"].values, return_counts=True))) == {"dark": 100, "dots": 80, "flash": 120}


def test_an_array_stored_neurons_by_frames_is_named_when_the_labels_disagree(tmp_path):
    np.save(tmp_path / "F.npy", _traces().T)  # suite2p's F.npy: (ROIs, frames)
    with pytest.raises(DimensionError, match=r"read as 12 steps x 300 neurons.*\(neuron, time\).*np\.load\(path\)\.T"):
        _read(tmp_path / "F.npy", conditions=COND, dt=1 / 30)


# ----------------------------------------------------------------------------- values
def test_int16_raw_fluorescence_is_z_scored_in_floating_point(tmp_path):
    Xi = (_traces() * 300 + 1000).astype(np.int16)
    path = _netcdf(tmp_path / "raw.nc", _neutral(np.arange(T) * 0.5, {"units": "s"}, X=Xi))
    from neuro.data import from_traces

    task = from_traces(path, context=4, horizon=8, max_windows=20)
    train = np.r_[0:70, 100:184, 220:276]  # 70 % of each condition run, by hand
    np.testing.assert_allclose(task.meta["mean"], Xi[train].astype(np.float64).mean(0), rtol=1e-12)


def test_an_empty_file_is_one_line_through_the_cli(tmp_path, capsys):
    for name in ("empty.nc", "empty.npy"):
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(DataValidationError, match=r"is empty \(0 bytes\)"):
            _read(tmp_path / name, dt=1.0)
        assert main(["neuro", "inspect", str(tmp_path / name), "--dt", "1"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "empty (0 bytes)" in err[0] and "Traceback" not in err[0]


def test_the_cli_says_back_a_suite2p_file(tmp_path, capsys):
    ds = xr.Dataset({"F": (("neurons", "frames"), _traces().T), "condition": ("frames", COND)}, attrs={"fs": 30.0})
    path = _netcdf(tmp_path / "suite2p.nc", ds)
    assert main(["neuro", "inspect", str(path), "--dt", str(1 / 30)]) == 0
    text = capsys.readouterr().out
    assert "axes renamed: neurons -> neuron, frames -> time" in text
    assert "dt used: 0.0333333 s (30 Hz)" in text  # 1 / 30 s, by hand
    assert "how many: 3: dark (100 steps), dots (80 steps), flash (120 steps)" in text


def test_a_condition_named_none_is_a_label_and_a_json_null_is_not(tmp_path):
    np.save(tmp_path / "traces.npy", _traces())
    labels = ["none"] * 100 + [str(c) for c in COND[100:]]  # "none": the no-stimulus condition
    (tmp_path / "labels.json").write_text(json.dumps(labels))
    out, _ = _read(tmp_path / "traces.npy", conditions=tmp_path / "labels.json", dt=0.5)
    assert dict(zip(*np.unique(out["condition"].values, return_counts=True))) == {"none": 100, "flash": 120, "dots": 80}
    labels[7] = None
    (tmp_path / "null.json").write_text(json.dumps(labels))
    with pytest.raises(DataValidationError, match=r"Steps 7 have no condition label"):  # before: condition "None"
        _read(tmp_path / "traces.npy", conditions=tmp_path / "null.json", dt=0.5)


def test_suite2p_planes_are_refused_with_a_fix_that_works(tmp_path):
    X = _traces()
    ds = xr.Dataset({"F": (("plane", "neurons", "frames"), np.stack([X.T, 2 * X.T])), "condition": ("frames", COND)})
    path = _netcdf(tmp_path / "planes.nc", ds)
    with pytest.raises(DimensionError, match=r"also \['plane'\], which is not a trial axis") as err:
        _read(path, dt=1 / 30)
    # the fix the message gives, run as written: the planes' neurons side by side
    fix = str(err.value).split("the neuron axis (")[1].rsplit("), then write", 1)[0]
    ds = xr.open_dataset(path)
    exec(fix, {"ds": ds}, scope := {"ds": ds})
    out, _ = _read(_netcdf(tmp_path / "joined.nc", scope["ds"]), dt=1 / 30)
    np.testing.assert_array_equal(out["activity"].values, np.concatenate([X, 2 * X], axis=1))


def test_a_t_coordinate_and_roi_axis_as_a_pipeline_writes_them(tmp_path):
    X = _traces()
    ds = xr.Dataset(
        {"dff": (("t", "roi"), X), "condition": ("t", COND)}, coords={"t": ("t", np.arange(T) * 0.25, {"units": "s"})}
    )
    out, reading = _read(_netcdf(tmp_path / "dff.nc", ds))
    np.testing.assert_array_equal(out["activity"].values, X)
    assert out.attrs["dt"] == 0.25  # 4 Hz, by hand
    assert reading.row("activity").variable == "dff"


def test_float32_cf_days_are_refused_as_too_coarse_not_as_unsorted(tmp_path):
    t = (19997.0 + np.arange(T) / 30.0 / 86400).astype(np.float32)  # float32 days since 1970: 2**-9 d = 169 s
    path = _netcdf(tmp_path / "days.nc", _neutral(t, {"units": "days since 1970-01-01"}))
    # before: "does not increase at step 1 ... sort it" (the decoded times repeat)
    with pytest.raises(DataValidationError, match=r"\(float32, days since 1970-01-01\) is stored to 169 s"):
        _read(path)


def test_a_timestamps_coordinate_is_read_and_said(tmp_path):
    ds = _neutral(np.arange(T) * 0.2, {"units": "s"}).rename({"time": "timestamps"}).rename_dims({"timestamps": "time"})
    out, reading = _read(_netcdf(tmp_path / "ts.nc", ds))  # before: "no time coordinate; give dt="
    assert out.attrs["dt"] == pytest.approx(0.2, rel=1e-12)
    assert reading.row("time").variable == "timestamps"


def test_a_label_file_with_a_header_line_is_named(tmp_path):
    np.save(tmp_path / "traces.npy", _traces())
    (tmp_path / "labels.txt").write_text("condition\n" + "\n".join(COND) + "\n")
    with pytest.raises(DimensionError, match=r"One label too many: a header line \('condition'\)\?"):
        _read(tmp_path / "traces.npy", conditions=tmp_path / "labels.txt", dt=0.5)


def test_a_dataarray_keeps_its_axis_names_and_time_coordinate():
    X = _traces()
    da = xr.DataArray(X.T, dims=("neuron", "time"), coords={"time": ("time", np.arange(T) * 33.3, {"units": "ms"})})
    out, _ = _read(da, conditions=COND)  # before: read as a bare (12 steps x 300 neurons) array, no time
    np.testing.assert_array_equal(out["activity"].values, X)
    assert out.attrs["dt"] == pytest.approx(0.0333, rel=1e-12)  # 33.3 ms, by hand
    with pytest.raises(ConfigError, match=r"dt=1 s but the time coordinate \(ms\) steps every 0.0333 s"):
        _read(da, conditions=COND, dt=1.0)  # before: dt=1 used, the coordinate silently ignored


def test_a_pandas_frame_of_traces_with_a_timedelta_index():
    import pandas as pd

    X = _traces()
    df = pd.DataFrame(X, index=pd.to_timedelta(np.arange(T) * 250, unit="ms"), columns=[f"roi{k}" for k in range(N)])
    out, _ = _read(df, conditions=COND)  # before: the index dropped, "no time coordinate; give dt="
    np.testing.assert_array_equal(out["activity"].values, X)
    assert out.attrs["dt"] == 0.25
    assert list(out["neuron"].values) == [f"roi{k}" for k in range(N)]
    with pytest.raises(ConfigError, match="give dt="):  # a RangeIndex says nothing of time
        _read(df.reset_index(drop=True), conditions=COND)


@pytest.mark.parametrize(
    ("suffix", "says"),
    [
        (".csv", "pass the DataFrame to from_traces"),
        (".npz", r"np\.load\(path\)\['F'\]\.T"),
        (".mat", "scipy.io.loadmat"),
        (".nwb", "RoiResponseSeries"),
    ],
)
def test_formats_not_read_are_refused_with_a_way_in(tmp_path, suffix, says):
    path = tmp_path / f"traces{suffix}"
    if suffix == ".npz":
        np.savez(path, F=_traces().T)
    else:
        path.write_text("1,2\n3,4\n")
    with pytest.raises(DataValidationError, match=says):  # before: xarray's "did not find a match in any of ..."
        _read(path, dt=1.0)
