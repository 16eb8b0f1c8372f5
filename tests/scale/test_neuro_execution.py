"""Neuro on Dask: a tree search gives the same tree whether a generation's
candidate evaluations run serially or as tasks on a 2-worker LocalCluster (each still in its
own sandbox process), and the study CLI gives the same results serially, on 2 workers, and
after a SIGKILL in the middle of a run followed by a rerun of the same command."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from neuro.search.tree import load_journal

# The reference is the serial run. The same program on the same data file is fitted by the
# same numpy code in a fresh `python -I` process either way, so scores agree to the last bits
# barring BLAS summation order; 1e-9 relative is far below the differences that separate
# programs (MAE 0.3 vs 0.6 here) and above any rounding noise of float64 sums of ~1e5 terms.
RTOL = 1e-9


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return math.isclose(a, b, rel_tol=RTOL, abs_tol=1e-12)


def assert_same_tree(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x.id, x.parent, x.op, x.hash, x.status) == (y.id, y.parent, y.op, y.hash, y.status)
        assert x.code == y.code
        for f in ("val", "quick_val", "test"):
            assert _close(getattr(x, f), getattr(y, f)), (x.id, f, getattr(x, f), getattr(y, f))
        assert set(x.ood) == set(y.ood) and all(_close(x.ood[k], y.ood[k]) for k in x.ood)
        assert set(x.faith) == set(y.faith) and all(_close(x.faith[k], y.faith[k]) for k in x.faith)


# a tiny study: 0.6 s trials, 60 windows per split, 3 cheap baselines, 3 nodes per search in
# generations of 2; a time budget far above the run time so only the node budget counts
TINY = dict(
    size="quick",
    duration=0.6,
    max_windows=60,
    nodes=3,
    generation=2,
    search_seconds=600.0,
    baselines=("mean", "last_value", "ridge_arx"),
    seed=0,
)
CLI = [
    "neuro",
    "study",
    "--duration",
    "0.6",
    "--max-windows",
    "60",
    "--nodes",
    "3",
    "--generation",
    "2",
    "--search-seconds",
    "600",
    "--baselines",
    "mean,last_value,ridge_arx",
    "--seed",
    "0",
]
SEARCHES = ("search_priors", "search_no_priors")
# baselines are fitted in different processes (this one, a worker, a CLI run), where BLAS may
# sum in another order: 1e-6 relative on MAEs of order 0.3-1 and scores in [0, 1] is far
# below any difference between two baselines or two programs
TABLE_RTOL = 1e-6


def _records(out: Path) -> dict[str, int]:
    return {str(p.relative_to(out)): p.stat().st_mtime_ns for p in out.rglob("*.done.json")}


def _table(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "results.csv", index_col=0).drop(columns="seconds")


def assert_same_study(a: Path, b: Path):
    ta, tb = _table(a), _table(b)
    assert list(ta.index) == list(tb.index) and list(ta.columns) == list(tb.columns)
    assert any(i.startswith("discovered") for i in ta.index)  # the searches finished a program
    np.testing.assert_allclose(ta.to_numpy(float), tb.to_numpy(float), rtol=TABLE_RTOL, atol=1e-12, equal_nan=True)
    for s in SEARCHES:
        assert_same_tree(load_journal(a / s / "journal.jsonl"), load_journal(b / s / "journal.jsonl"))


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    from neuro.study import run_and_report

    out = tmp_path_factory.mktemp("neuro-exec") / "serial"
    run_and_report(out, threads=1, **TINY)
    return out


@pytest.mark.slow  # whole studies (minutes)
def test_study_on_a_local_cluster_equals_serial(serial, local_client):
    from neuro.study import run_and_report

    client = local_client

    def executed():
        return sum(client.run(lambda dask_worker: dask_worker.state.executed_count).values())

    out = serial.parent / "dask"
    before = executed()
    run_and_report(out, client=client, **TINY)
    assert_same_study(serial, out)
    # every unit (3 baselines, every evaluated node of both searches) went through the store
    evaluated = sum(n.status != "duplicate" for s in SEARCHES for n in load_journal(out / s / "journal.jsonl"))
    assert len(_records(out)) == 3 + evaluated == len(_records(serial))
    # and ran as tasks on the two workers, not in this process
    assert executed() - before == 3 + evaluated


@pytest.mark.slow  # whole studies (minutes)
def test_sigkill_then_rerun_equals_uninterrupted(serial):
    out = serial.parent / "killed"
    cmd = [sys.executable, "-m", "scimech.cli.commands", *CLI, "--out", str(out)]
    env = {**os.environ, "SCIMECH_QUIET": "1", "MPLBACKEND": "Agg", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    total = len(_records(serial))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    # kill once the baselines and at least one candidate evaluation are stored
    while len(_records(out)) < 4 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _records(out)
    assert 4 <= len(before) < total, (len(before), total)  # really killed mid-way
    assert not (out / "report.md").exists()
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "Report:" in rerun.stdout
    after = _records(out)
    assert len(after) == total
    assert {k: after[k] for k in before} == before  # finished units were not redone
    assert_same_study(serial, out)


def test_results_of_other_data_are_set_aside_not_resumed(serial):
    # a folder whose study ran on other data (another simulator version, other traces) must not
    # be resumed: its units would be scored against the wrong task. Planted: the serial study
    # under another fingerprint, with a corrupted result table to show it is not reused.
    import shutil

    from neuro.study import run_and_report

    out = serial.parent / "other-data"
    shutil.copytree(serial, out)
    (out / "task_fingerprint.txt").write_text("0123456789abcdef\n")
    with pytest.warns(UserWarning, match="held a study of other data"):
        run_and_report(out, threads=1, **TINY)
    stale = out / "stale-0123456789abcdef"
    assert (stale / "results.csv").exists() and all((stale / s / "journal.jsonl").exists() for s in SEARCHES)
    assert (out / "task_fingerprint.txt").read_text().strip() == (serial / "task_fingerprint.txt").read_text().strip()
    assert_same_study(serial, out)  # recomputed from scratch, equal to the original


def test_study_writes_planted_truth_and_findings(serial):
    import re

    import xarray as xr

    lines = (serial / "recovery.txt").read_text().splitlines()
    m = re.match(r"neuro planted truth: (\d+) of (\d+) recovered \(", lines[0])
    assert m, lines[0]
    rows = [ln for ln in lines[3:] if ln.strip()]  # after the summary, a blank line and the header
    assessed = [ln for ln in rows if " NOT ASSESSED " not in ln]  # rows without a finite estimate: not counted
    assert int(m.group(2)) == len(assessed) and int(m.group(1)) == sum(" RECOVERED " in ln for ln in rows)
    found = (serial / "findings.txt").read_text().splitlines()
    assert found and all(
        re.match(r"(REPRODUCED|PARTLY reproduced|NOT reproduced|NOT ASSESSED|UNDECIDED|YES|NO)", f) for f in found
    )
    ev = xr.open_dataset(serial / "evidence.nc")
    assert ev["baseline_test"].dims == ("seed", "test_window") and list(ev["seed"].values) == [0]
    assert "context-256 task was skipped" in (serial / "report.md").read_text()  # 0.6 s trials are too short


def test_redraw_of_a_finished_study_writes_the_same_outcome_and_runs_nothing(serial, tmp_path):
    """`scimech neuro redraw` reads the study back from its units: the same findings and planted truth,
    byte for byte, and no unit run again (the planted truth's reference response is rebuilt too)."""
    import shutil

    from neuro.study import NeuroStudy

    out = tmp_path / "copy"
    shutil.copytree(serial, out)
    before = _records(out)
    for name in ("findings.txt", "recovery.txt"):
        (out / name).unlink()
    NeuroStudy().redraw(out)
    for name in ("findings.txt", "recovery.txt"):
        assert (out / name).read_bytes() == (serial / name).read_bytes(), name
    assert _records(out) == before
