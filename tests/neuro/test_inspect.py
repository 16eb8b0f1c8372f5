"""`scimech neuro inspect PATH`: what the study would read from a ZAPBench-like product, said back
as one table (text and JSON) without torch and in seconds; a product it cannot read is one line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from scimech.cli.commands import main
from scimech.studies.reading import Reading

from . import product_fixtures as pf

REPO = Path(__file__).resolve().parents[2]


def read_recording(*args, **kwargs):
    """:func:`neuro.data.reading.read_recording`, imported when called (so that each test fails on its own
    where the reader is missing, rather than the whole file at import)."""
    from neuro.data.reading import read_recording as read

    return read(*args, **kwargs)


def test_inspect_prints_the_reading_and_writes_it_as_json(tmp_path, capsys):
    path = pf.bare_array(tmp_path / "traces")
    ranges = pf.conditions_csv(tmp_path / "protocol.csv")
    out = tmp_path / "reading.json"
    assert (
        main(
            [
                "neuro",
                "inspect",
                str(path),
                "--conditions",
                str(ranges),
                "--dt",
                "0.914",
                "--held-out",
                "taxis",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert text.startswith("Read: bare zarr v3 array (240, 30)")
    assert "dt used: 0.914 s (1.094 Hz)" in text  # 1 / 0.914 s, by hand
    # steps per condition from ZAPBench-like offsets (0, 70, 140, 190, 240), by hand
    assert "how many: 4: dark (50 steps), dots (70 steps), gain (70 steps), taxis (50 steps)" in text
    reading = Reading.load(out)
    assert reading.row("condition").found_by == "option (file)"
    assert reading.sections["conditions"]["where from"] == str(ranges)
    assert reading.sections["splits"]["held out"] == "taxis"


def test_inspect_imports_no_torch_and_answers_in_seconds(tmp_path):
    # ZAPBench-like: a bare zarr v3 array (t, f), its conditions beside as ZAPBench gives them, 8 MB of traces
    X = np.random.default_rng(0).normal(size=(1000, 2000)).astype(np.float32)
    path = pf.bare_array(tmp_path / "traces", X, chunks=(250, 500))
    offsets = [0, 300, 550, 800, 1000]
    (tmp_path / "traces.conditions.json").write_text(
        json.dumps({"condition_offsets": offsets, "condition_names": list(pf.NAMES)})
    )
    code = (
        "import sys, json; from scimech.cli.commands import main; "
        f"rc = main(['neuro', 'inspect', {str(path)!r}, '--dt', '0.914', '--json', {str(tmp_path / 'r.json')!r}]); "
        "print(json.dumps({'rc': rc, 'torch': 'torch' in sys.modules}))"
    )
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    seconds = time.perf_counter() - t0
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"rc": 0, "torch": False}
    # the whole command, interpreter start included (about 4 s on 2 shared cores): the bound is 10 s
    assert seconds < 10, seconds
    assert Reading.load(tmp_path / "r.json").sections["traces"]["neurons"] == "2000"


def test_a_product_it_cannot_read_is_one_line(tmp_path, capsys):
    path = pf.group(tmp_path / "no_units.zarr", pf.dataset(np.arange(pf.T) * pf.STEP_MS))
    assert main(["neuro", "inspect", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ConfigError" in err[0] and "give dt= (--dt" in err[0]


def test_the_study_takes_a_bare_array_and_a_conditions_file(tmp_path, capsys):
    path = pf.bare_array(tmp_path / "traces")
    ranges = pf.conditions_csv(tmp_path / "protocol.csv")
    assert (
        main(
            [
                "neuro",
                "study",
                "--data",
                str(path),
                "--conditions",
                str(ranges),
                "--dt",
                "0.914",
                "--out",
                str(tmp_path / "run"),
                "--dry-run",
            ]
        )
        == 0
    )
    assert f"data: {path}" in capsys.readouterr().out
    # the plan's reader gives the same labels as the file's ranges expanded by hand
    ds, _ = read_recording(path, conditions=ranges, dt=0.914)
    np.testing.assert_array_equal(ds["condition"].values, pf.labels())
