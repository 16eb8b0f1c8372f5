"""scimech's --cluster runs on a real SLURM: identical results, jobs replaced, clear errors, honest exits.

Every test runs its study in a subprocess under a timeout (a cluster failure shows up as a hang)
and leaves no scimech job in the queue (conftest's autouse fixture checks it). The units of
tests_slurm/driver.py are tiny; each SLURM job asks for 1 core and 1 GB.
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import xarray as xr

pytestmark = pytest.mark.slurm

SCIMECH = str(Path(sys.executable).with_name("scimech"))


def _serial(tools, tmp_path, units: int = 6) -> dict:
    got = tools.run_driver(tmp_path / "serial", "--units", str(units))
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def _one_error(stderr: str) -> str:
    """The single error line, and no background traceback before it."""
    assert "Traceback" not in stderr and "Task exception was never retrieved" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("scimech: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.mark.timeout(300)
def test_map_units_on_slurm_equals_serial_and_leaves_an_empty_queue(tmp_path, cluster_file, tools):
    serial = _serial(tools, tmp_path)
    got = tools.run_driver(tmp_path / "slurm", "--cluster", str(cluster_file()), "--sleep", "0.5")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == serial  # the same floats, not just close ones
    # the units may all be done before the second job starts: the first count line is what is certain
    counts = re.findall(r"scimech: (\d) of (\d) SLURM jobs running", got.stderr)
    assert counts and counts[0][1] == "2" and [int(n) for n, _ in counts] == sorted(int(n) for n, _ in counts), (
        got.stderr
    )
    assert not tools.wait_queue_empty(15)
    assert list((tmp_path / "logs").glob("scimech-*.err")), "worker logs are in log_directory"


@pytest.mark.timeout(300)
def test_the_scaling_guides_cluster_file_runs_as_written(tmp_path, tools, slurm):
    """docs/scaling.md's example cluster file, only its partition set to this SLURM's."""

    doc = (Path(tools.driver).resolve().parents[1] / "docs" / "scaling.md").read_text()
    example = re.findall(r"```toml\n(.*?)```", doc, flags=re.S)[0]
    assert 'queue = "debug"' in example
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(example.replace('queue = "debug"', f'queue = "{slurm["partition"]}"'))
    serial = _serial(tools, tmp_path)
    got = tools.run_driver(tmp_path / "slurm", "--cluster", str(cfg), "--sleep", "0.5")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == serial
    assert list((tmp_path / "logs" / "dask").glob("scimech-*.err")), "the logs are where the guide says"
    assert not tools.wait_queue_empty(15)


@pytest.mark.timeout(420)
def test_ocean_study_on_slurm_equals_serial(tmp_path, cluster_file, tools):
    """The quick ocean study, one regime x 2 seeds, few epochs: findings, recovery and summary.nc
    byte for byte the same serially and on 2 one-core SLURM jobs."""
    args = ["ocean", "study", "--seeds", "0", "1", "--regimes", "mixed", "--epochs", "3"]
    times = {}
    for name, extra in (("serial", []), ("slurm", ["--cluster", str(cluster_file())])):
        t0 = time.monotonic()
        got = subprocess.run(
            [SCIMECH, *args, "--out", str(tmp_path / name), *extra],
            capture_output=True,
            text=True,
            timeout=400,
            cwd=tmp_path,
        )
        times[name] = time.monotonic() - t0
        assert got.returncode == 0, got.stderr[-3000:]
    print(f"ocean study (mixed x 2 seeds, 3 epochs): serial {times['serial']:.0f} s, SLURM {times['slurm']:.0f} s")
    for f in ("findings.txt", "recovery.txt"):
        assert filecmp.cmp(tmp_path / "serial" / f, tmp_path / "slurm" / f, shallow=False), f
    a, b = (xr.load_dataset(tmp_path / name / "summary.nc") for name in ("serial", "slurm"))
    assert a.attrs.pop("created") and b.attrs.pop("created")  # when it was written: the one difference
    xr.testing.assert_identical(a, b)  # every value bit for bit, every other attribute
    assert not tools.wait_queue_empty(15)


@pytest.mark.timeout(300)
def test_cancelling_every_job_mid_run_still_finishes_identically(tmp_path, cluster_file, tools):
    serial = _serial(tools, tmp_path)
    out = tmp_path / "slurm"
    proc = subprocess.Popen(
        [sys.executable, str(tools.driver), "--out", str(out), "--cluster", str(cluster_file()), "--sleep", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 180
        while not list(out.glob("units/*.done.json")):  # one unit finished: the others are under way
            assert proc.poll() is None and time.monotonic() < deadline, "the study did not start"
            time.sleep(0.5)
        running = [line.split()[0] for line in tools.our_jobs()]
        assert len(running) == 2
        subprocess.run(["scancel", *running], check=True, timeout=30)
        stdout, stderr = proc.communicate(timeout=200)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert json.loads(stdout) == serial
    for job in running:
        assert f"SLURM job {job} " in stderr and "submitting a replacement" in stderr, stderr
    assert not tools.wait_queue_empty(15)


@pytest.mark.timeout(480)
def test_a_study_outlives_the_walltime_of_its_only_job(tmp_path, cluster_file, tools):
    """One job with a 1-minute walltime and 5 units of 25 s: SLURM ends it (TIMEOUT) mid-unit,
    a new job takes over, the unit it was running is rerun, the saved ones are not.

    slurmctld checks time limits every 30 s and then waits KillWait (5 s), so a 1-minute job
    may live ~95 s; 125 s of work outlasts that however the checks fall."""
    serial = _serial(tools, tmp_path, units=5)
    got = tools.run_driver(
        tmp_path / "slurm",
        "--units",
        "5",
        "--sleep",
        "25",
        "--cluster",
        str(cluster_file(jobs=1, walltime="00:01:00")),
        timeout=450,
    )
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == serial
    assert "submitting a replacement" in got.stderr
    assert any("DUE TO TIME LIMIT" in p.read_text() for p in (tmp_path / "logs").glob("*.err"))
    assert not tools.wait_queue_empty(15)


@pytest.mark.timeout(120)
def test_a_wrong_partition_is_one_clear_error_within_a_minute(tmp_path, cluster_file, tools, slurm):
    t0 = time.monotonic()
    got = tools.run_driver(tmp_path / "out", "--cluster", str(cluster_file(queue="normal-does-not-exist")), timeout=100)
    took = time.monotonic() - t0
    assert got.returncode == 2, got.stderr
    line = _one_error(got.stderr)
    assert "ClusterError: sbatch refused the SLURM job" in line and "invalid partition" in line, line
    assert f"partitions here: {slurm['partition']}" in line, line
    assert took < 60, took
    assert not tools.our_jobs()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "over, says",
    [
        ({"cores": 64}, "PartitionConfig"),  # accepted by sbatch, pending for ever
        ({"memory": "4000GB"}, "Memory specification"),  # refused by sbatch
    ],
    ids=["cores", "memory"],
)
def test_an_oversized_request_is_one_clear_error_within_a_minute(tmp_path, cluster_file, tools, over, says):
    t0 = time.monotonic()
    got = tools.run_driver(tmp_path / "out", "--cluster", str(cluster_file(**over)), timeout=100)
    took = time.monotonic() - t0
    assert got.returncode == 2, got.stderr
    line = _one_error(got.stderr)
    assert says in line and "Nodes of the partition:" in line, line
    assert took < 60, took
    assert not tools.our_jobs()


@pytest.mark.timeout(120)
def test_a_busy_queue_ends_at_start_timeout_naming_the_reason(tmp_path, cluster_file, tools, slurm):
    blocker = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-J",
            "scimech-test-blocker",
            "-c",
            str(slurm["cpus"]),
            "--mem=100M",
            "-o",
            os.devnull,
            "--wrap",
            "sleep 100",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    try:
        t0 = time.monotonic()
        got = tools.run_driver(tmp_path / "out", "--cluster", str(cluster_file(start_timeout=15)), timeout=100)
        took = time.monotonic() - t0
    finally:
        subprocess.run(["scancel", blocker], timeout=30)
    assert got.returncode == 2, got.stderr
    assert "waiting for 2 SLURM jobs to start a worker: " in got.stderr and "pending: " in got.stderr
    line = _one_error(got.stderr)
    assert "no Dask worker connected within 15 s" in line and "pending: Resources" in line, line
    assert 15 <= took < 60, took


@pytest.mark.timeout(120)
def test_jobs_that_end_before_their_worker_connects_show_the_log(tmp_path, cluster_file, tools):
    got = tools.run_driver(tmp_path / "out", "--cluster", str(cluster_file(python="/nonexistent/python3")), timeout=100)
    assert got.returncode == 2, got.stderr
    line = _one_error(got.stderr)
    assert "ended before their Dask worker connected" in line and "worker logs: " in line, line
    assert "/nonexistent/python3: No such file or directory" in got.stderr
    assert not tools.our_jobs()


@pytest.mark.timeout(200)
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_the_study_with_its_status_and_no_jobs_left(tmp_path, cluster_file, tools, sig, status):
    """A real study command (`scimech ocean study --cluster`), stopped while its units run."""
    err = tmp_path / "stderr.txt"
    with err.open("w") as stderr_file:
        proc = subprocess.Popen(
            [
                SCIMECH,
                "ocean",
                "study",
                "--seeds",
                "0",
                "1",
                "--regimes",
                "mixed",
                "--epochs",
                "50",
                "--out",
                str(tmp_path / "out"),
                "--cluster",
                str(cluster_file()),
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr_file,
            text=True,
            cwd=tmp_path,
        )
        try:
            deadline = time.monotonic() + 150
            while "2 of 2 SLURM jobs running" not in err.read_text():  # workers connected: units run
                assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
                time.sleep(0.5)
            time.sleep(3)
            t0 = time.monotonic()
            proc.send_signal(sig)
            proc.wait(timeout=60)
            took = time.monotonic() - t0
        finally:
            proc.kill()
    stderr = err.read_text()
    assert proc.returncode == status, stderr[-3000:]
    assert f"scimech: {sig.name}: cancelled SLURM jobs" in stderr
    assert took < 40, took
    assert not tools.wait_queue_empty(15)
