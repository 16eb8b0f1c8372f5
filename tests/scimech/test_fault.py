"""Nothing lost: a run killed with SIGKILL resumes; a worker that dies is retried."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from scimech.run.parallel import get_client, map_units
from scimech.run.results import UnitStore

SCRIPT = textwrap.dedent(
    """
    import sys, time
    import numpy as np, xarray as xr
    from scimech.run.parallel import map_units

    def unit(i, delay):
        time.sleep(delay)
        rng = np.random.default_rng(i)
        return xr.Dataset({"v": ("k", rng.normal(size=5))}, attrs={"i": i})

    out, delay = sys.argv[1], float(sys.argv[2])
    map_units(unit, {f"u{i}": {"i": i, "delay": delay} for i in range(6)}, out)
    print("finished")
    """
)


def _expected(i):
    return np.random.default_rng(i).normal(size=5)


@pytest.mark.slow  # SIGKILL and resume
def test_sigkill_mid_run_then_rerun_finishes_and_matches(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    out = tmp_path / "out"
    env = {**os.environ, "SCIMECH_QUIET": "1"}
    proc = subprocess.Popen([sys.executable, str(script), str(out), "0.4"], env=env)
    store = UnitStore(out)
    deadline = time.time() + 120
    while len(store.keys()) < 2 and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = store.keys()
    assert 2 <= len(done_before) < 6, done_before
    rerun = subprocess.run([sys.executable, str(script), str(out), "0.0"], env=env, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert store.keys() == [f"u{i}" for i in range(6)]
    for i in range(6):
        np.testing.assert_array_equal(store.load(f"u{i}")["v"].values, _expected(i))


def dies_once(i: int, flag_dir: str) -> xr.Dataset:
    flag = Path(flag_dir) / f"died-{i}"
    if i == 1 and not flag.exists():
        flag.write_text("x")
        os._exit(1)  # the worker process dies mid-task
    return xr.Dataset({"v": ("k", np.random.default_rng(i).normal(size=5))})


def test_dead_worker_is_retried_without_corrupting_outputs(tmp_path):
    client = get_client("local", n_workers=2)
    try:
        res = map_units(
            dies_once,
            {f"u{i}": {"i": i, "flag_dir": str(tmp_path)} for i in range(3)},
            tmp_path / "out",
            client=client,
            retries=2,
        )
    finally:
        client.close()
    assert (tmp_path / "died-1").exists()  # the failure really happened
    for i in range(3):
        np.testing.assert_array_equal(res[f"u{i}"]["v"].values, _expected(i))
