"""suite2p's plane folders read as one recording.

Source of the layout: suite2p's documentation (github.com/MouseLand/suite2p ``docs/outputs.rst``:
``F.npy``, ``Fneu.npy`` ROIs x timepoints, ``iscell.npy`` whose first column is 0/1; ``docs/settings.rst``:
``fs`` "sampling rate per plane", ``nplanes`` "each tiff has this many planes in sequence") and
``suite2p/io/tiff.py`` (frame ``k * nplanes + j`` of the movie goes to plane ``j``: plane ``j`` is
acquired ``j / (nplanes * fs)`` s after plane 0). The expected traces are built here by hand from the
arrays written (``F - 0.7 * Fneu`` of the cells, suite2p's neuropil correction with its default
``neucoeff``).
"""

from __future__ import annotations

import numpy as np
import pytest

from neuro.data import from_traces, inspect_traces
from neuro.data.reading import read_recording

from . import many_files_fixtures as mf

DT = 1 / mf.FS


def _expected() -> tuple[np.ndarray, list[str], np.ndarray]:
    """Traces (frames, cells), names and acquisition offsets, by hand from the fixture's arrays."""
    T = min(mf.FRAMES)
    cols, names, offsets = [], [], []
    for j in range(mf.NPLANES):
        F, Fneu = mf.plane_arrays(j, mf.FRAMES[j])
        for i in range(mf.ROIS):
            if mf.ISCELL[j][i]:
                cols.append(F[i, :T].astype(np.float64) - 0.7 * Fneu[i, :T])
                names.append(f"plane{j}/roi{i}")
                offsets.append(j * DT / mf.NPLANES)  # plane j: j / (nplanes * fs) s into the volume
    return np.stack(cols, 1), names, np.array(offsets)


def _labels(T: int) -> np.ndarray:
    return np.repeat(["dark", "gain"], [T // 2, T - T // 2])


@pytest.mark.parametrize("how", ["list", "glob", "run folder", "experiment folder"])
def test_planes_are_one_recording(tmp_path, how):
    run = mf.write_run(tmp_path)
    source = {
        "list": [run / f"plane{j}" for j in range(mf.NPLANES)],
        "glob": str(run / "plane*"),
        "run folder": run,
        "experiment folder": tmp_path,
    }[how]
    want, names, offsets = _expected()
    ds, reading = read_recording(source, conditions=_labels(len(want)))
    assert ds.sizes == {"time": 100, "neuron": 11}  # 3 + 4 + 4 cells; the last volume is cut (plane 2: 100 frames)
    assert list(ds["neuron"].values) == names  # non-cells (iscell column 0 = 0) are not neurons
    np.testing.assert_allclose(ds["activity"].values, want, rtol=1e-6)
    np.testing.assert_allclose(ds["acquisition_offset"].values, offsets, rtol=1e-12)
    assert ds.attrs["dt"] == pytest.approx(DT, rel=1e-12)
    text = reading.text()
    for j in range(mf.NPLANES):
        assert f"plane{j}" in text
    assert "3 plane folders joined along the neurons" in text and "non-cells dropped" in text


def test_from_traces_on_plane_folders_builds_a_task(tmp_path):
    run = mf.write_run(tmp_path)
    planes = [run / "plane0", run / "plane1", run / "plane2"]
    (run / "conditions.csv").write_text("condition,start,stop\ndark,0,50\ngain,50,100\n")
    task = from_traces(planes, context=2, horizon=2, max_windows=None)  # the conditions file inside suite2p/
    assert task.n_neurons == 11 and task.dt == pytest.approx(DT)
    want, _, _ = _expected()
    # z-scored with the training steps: the first 70 % of each condition (35 of 50 steps), by hand
    rows = np.r_[0:35, 50:85]
    np.testing.assert_allclose(task.meta["mean"], want[rows].mean(0), rtol=1e-5)


def test_sessions_of_one_run_are_conditions_and_segments(tmp_path):
    run = mf.write_run(
        tmp_path, ops_extra={"frames_per_folder": np.array([60, 41]), "data_path": ["/data/day1", "/data/day2"]}
    )
    ds, reading = read_recording(run)
    cond = ds["condition"].values
    assert (cond[:60] == "day1").all() and (cond[60:] == "day2").all()  # frames_per_folder: 60 then 40 (cut)
    assert (ds["trial"].values[:60] == 0).all() and (ds["trial"].values[60:] == 1).all()
    task = from_traces(run, context=2, horizon=2, max_windows=None)
    for w in (task.val, task.test):  # no window crosses the session boundary at step 60
        lo, hi = w.origin, w.origin + 2 + 2
        assert not ((lo < 60) & (hi > 60)).any()
    assert "2 input folders in one run" in reading.text()


def test_separate_runs_are_refused_naming_the_fix(tmp_path):
    a = mf.write_run(tmp_path / "day1")
    b = mf.write_run(tmp_path / "day2", seed=5)
    with pytest.raises(Exception, match=r"Run suite2p once over all sessions \(db\['data_path'\]"):
        read_recording([a / "plane0", b / "plane0"], conditions=np.repeat("x", 101))


def test_missing_iscell_and_mixed_rates_are_refused(tmp_path):
    run = mf.write_run(tmp_path / "a")
    (run / "plane1" / "iscell.npy").unlink()
    with pytest.raises(Exception, match="lacks \\['iscell.npy'\\].*which ROIs are cells"):
        read_recording(run)
    run = mf.write_run(tmp_path / "b")
    ops = np.load(run / "plane2" / "ops.npy", allow_pickle=True).item()
    np.save(run / "plane2" / "ops.npy", np.array({**ops, "fs": 3.0}, dtype=object), allow_pickle=True)
    with pytest.raises(Exception, match="different recordings.*plane2 fs 3 Hz"):
        read_recording(run)


def test_inspect_lists_the_files(tmp_path):
    run = mf.write_run(tmp_path)
    reading = inspect_traces(run, conditions=_labels(100))
    files = reading.sections["files"]
    assert [k for k in files if k.startswith("plane")] == ["plane0", "plane1", "plane2"]
    assert "F.npy, Fneu.npy, iscell.npy, ops.npy" in files["plane0"]
    assert "plane j acquired j / (nplanes x fs)" in reading.sections["time"]["suite2p timing"]


def test_cli_inspect_and_data_option_take_a_suite2p_folder(tmp_path, capsys):
    from neuro.study import NeuroStudy
    from scimech.cli.commands import main

    run = mf.write_run(tmp_path)
    (run / "conditions.csv").write_text("condition,start,stop\ndark,0,50\ngain,50,100\n")
    assert main(["neuro", "inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "plane0" in out and "plane2" in out and "3 plane folders joined along the neurons" in out
    args = NeuroStudy().study_parser().parse_args(["--data", str(run), "--out", str(tmp_path / "out")])
    assert args.data == run  # the study's --data accepts the folder (a suite2p output)


def test_task_carries_each_neuron_s_acquisition_offset(tmp_path):
    run = mf.write_run(tmp_path)
    task = from_traces(run, conditions=_labels(100), context=2, horizon=2, max_windows=None)
    _, names, offsets = _expected()
    assert list(task.meta["name"]) == names
    np.testing.assert_allclose(task.meta["acquisition_offset"], offsets, rtol=1e-12)
    sub = task.neuron_subset(5, seed=0)
    np.testing.assert_allclose(sub.meta["acquisition_offset"], offsets[sub.meta["neuron_index"]], rtol=1e-12)


def test_cli_takes_several_plane_folders_and_a_glob(tmp_path, capsys):
    from neuro.study import NeuroStudy
    from scimech.cli.commands import main

    run = mf.write_run(tmp_path)
    (run / "conditions.csv").write_text("condition,start,stop\ndark,0,50\ngain,50,100\n")
    assert main(["neuro", "inspect", str(run / "plane0"), str(run / "plane2")]) == 0
    out = capsys.readouterr().out
    assert "2 plane folders joined along the neurons" in out and "plane1" not in out.split("how combined")[0]
    assert main(["neuro", "inspect", str(run / "plane*")]) == 0
    assert "3 plane folders joined along the neurons" in capsys.readouterr().out
    parser = NeuroStudy().study_parser()
    args = parser.parse_args(["--data", str(run / "plane0"), str(run / "plane1"), "--out", str(tmp_path / "o")])
    assert args.data == [run / "plane0", run / "plane1"]
    assert parser.parse_args(["--data", str(run / "plane*"), "--out", str(tmp_path / "o")]).data == str(run / "plane*")
    with pytest.raises(SystemExit):
        parser.parse_args(["--data", str(run / "nothing*"), "--out", str(tmp_path / "o")])
    assert "no file or folder matches" in capsys.readouterr().err


@pytest.mark.slow
def test_study_runs_end_to_end_on_a_suite2p_folder(tmp_path):
    """`scimech neuro study --data <suite2p folder>`: the report says what was read, the plane files first."""
    from scimech.cli.commands import main

    run = mf.write_run(tmp_path, frames=(401, 401, 400))
    (run / "conditions.csv").write_text("condition,start,stop\ndark,0,200\ngain,200,400\n")
    out = tmp_path / "study"
    argv = ["neuro", "study", "--data", str(run), "--out", str(out), "--context", "4", "--horizon", "8"]
    assert main([*argv, "--nodes", "2", "--long-context", "0", "--search-seconds", "60"]) == 0
    read = (out / "report.md").read_text().split("## What was read", 1)[1]
    assert "suite2p output, 3 of 3 planes" in read and read.index("plane0:") < read.index("how combined")
    assert "acquired 333.3 ms after plane 0 in each volume" in read  # plane 2: 2 / (3 x 2 Hz)
